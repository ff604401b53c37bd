"""The CLI's promise for any options and any small file (hypothesis).

Every run ends with exit 0 and complete outputs, or exit 2 with exactly one ``ordmix: error:``
line and nothing else on stderr; either way nothing but the output is touched, and a refused
run leaves the previous output byte for byte as it was.
"""

import contextlib
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ordmix_core.cli.main import main
from ordmix_core.results.output_paths import FIT_FILES

#: flag -> (valid values, invalid values); an invalid one is drawn about one time in eight
VALUES = {
    "--restarts": (["1", "2", "3"], ["0", "-1", "x", "99999999999999999999"]),
    "--max-iter": (["1", "3", "20"], ["0", "1.5", "100001"]),
    "--tol": (["0.1", "0", "5"], ["-1", "nan", "inf", "abc"]),
    "--seed": (["0", "3", "123456789012345678901234567890"], ["-5", "1.5", "x"]),
    "--granularity": (["instance", "global", "query"], ["bogus"]),
    "--spam": (["on", "off"], ["maybe"]),
    "--scale": (["1,2,3,4,5", "1,2,3", "-2,-1,0,1,2"], ["a", "3,2,1", "1,1e308", ""]),
    "--phi": (["0.5", "10"], ["0", "-1", "1e308", "nan"]),
    "--eta": (["0.5", "5"], ["0", "1e9"]),
    "--lambda": (["0.1", "2"], ["0", "-0.5"]),
    "--mu": (["1.5", "2"], ["1e308", "nan", "100", "-1"]),
}
SWITCHES = ["--real-valued", "--paper-updates", "--quiet", "--bogus"]
OUTS = ["new"] * 4 + ["previous"] * 4 + ["foreign", "input_dir", "dot", "empty", "file"]


@st.composite
def ratings_text(draw) -> str:
    kind = draw(st.sampled_from(["ok"] * 12 + ["text", "missing", "empty", "header", "huge"]))
    if kind == "empty":
        return ""
    k = draw(st.integers(2, 5))
    n_inst = draw(st.integers(1, 6))
    with_query = draw(st.booleans())
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, 3), st.integers(0, n_inst - 1), st.integers(1, k)),
            min_size=1,
            max_size=25,
        )
    )
    head = "annotator,instance,rating" + (",query" if with_query else "")
    if kind == "missing":
        head = "annotator,item_id,rating" + (",query" if with_query else "")
    if kind == "header":
        return head + "\n"
    lines = [head]
    for a, i, r in rows:
        value = str(r)
        lines.append(f"w{a},i{i},{value}" + (f",q{i % 2}" if with_query else ""))
    if kind == "text":
        lines.append("w0,i0,lots" + (",q0" if with_query else ""))
    if kind == "huge":
        lines.append("w0,i0,1e308" + (",q0" if with_query else ""))
    return "\n".join(lines) + "\n"


@st.composite
def cli_options(draw) -> list[str]:
    argv = []
    for flag, (valid, invalid) in VALUES.items():
        if draw(st.integers(0, 3)) == 0:
            value = draw(st.sampled_from(invalid if draw(st.integers(0, 7)) == 0 else valid))
            argv += [f"{flag}={value}"] if value.startswith("-") else [flag, value]
    for flag in SWITCHES:
        if draw(st.integers(0, 5 if flag != "--bogus" else 30)) == 0:
            argv.append(flag)
    return argv


