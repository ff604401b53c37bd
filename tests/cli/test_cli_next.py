"""``ordmix next``: the batch and review files from ratings or from an ``ordmix fit`` folder.

The subcommand runs through ``cli.main`` (cli.py registers ``cli_next.add_subcommand``); errors
are one line, exit 2, and nothing is written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from ordmix_core.cli.main import main
from ordmix_core.results import decisions, reliability

ROOT = Path(__file__).resolve().parents[2]
RATINGS = ROOT / "demo_data" / "simulated-ratings.csv"
FIT = ["--restarts", "2", "--seed", "0", "--quiet"]


def run_next(argv: list[str]) -> int:
    """``ordmix next ...`` through the real command line (one line and exit 2 on a mistake)."""
    return main(["next", *argv])


@pytest.fixture(scope="module")
def fit_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("next") / "fit"
    assert main(["fit", str(RATINGS), "--out", str(d), *FIT]) == 0
    return d


def test_next_from_ratings_writes_batch_and_review(tmp_path, capsys):
    out, review = tmp_path / "next.csv", tmp_path / "sub" / "review.csv"
    argv = [str(RATINGS), "--out", str(out), "--batch", "25", "--review", str(review), *FIT]
    assert run_next(argv) == 0
    batch = pd.read_csv(out, dtype={"instance": str, "query": str})
    assert list(batch.columns) == [
        "rank", "instance", "query", "label", "p_wrong", "expected_gain", "n_ratings", "flag"
    ]  # fmt: skip
    assert len(batch) == 25 and batch["expected_gain"].is_monotonic_decreasing
    rev = pd.read_csv(review, dtype={"annotator": str})
    spammers = pd.read_csv(ROOT / "demo_data" / "simulated-spammers.csv")
    assert set(rev["annotator"]) == set(spammers.loc[spammers["spammer"] == 1, "annotator"])
    assert (rev["flag"] == "unreliable").all() and (rev["p_unreliable"] >= 0.9).all()
    assert capsys.readouterr().err == ""  # --quiet


def test_next_from_fit_folder_matches_the_ratings_route(fit_dir, tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert run_next([str(fit_dir), "--out", str(a), "--batch", "30"]) == 0
    err = capsys.readouterr().err
    assert f"wrote {a}: 30 of 300 items" in err and "expected to correct" in err
    assert run_next([str(RATINGS), "--out", str(b), "--batch", "30", *FIT]) == 0
    from_dir = pd.read_csv(a, dtype={"instance": str})
    from_fit = pd.read_csv(b, dtype={"instance": str})
    assert from_dir["instance"].tolist() == from_fit["instance"].tolist()
    pd.testing.assert_series_equal(from_dir["p_wrong"], from_fit["p_wrong"], rtol=1e-9)
    # the labels and flags too: read from the same posterior either way
    pd.testing.assert_series_equal(from_dir["label"], from_fit["label"])
    pd.testing.assert_series_equal(from_dir["flag"], from_fit["flag"])


def test_review_from_a_fit_folder(fit_dir, tmp_path):
    """``ordmix fit`` writes the flags into annotators.csv, so a fit folder gives --review."""
    from ordmix_core.estimators.ordinal_mixture import OrdinalMixture

    model = OrdinalMixture(n_restarts=2, random_state=0).fit(pd.read_csv(RATINGS, dtype=str))
    ann = model.annotators_.join(reliability.annotator_flags(model))
    review = tmp_path / "review.csv"
    argv = [str(fit_dir), "--out", str(tmp_path / "n.csv"), "--review", str(review), "--quiet"]
    assert run_next(argv) == 0
    rev = pd.read_csv(review, dtype={"annotator": str})
    assert len(rev) == (ann["flag"] == "unreliable").sum() > 0
    want = decisions.annotators_to_review(ann)
    assert rev["annotator"].tolist() == want["annotator"].tolist()
    pd.testing.assert_series_equal(rev["p_unreliable"], want["p_unreliable"], rtol=1e-12)
    # the same file as from the ratings
    again = tmp_path / "again.csv"
    argv = [str(RATINGS), "--out", str(tmp_path / "m.csv"), "--review", str(again), *FIT]
    assert run_next(argv) == 0
    pd.testing.assert_frame_equal(pd.read_csv(again, dtype={"annotator": str}), rev)


def test_review_from_a_folder_without_flags_says_why(fit_dir, tmp_path, capsys):
    """A folder whose annotators.csv has no flags (an older ordmix, or the Dask engine)."""
    folder = tmp_path / "fit"
    shutil.copytree(fit_dir, folder)
    ann = pd.read_csv(folder / "annotators.csv", dtype=str)
    ann.drop(columns=["flag", "p_unreliable"]).to_csv(folder / "annotators.csv", index=False)
    out = tmp_path / "n.csv"
    argv = [str(folder), "--out", str(out), "--review", str(tmp_path / "r.csv")]
    assert run_next(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "no column 'flag'" in err and "Dask engine" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--threshold", "0.3"], "--threshold and --confidence"),
        (["--review", "{tmp}/n.csv"], "name the same file"),
        (["--confidence", "0.4"], "confidence must be a number between 0.5 and 1"),
    ],
)
def test_folder_errors_are_one_line_and_write_nothing(fit_dir, tmp_path, capsys, extra, message):
    extra = [x.format(tmp=tmp_path) for x in extra]
    assert run_next([str(fit_dir), "--out", str(tmp_path / "n.csv"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("ordmix: error: ")
    assert list(tmp_path.iterdir()) == []


def test_ratings_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "n.csv"
    assert run_next([str(RATINGS), "--out", str(tmp_path), *FIT]) == 2
    assert "is a folder; give a file name" in capsys.readouterr().err
    assert run_next([str(RATINGS), "--out", str(out), "--threshold", "1.5", *FIT]) == 2
    assert "threshold must be a number between 0 and 1" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_next([str(empty), "--out", str(out)]) == 2
    assert "has no items.csv, categories.csv" in capsys.readouterr().err
    assert not out.exists()


def test_batch_larger_than_the_items(fit_dir, tmp_path):
    out = tmp_path / "n.csv"
    assert run_next([str(fit_dir), "--out", str(out), "--batch", "5000", "--quiet"]) == 0
    assert len(pd.read_csv(out)) == 300
