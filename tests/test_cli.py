import json

import pandas as pd
import pytest

from ordmix_core.cli import main
from ordmix_core.simulate import simulate_crowd


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
    assert set(trace["stage"]) == {"nospam", "mixture"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["winning_restart"] in (0, 1) and "converged" in summary
    assert summary["hyperparameters"]["phi"] == 10.0
    assert "restart" in capsys.readouterr().err  # progress on stderr


def test_parquet_and_flags(files):
    out = files / "out2"
    args = [
        "fit",
        str(files / "r.parquet"),
        "--out",
        str(out),
        "--restarts",
        "1",
        "--no-spam",
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

    monkeypatch.setattr("ordmix_core.model.OrdinalMixture.fit", boom)
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
    assert t.columns.tolist() == ["method", "mse", "correlation", "ndcg", "seconds", "n_gold"]
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