def tree(folder: Path) -> dict:
    """Every file and folder under ``folder``: relative path -> bytes (None for a folder)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def _reference_output() -> Path:
    """One real ordmix output, copied as the 'previous output' of every example."""
    d = Path(tempfile.mkdtemp(prefix="ordmix-prop-ref-"))
    (d / "r.csv").write_text("annotator,instance,rating\na,i,1\nb,i,2\na,j,2\nb,j,2\nc,j,1\n")
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["fit", str(d / "r.csv"), "--out", str(d / "out"), "--restarts", "1"]) == 0
    return d / "out"


_REF: list[Path] = []


#: the examples of the fit property; a fit of a tiny file is 0.5-1 s of sweeps, more when it
#: does not converge (20 examples took 2-18 s), so the default run draws 10 of them and CI's
#: ``-m slow`` run 100 more (test_fit_any_options_many_small_files)
FIT_EXAMPLES = {"text": ratings_text(), "opts": cli_options(), "out_kind": st.sampled_from(OUTS)}
FIT_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@settings(max_examples=10, **FIT_SETTINGS)
@given(**FIT_EXAMPLES)
def test_fit_any_options_any_small_file(text, opts, out_kind):
    if not _REF:
        _REF.append(_reference_output())
    base = Path(tempfile.mkdtemp(prefix="ordmix-prop-"))
    cwd = os.getcwd()
    try:
        data = base / "data"
        data.mkdir()
        (data / "r.csv").write_text(text)
        (data / "notes.txt").write_text("not ordmix's")
        shutil.copytree(_REF[0], base / "previous")
        (base / "foreign").mkdir()
        (base / "foreign" / "keep.txt").write_text("someone else's")
        out = {
            "new": str(base / "new"),
            "previous": str(base / "previous"),
            "foreign": str(base / "foreign"),
            "input_dir": str(data),
            "dot": ".",
            "empty": "",
            "file": str(data / "r.csv"),
        }[out_kind]
        os.chdir(data)
        before = tree(base)
        err, std = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
            rc = main(["fit", str(data / "r.csv"), "--out", out, *opts])
        lines = err.getvalue().splitlines()
        after = tree(base)
        assert rc in (0, 2), (rc, lines)
        assert std.getvalue() == ""
        event(f"exit {rc}")
        if rc == 2:
            assert len(lines) == 1 and lines[0].startswith("ordmix: error: "), lines
            assert after == before  # nothing written, nothing deleted
            return
        assert out_kind in ("new", "previous"), (out_kind, lines)
        assert not any(line.startswith("ordmix: error") for line in lines)
        written = Path(out)
        assert sorted(os.listdir(written)) == sorted(FIT_FILES)
        summary = json.loads((written / "summary.json").read_text())
        items = pd.read_csv(written / "items.csv")
        assert len(items) == summary["n_instances"] and items["estimate"].map(math.isfinite).all()
        if "--quiet" not in opts:
            assert lines[-1].startswith("ordmix: wrote ") and "summary.json" in lines[-1]
        # everything but the output is as it was
        rest = {k: v for k, v in after.items() if not k.startswith(written.name)}
        assert rest == {k: v for k, v in before.items() if not k.startswith(written.name)}
    finally:
        os.chdir(cwd)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@settings(max_examples=100, **FIT_SETTINGS)
@given(**FIT_EXAMPLES)
def test_fit_any_options_many_small_files(text, opts, out_kind):
    """The property above over ten times as many files and options."""
    test_fit_any_options_any_small_file.hypothesis.inner_test(text, opts, out_kind)


def compare_flags_only(args: list[str]) -> list[str]:
    """``args`` without the fit flags compare does not take (--real-valued, --spam VALUE)."""
    out, skip = [], False
    for x in args:
        if skip or x == "--real-valued":
            skip = False
            continue
        skip = x == "--spam"
        if not skip:
            out.append(x)
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=ratings_text(),
    opts=cli_options().map(compare_flags_only),
    methods=st.sampled_from([None, "mean", "mean,odm-global", "odm-query", "nonsense"]),
    out_kind=st.sampled_from(["new"] * 5 + ["ratings", "gold", "folder", "foreign"]),
)
def test_compare_any_options_any_small_file(text, opts, methods, out_kind):
    base = Path(tempfile.mkdtemp(prefix="ordmix-prop-cmp-"))
    try:
        (base / "r.csv").write_text(text)
        (base / "g.csv").write_text("instance,truth\ni0,1\ni1,2\ni2,2\ni9,1\n")
        (base / "other.csv").write_text("a,b\n1,2\n")
        out = {
            "new": base / "t.csv",
            "ratings": base / "r.csv",
            "gold": base / "g.csv",
            "folder": base,
            "foreign": base / "other.csv",
        }[out_kind]
        argv = ["compare", str(base / "r.csv"), "--gold", str(base / "g.csv"), "--out", str(out)]
        argv += ["--methods", methods] if methods else []
        before = tree(base)
        err, std = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
            rc = main(argv + opts)
        lines = err.getvalue().splitlines()
        assert rc in (0, 2), (rc, lines)
        event(f"exit {rc}")
        if rc == 2:
            assert len(lines) == 1 and lines[0].startswith("ordmix: error: "), lines
            assert tree(base) == before
            return
        assert out_kind == "new"
        table = pd.read_csv(out)
        assert list(table.columns) == [
            "method", "mse", "correlation", "ndcg", "label_error", "calibration_error",
            "p_wrong_auroc", "log_loss", "seconds", "n_gold",
        ]  # fmt: skip
        assert {k: v for k, v in tree(base).items() if k != "t.csv"} == before
    finally:
        shutil.rmtree(base, ignore_errors=True)
