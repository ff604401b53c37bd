import io
import itertools
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from _cli_helpers import run_cli

from ordmix_core.cli import common as cli_common
from ordmix_core.cli.common import Progress
from ordmix_core.cli.main import main
from ordmix_core.data.crowd import prepare
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.baselines import BASELINES
from ordmix_core.estimators.option_frontends import options_for
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.evaluation.compare import METHODS
from ordmix_core.numerics import jit
from ordmix_core.results.output_paths import FIT_FILES


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    crowd = simulate_crowd(150, 12, 4, spammer_share=0.3, random_state=5)
    crowd.ratings.to_csv(d / "r.csv", index=False)
    crowd.ratings.to_parquet(d / "r.parquet")
    crowd.gold.to_csv(d / "gold.csv")
    return d


def test_fit_writes_every_output(files, capsys):
    out = files / "out"
    assert (
        main(
            [
                "fit",
                str(files / "r.csv"),
                "--out",
                str(out),
                "--restarts",
                "2",
                "--seed",
                "1",
                "--granularity",
                "query",
            ]
        )
        == 0
    )
    items = pd.read_csv(out / "items.csv")
    assert list(items.columns[:4]) == ["instance", "estimate", "sd", "n_ratings"]
    ann = pd.read_csv(out / "annotators.csv")
    assert list(ann.columns[:4]) == ["annotator", "n_ratings", "expertise", "reliability"]
    trace = pd.read_csv(out / "trace.csv")
    assert list(trace.columns[:3]) == ["restart", "iteration", "lower_bound"]
    # the default (extended) model: warm-up, mixture with uniform spam, mixture with pi learned
    assert set(trace["stage"]) == {"nospam", "uniform", "mixture"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["winning_restart"] in (0, 1) and "converged" in summary
    # the extended model's difficulty prior Gamma(2, 1) (the paper's is Gamma(10, 5))
    assert (summary["hyperparameters"]["phi"], summary["hyperparameters"]["eta"]) == (2.0, 1.0)
    choice = summary["model_choice"]
    assert choice["model"] == "extended" and choice["stages"] == ["nospam", "uniform", "mixture"]
    assert choice["lambda_b"] > 0 and len(choice["pi"]) == 5
    assert {"bias", "bias_sd"} <= set(ann.columns)
    assert "restart" in capsys.readouterr().err  # progress on stderr


def test_fit_with_gold_says_what_the_gold_did_to_the_labels(files, capsys):
    out = files / "out-gold"
    argv = ["fit", str(files / "r.csv"), "--out", str(out), "--restarts", "1"]
    assert main([*argv, "--gold", str(files / "gold.csv")]) == 0
    said = json.loads((out / "summary.json").read_text())["model_choice"]["labels"]
    err = capsys.readouterr().err.splitlines()
    assert said["model"].endswith("reported as the expert's answer learned from gold")
    assert f"ordmix: labels from the {said['model']}" in err
    assert main(argv) == 0  # without gold: a careful annotator's answer
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("ordmix: wrote") for line in err)
    said = json.loads((out / "summary.json").read_text())["model_choice"]["labels"]
    assert said["model"] == "ordinal confusion model, reported as a careful annotator's answer"
    assert f"ordmix: labels from the {said['model']}" in err


def test_parquet_and_flags(files):
    out = files / "out2"
    args = [
        "fit",
        str(files / "r.parquet"),
        "--out",
        str(out),
        "--restarts",
        "1",
        "--spam",
        "off",
        "--real-valued",
        "--paper-updates",
        "--scale",
        "1,2,3,4,5",
        "--quiet",
    ]
    assert main(args) == 0
    assert json.loads((out / "summary.json").read_text())["model"]["spam"] is False


def test_bad_file_one_line_nonzero_nothing_written(files, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("annotator,instance,rating\na,i,3\nb,i,lots\n")
    out = tmp_path / "out"
    assert main(["fit", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.csv" in err[0] and "row 3" in err[0]
    assert not out.exists()


def test_scale_mismatch_and_interrupt_keep_old_output(files, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert main(["fit", str(files / "r.csv"), "--out", str(out), "--restarts", "1"]) == 0
    before = (out / "items.csv").read_text()
    assert main(["fit", str(files / "r.csv"), "--out", str(out), "--scale", "1,2,3"]) == 2
    assert "not on the scale" in capsys.readouterr().err

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("ordmix_core.estimators.ordinal_mixture.OrdinalMixture.fit", boom)
    assert main(["fit", str(files / "r.csv"), "--out", str(out)]) == 130
    assert (out / "items.csv").read_text() == before


def test_compare_and_experiment(files, tmp_path):
    table = tmp_path / "t.csv"
    assert (
        main(
            [
                "compare",
                str(files / "r.csv"),
                "--gold",
                str(files / "gold.csv"),
                "--out",
                str(table),
                "--methods",
                "mean,odm-global",
                "--restarts",
                "1",
            ]
        )
        == 0
    )
    t = pd.read_csv(table)
    assert t.columns.tolist() == [
        "method", "mse", "correlation", "ndcg", "label_error", "calibration_error",
        "p_wrong_auroc", "log_loss", "seconds", "n_gold",
    ]  # fmt: skip
    assert (t["n_gold"] == 150).all()
    assert t["method"].tolist() == ["mean", "odm-global"]
    out = tmp_path / "exp"
    assert (
        main(
            [
                "experiment",
                "spam",
                str(files / "r.csv"),
                "--gold",
                str(files / "gold.csv"),
                "--out",
                str(out),
                "--methods",
                "mean",
                "--levels",
                "0,2",
            ]
        )
        == 0
    )
    assert {p.name for p in out.iterdir()} == {
        "results.csv",
        "mse.html",
        "correlation.html",
        "ndcg.html",
        "summary.json",
    }
    assert (
        main(
            [
                "compare",
                str(files / "r.csv"),
                "--gold",
                str(files / "gold.csv"),
                "--out",
                str(table),
                "--methods",
                "bogus",
            ]
        )
        == 2
    )


# --------------------------------------------------------------------------- the CLI contract
BAD_ARGS = [
    (
        ["--restarts", "0"],
        "argument --restarts: must be a whole number from 1 to 1,000 "
        "(or None: as the labels need), not 0",
    ),
    (["--max-iter", "0"], "argument --max-iter: must be a whole number from 1 to 100,000, not 0"),
    (["--seed", "1.5"], "argument --seed: must be a whole number >= 0, not '1.5'"),
    (["--seed", "-5"], "argument --seed: must be a whole number >= 0, not '-5'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (
        ["--granularity", "bogus"],
        "argument --granularity: must be one of instance, query, global, not 'bogus'",
    ),
    (
        ["--scale", "-2,-1,0,1,2"],
        "argument --scale: expected a value, but '-2,-1,0,1,2' looks like an option; if it is "
        "the value, write --scale=-2,-1,0,1,2",
    ),
    (["--scale", "a,b,a"], "argument --scale: must be finite numbers, strictly increasing"),
    (["--scale", "a,b"], "rating '3.0' is not one of the scale's levels a, b; fix the rating"),
    (["--scale", "3,2,1"], "argument --scale: must be finite numbers, strictly increasing"),
    (
        ["--restarts", "99999999999999999999"],
        "argument --restarts: must be a whole number from 1 to 1,000 "
        "(or None: as the labels need), not 99999999999999999999",
    ),
    (["--max-iter", "1e9"], "argument --max-iter: must be a whole number from 1 to 100,000"),
    (["--tol", "nan"], "argument --tol: must be a number >= 0, not nan"),
    (["--tol", "-1"], "argument --tol: must be a number >= 0, not -1.0"),
    (
        ["--phi", "0"],
        "argument --phi: must be a positive number up to 1e+06 (or None: the model's, paper 10, "
        "extended 2), not 0.0",
    ),
    (["--mu", "1e308"], "argument --mu: must be a number from -1e+150 to 1e+150"),
    (["--restarts"], "argument --restarts: expected one argument"),
]


@pytest.mark.parametrize("command", ["fit", "compare"])
@pytest.mark.parametrize(("extra", "message"), BAD_ARGS, ids=[" ".join(a) for a, _ in BAD_ARGS])
def test_bad_option_one_line_exit_2(files, tmp_path, command, extra, message):
    if command == "fit":
        argv = ["fit", files / "r.csv", "--out", tmp_path / "out", *extra]
    else:
        argv = ["compare", files / "r.csv", "--gold", files / "gold.csv"]
        argv += ["--out", tmp_path / "t.csv", *extra]
    rc, err, out = run_cli(argv)
    assert rc == 2 and out == ""
    assert len(err) == 1 and err[0].startswith("ordmix: error: "), err
    assert message in err[0]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: command"),
        (["fit"], "the following arguments are required: ratings, --out"),
        (["frobnicate"], "argument command: invalid choice: 'frobnicate'"),
        (
            [
                "experiment",
                "spam",
                "r.csv",
                "--gold",
                "g.csv",
                "--out",
                "o",
                "--levels",
                "1000000000000",
            ],
            "argument --levels: spam levels must be whole numbers from 0 to 100",
        ),
        (
            ["experiment", "spam", "r.csv", "--gold", "g.csv", "--out", "o", "--levels", "-1"],
            "argument --levels: spam levels must be whole numbers from 0 to 100 (fake ratings per "
            "instance), like 0,1,2; not '-1'",
        ),
        (
            ["experiment", "spam", "r.csv", "--gold", "g.csv", "--out", "o", "--levels", "x"],
            "argument --levels: spam levels must be whole numbers",
        ),
        (
            ["experiment", "spam", "r.csv", "--gold", "g.csv", "--out", "o", "--levels", ","],
            "argument --levels: give from 1 to 100 spam levels",
        ),
        (
            ["experiment", "spam", "r.csv", "--gold", "g.csv", "--out", "o", "--real-valued"],
            "unrecognized arguments: --real-valued",
        ),
    ],
)
def test_usage_errors_one_line_exit_2(argv, message):
    rc, err, out = run_cli(argv)
    assert rc == 2 and out == ""
    assert len(err) == 1 and err[0].startswith("ordmix: error: ") and message in err[0], err


def test_usage_error_subprocess_one_line_exit_2(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ordmix_core.cli.main",
            "fit",
            "x.csv",
            "--out",
            "o",
            "--restarts",
            "0",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "ordmix: error: argument --restarts: must be a whole number from 1 to 1,000 "
        "(or None: as the labels need), not 0 "
        "(see 'ordmix fit --help')"
    ]


def test_negative_scale_with_equals_works(tmp_path):
    r = tmp_path / "r.csv"
    r.write_text("annotator,instance,rating\na,i,-2\nb,i,-1\na,j,2\nb,j,1\nc,j,2\nc,i,0\n")
    rc, err, _ = run_cli(["fit", r, "--out", tmp_path / "o", "--scale=-2,-1,0,1,2", "--quiet"])
    assert rc == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["hyperparameters"]["scale"] == [-2, -1, 0, 1, 2]


def test_help_shows_defaults_and_no_markup(capsys):
    for command in ("fit", "compare", "experiment"):
        assert main([command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "`" not in text
        for o in options_for(command):
            assert o.flag in text
        assert "(default: 0)" in text  # seed
        words = " ".join(text.split())  # restarts: as the labels need
        assert "(default: the data start alone when the label fit makes the labels" in words
        assert "(default: 1000)" in text and "(default: 1e-06)" in text  # max-iter, tol
        assert "(default: 0.03)" in text  # tol-estimate
        assert "all sweeps of a restart, every stage together" in text  # what --max-iter caps
    assert main(["compare", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in METHODS:
        assert name in text
    assert main(["--help"]) == 0 and "`" not in capsys.readouterr().out


def test_ratings_of_1e308_one_line(tmp_path):
    r = tmp_path / "big.csv"
    r.write_text("annotator,instance,rating\na,i1,1\nb,i1,2\na,i2,1e308\nb,i2,-1e308\n")
    rc, err, _ = run_cli(["fit", r, "--out", tmp_path / "o"])
    assert rc == 2 and len(err) == 1 and "ordmix: error: " in err[0], err
    assert "must span at most 1e+150" in err[0]
    assert not (tmp_path / "o").exists()


def test_scheduler_that_does_not_answer_fails_fast(files, tmp_path):
    pytest.importorskip("distributed")
    t0 = time.monotonic()
    rc, err, _ = run_cli(
        ["fit", files / "r.csv", "--out", tmp_path / "o", "--engine", "dask"]
        + ["--scheduler", "tcp://127.0.0.1:1"]
    )
    assert time.monotonic() - t0 < 15
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("ordmix: error: --scheduler tcp://127.0.0.1:1: cannot connect")
    rc, err, _ = run_cli(
        ["fit", files / "r.csv", "--out", tmp_path / "o", "--engine", "dask"]
        + ["--scheduler", "no-port-here"]
    )
    assert rc == 2 and "is not an address like tcp://host:8786" in err[0]
    rc, err, _ = run_cli(
        ["fit", files / "r.csv", "--out", tmp_path / "o", "--scheduler", "tcp://h:1"]
    )
    assert rc == 2 and err == ["ordmix: error: --scheduler needs --engine dask"]


def test_progress_is_a_bar_on_a_terminal_and_a_line_per_restart_otherwise():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, log = Tty(), io.StringIO()
    bar, lines = Progress(3, stream=tty), Progress(3, stream=log)
    for restart, it in [(0, 1), (1, 1), (0, 2), (2, 1), (1, 2), (2, 2), (2, 3)]:
        bar(restart, it, -100.0 * it)
        lines(restart, it, -100.0 * it)
    bar.close()
    assert "\n" not in tty.getvalue() and tty.getvalue().count("\r") >= 3
    assert "restart 3 of 3" in tty.getvalue()
    assert log.getvalue().splitlines() == [
        "ordmix: restart 0 started (1 of 3)",
        "ordmix: restart 1 started (2 of 3)",
        "ordmix: restart 2 started (3 of 3)",
    ]
    quiet = io.StringIO()
    Progress(3, quiet=True, stream=quiet)(0, 1, -1.0)
    assert quiet.getvalue() == ""


def test_a_lone_restarts_bar_follows_its_whole_run(monkeypatch):
    """A restart that runs alone goes through every stage (~200 sweeps): after 40 its bar is a
    fifth full, not nearly full as a race's restart would be; a restart beyond those counted
    (a scale not known when the bar was made) is counted."""

    class Tty(io.StringIO):
        def isatty(self):
            return True

    def filled(stream: io.StringIO) -> int:
        return stream.getvalue().rsplit("ordmix: [", 1)[1].split("]")[0].count("#")

    clock = itertools.count(0.0, 1.0)  # a second between reports: every one is drawn
    monkeypatch.setattr(cli_common.time, "monotonic", lambda: next(clock))
    alone, raced = Tty(), Tty()
    one, three = Progress(1, stream=alone), Progress(3, stream=raced)
    for it in range(1, 41):
        one(0, it, -1.0)
        three(0, it, -1.0)
    assert filled(alone) == round(24 * 40 / Progress.LONE_SWEEPS)
    assert filled(raced) == round(24 / 3)  # a third: one of three restarts at its typical 40
    one(1, 1, -1.0)
    assert "restart 2 of 2" in alone.getvalue()


def test_progress_a_line_per_sweep_when_asked_as_the_dask_engine_is():
    log = io.StringIO()
    lines = Progress(2, stream=log, every_sweep=True)
    for restart, bound in [(0, -300.0), (1, -290.5), (0, -120.25)]:
        lines(restart, 0, bound)
    assert log.getvalue().splitlines() == [
        "ordmix: restart 0, sweep 1, lower bound -300.00",
        "ordmix: restart 1, sweep 1, lower bound -290.50",
        "ordmix: restart 0, sweep 2, lower bound -120.25",
    ]


def test_progress_says_once_that_numba_is_compiling():
    """While numba compiles a fit's kernels: one line "compiling (once, about N s)" in a log,
    the same with the seconds so far on a terminal, nothing when quiet."""

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, log, quiet = Tty(), io.StringIO(), io.StringIO()
    for stream, q in ((tty, False), (log, False), (quiet, True)):
        progress = Progress(3, quiet=q, stream=stream)
        for report in [(0, 4, True), (1, 4, False), (1, 4, True), (2, 4, False)]:
            progress.compiling(*report)
        progress(0, 1, -1.0)
        progress.close()
    note = f"ordmix: {jit.compile_note(4)}"
    assert log.getvalue().splitlines() == [note, "ordmix: restart 0 started (1 of 3)"]
    assert "\n" not in tty.getvalue() and tty.getvalue().count(f"\r{note}: ") == 4
    assert quiet.getvalue() == ""


def test_fit_progress_and_closing_line(files, tmp_path):
    rc, err, _ = run_cli(["fit", files / "r.csv", "--out", tmp_path / "o", "--restarts", "4"])
    assert rc == 0
    assert len([e for e in err if " started (" in e]) == 4
    assert sorted(os.listdir(tmp_path / "o")) == sorted(FIT_FILES)
    # five closing lines: the items' labels, which model they come from, the annotators'
    # flags, the crowd's agreement, what was written where
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    items, ann = summary["decisions"]["items"], summary["decisions"]["annotators"]
    agree = summary["agreement"]
    assert err[-2] == (
        f"ordmix: agreement between annotators (Krippendorff's alpha, ordinal): "
        f"{agree['alpha']:.3f} (95% bootstrap interval {agree['lower']:.3f} to "
        f"{agree['upper']:.3f}), over {agree['items']:,} items rated at least twice (1: "
        "perfect, 0: what chance gives)"
    )
    del err[-2]
    assert err[-3] == f"ordmix: labels from the {summary['model_choice']['labels']['model']}"
    assert err[-4] == (
        f"ordmix: {summary['n_instances']:,} items: {items['confident']:,} labelled "
        f"confidently, {items['uncertain']:,} uncertain, {items['undetermined']:,} "
        "undetermined (a tie between two levels)"
    )
    assert err[-2].startswith(
        f"ordmix: {summary['n_annotators']:,} annotators: {ann['unreliable']:,} flagged "
        f"unreliable, {ann['ok']:,} ok, {ann['undetermined']:,} undetermined"
    )
    trace = pd.read_csv(tmp_path / "o" / "trace.csv")
    same = OrdinalMixture(n_restarts=4, random_state=0).fit(pd.read_csv(files / "r.csv", dtype=str))
    spam = 1.0 - float(np.mean(same.omega_))  # each rating's spam probability, averaged
    assert err[-2].endswith(f"; {100 * spam:.0f}% of the ratings treated as spam")
    assert err[-1].startswith(f"ordmix: wrote {tmp_path / 'o'}/ ({', '.join(FIT_FILES)}) in ")
    assert err[-1].endswith(f" s, {len(trace):,} sweeps; every column: docs/outputs.md")


# --------------------------------------------------------------------------- each flag's effect
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("flags")
    crowd = simulate_crowd(60, 8, 4, spammer_share=0.3, random_state=11)
    crowd.ratings.to_csv(d / "r.csv", index=False)
    return d, crowd.ratings


def cli_fit(small, name, *flags):
    d, _ = small
    out = d / name
    rc, err, _ = run_cli(["fit", d / "r.csv", "--out", out, "--quiet", *flags])
    assert rc == 0, err
    items = pd.read_csv(out / "items.csv", dtype={"instance": str}).set_index("instance")
    return items, json.loads((out / "summary.json").read_text()), out


@pytest.fixture(scope="module")
def default_fit(small):
    return cli_fit(small, "default", "--restarts", "2")


FLAG_CASES = [
    ([], {}),
    (["--real-valued"], {"ordinal": False}),
    (["--paper-updates"], {"updates": "paper"}),
    (["--spam", "off"], {"spam": False}),
    (["--spam", "on"], {"spam": True}),
    (["--granularity", "global"], {"granularity": "global"}),
    (["--granularity", "query"], {"granularity": "query"}),
    (["--scale", "0,1,2,3,4,5,6"], {"scale": "0,1,2,3,4,5,6"}),
    # the bound alone: here the estimates' half decides when the default stops
    (["--tol", "0.01", "--tol-estimate", "0"], {"tol": 0.01, "tol_estimate": 0.0}),
    (["--tol-estimate", "0"], {"tol_estimate": 0.0}),
    (["--max-iter", "2"], {"max_iter": 2}),
    (["--seed", "7"], {"random_state": 7}),
    (["--phi", "1"], {"phi": 1.0}),
    (["--eta", "50"], {"eta": 50.0}),
    (["--lambda", "3"], {"lam": 3.0}),
    (["--mu", "1.5"], {"mu": 1.5}),
]


@pytest.mark.parametrize(
    ("flags", "kw"), FLAG_CASES, ids=[" ".join(f) or "default" for f, _ in FLAG_CASES]
)
def test_flag_gives_the_library_fit_with_that_parameter(small, default_fit, flags, kw):
    _, ratings = small
    items, summary, out = cli_fit(small, "flag", "--restarts", "2", *flags)
    with warnings.catch_warnings():  # --max-iter 2 warns; the CLI's warning is tested apart
        warnings.simplefilter("ignore")
        lib = OrdinalMixture(**{"n_restarts": 2, "random_state": 0, **kw}).fit(ratings)
    est = lib.estimates_.rename(index=str)
    np.testing.assert_allclose(items["estimate"].loc[est.index], est, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(items["sd"].loc[est.index], lib.sd_.to_numpy(), rtol=1e-9)
    assert summary["lower_bound"] == pytest.approx(lib.lower_bound_, rel=1e-12)
    for k, v in kw.items():
        if k != "random_state":
            assert summary["model"][k] == v
    if flags == ["--spam", "on"]:  # the default's spam component is on: the same fit
        pd.testing.assert_frame_equal(items, default_fit[0])
    elif flags:  # the flag changed the fit: its estimates, or its restarts' path (the seed)
        trace = pd.read_csv(out / "trace.csv")
        default_trace = pd.read_csv(default_fit[2] / "trace.csv")
        assert not np.allclose(items["estimate"], default_fit[0]["estimate"], rtol=1e-6) or not (
            trace.shape == default_trace.shape
            and np.allclose(trace["lower_bound"], default_trace["lower_bound"], rtol=1e-9)
        )


def test_restarts_and_granularity_flags_in_the_files(small):
    _, summary, out = cli_fit(small, "r3", "--restarts", "3", "--granularity", "global")
    assert len(pd.read_csv(out / "restarts.csv")) == 3
    assert set(pd.read_csv(out / "trace.csv")["restart"]) <= {0, 1, 2}
    assert len(pd.read_csv(out / "categories.csv")) == 1
    _, _, out = cli_fit(small, "r1", "--restarts", "1", "--granularity", "query")
    assert len(pd.read_csv(out / "restarts.csv")) == 1
    assert len(pd.read_csv(out / "categories.csv")) == small[1]["query"].nunique() > 1
    _, summary, out = cli_fit(
        small, "mi", "--restarts", "1", "--max-iter", "2", "--tol", "0", "--spam", "on"
    )
    # max_iter caps all sweeps of a restart: the warm-up gets at most half, the rest goes to
    # the default model's mixture (uniform, then learned pi, when there are sweeps left)
    per_stage = pd.read_csv(out / "trace.csv").groupby("stage").size()
    assert per_stage.sum() == 2 and per_stage.get("nospam", 0) <= 1
    assert summary["iterations"] <= 2 and summary["converged"] is False


def test_seed_zero_by_default_two_runs_agree(small, default_fit):
    again, summary, _ = cli_fit(small, "again", "--restarts", "2", "--seed", "0")
    pd.testing.assert_frame_equal(again, default_fit[0])
    assert summary["settings"]["random_state"] == 0


# --------------------------------------------------------------------------- compare
def test_compare_granularity_chooses_the_model_rows(files, tmp_path):
    base = ["compare", files / "r.csv", "--gold", files / "gold.csv", "--restarts", "1"]
    rc, err, _ = run_cli([*base, "--out", tmp_path / "a.csv", "--methods", "mean,odm-instance"])
    assert rc == 0
    rc, err, _ = run_cli([*base, "--out", tmp_path / "t.csv", "--granularity", "instance"])
    assert rc == 0, err
    t = pd.read_csv(tmp_path / "t.csv")
    assert t["method"].tolist() == [*BASELINES, "odm-paper-instance", "odm"]
    rc, err, _ = run_cli(
        [*base, "--out", tmp_path / "b.csv", "--methods", "mean,odm-paper-instance"]
    )
    assert rc == 0
    b = pd.read_csv(tmp_path / "b.csv").set_index("method")
    # the same model row as when named: the first odm fit draws first from the seed
    got = t.set_index("method").loc["odm-paper-instance", "mse"]
    assert got == b.loc["odm-paper-instance", "mse"]
    rc, err, _ = run_cli(
        [*base, "--out", tmp_path / "x.csv", "--granularity", "instance", "--methods", "odm-global"]
    )
    assert rc == 2 and "method odm-global fits at granularity global" in err[0]


def test_compare_by_default_on_data_without_query_column(files, tmp_path):
    r = pd.read_csv(files / "r.csv").drop(columns="query")
    r.to_csv(tmp_path / "r.csv", index=False)
    gold = pd.read_csv(files / "gold.csv")
    extra = pd.DataFrame({gold.columns[0]: ["never-rated-1", "never-rated-2"], "truth": [1, 2]})
    pd.concat([gold, extra]).to_csv(tmp_path / "g.csv", index=False)
    argv = ["compare", tmp_path / "r.csv", "--gold", tmp_path / "g.csv", "--restarts", "1"]
    rc, err, _ = run_cli([*argv, "--out", tmp_path / "t.csv"])
    assert rc == 0, err
    assert "ordmix: note: odm-paper-query skipped: the ratings have no query column" in err
    assert (
        "ordmix: note: 2 of 152 gold item(s) have no ratings and are not scored "
        "(e.g. 'never-rated-1', 'never-rated-2')" in err
    )
    t = pd.read_csv(tmp_path / "t.csv")
    assert "odm-paper-query" not in set(t["method"]) and "odm" in set(t["method"])
    assert (t["n_gold"] == 150).all()
    rc, err, _ = run_cli([*argv, "--out", tmp_path / "q.csv", "--methods", "odm-query"])
    assert rc == 2 and len(err) == 1 and "method odm-query needs a 'query' column" in err[0]


def test_compare_gold_outside_the_scale_refused(files, tmp_path):
    gold = pd.read_csv(files / "gold.csv")
    gold.iloc[3, 1] = 2000
    gold.to_csv(tmp_path / "g.csv", index=False)
    rc, err, _ = run_cli(
        ["compare", files / "r.csv", "--gold", tmp_path / "g.csv", "--out", tmp_path / "t.csv"]
    )
    assert rc == 2 and len(err) == 1, err
    assert f"instance '{gold.iloc[3, 0]}' has truth 2000, outside the rating scale" in err[0]
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize("code", [0, 2])
def test_the_program_exits_with_mains_code(monkeypatch, code) -> None:
    """``ordmix`` (``cli.run``, the console script) exits with ``main``'s code."""
    from ordmix_core.cli import main as cli

    exits = []
    monkeypatch.setattr(cli, "main", lambda: code)
    monkeypatch.setattr(cli.os, "_exit", exits.append)  # the process itself is not left
    cli.run()
    assert exits == [code]
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")) as f:
        assert 'ordmix = "ordmix_core.cli.main:run"' in f.read()


def test_a_tiny_file_fits_without_infinities(tmp_path):
    """Two ratings of one item: too little for an interval of the agreement or a standard
    error anywhere, and the closing lines and summary.json say so rather than print inf or
    NaN (summary.json stays strict JSON)."""
    (tmp_path / "tiny.csv").write_text("annotator,instance,rating\na,x,1\nb,x,2\n")
    rc, err, _ = run_cli(["fit", tmp_path / "tiny.csv", "--out", tmp_path / "o"])
    assert rc == 0 and not any(w in {"inf", "-inf", "nan"} for e in err for w in e.split()), err

    def refuse(constant: str) -> None:
        raise AssertionError(f"summary.json holds {constant}")

    json.loads((tmp_path / "o" / "summary.json").read_text(), parse_constant=refuse)


def test_compare_gives_the_data_sets_agreement_as_context(files, tmp_path):
    """Beside the methods' scores, the agreement of the crowd they were scored on."""
    import krippendorff

    from ordmix_core.results import agreement

    argv = ["compare", files / "r.csv", "--gold", files / "gold.csv", "--out", tmp_path / "t.csv"]
    rc, err, _ = run_cli([*argv, "--methods", "mean"])
    assert rc == 0
    (line,) = [e for e in err if "Krippendorff" in e]
    data = prepare(pd.read_csv(files / "r.csv", dtype=str))
    counts = agreement.level_counts(data)
    alpha = krippendorff.alpha(value_counts=counts, level_of_measurement="ordinal")
    assert line.startswith(
        f"ordmix: agreement between annotators (Krippendorff's alpha, ordinal): {alpha:.3f} "
        "(95% bootstrap interval "
    )
    assert line == f"ordmix: {agreement.words(agreement.crowd_agreement(data).as_dict())}"


def test_the_command_line_starts_without_scipy_stats():
    """scipy.stats costs about a second to import; only compare's scores need it."""
    code = (
        "import sys\n"
        "from ordmix_core.cli.main import build_parser\n"
        "build_parser().parse_args(['fit', 'x.csv', '--out', 'o'])\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"
