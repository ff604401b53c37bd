"""One file per table: every review.csv and next.csv the dashboard or the command line writes
for the same fit is the same bytes (full numbers, no display text), and the pages' items.csv
and annotators.csv are the files ``ordmix fit`` writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from _cli_helpers import run_cli
from test_app_main import assert_clean, fit_current, new_app

RATINGS = Path(__file__).resolve().parents[2] / "demo_data" / "simulated-ratings.csv"


@pytest.fixture
def downloads(monkeypatch) -> dict[str, list[bytes]]:
    """Every download button's file, by its name, in the order the pages drew them."""
    files: dict[str, list[bytes]] = {}
    real = st.download_button

    def spy(label, data=None, file_name=None, *args, **kwargs):
        files.setdefault(file_name, []).append(data)
        return real(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", spy)
    return files


def test_every_review_and_next_file_of_one_fit_is_the_same_bytes(downloads, tmp_path) -> None:
    # the command line: a fit, then ordmix next from its folder and from the ratings
    fit = tmp_path / "fit"
    common = ["--restarts", "2", "--granularity", "query", "--quiet"]  # the Fit page's
    rc, err, _ = run_cli(["fit", RATINGS, "--out", fit, *common])
    assert rc == 0, err
    for source, name, options in ((fit, "folder", ["--quiet"]), (RATINGS, "ratings", common)):
        argv = ["next", source, "--out", tmp_path / f"next-{name}.csv", *options]
        rc, err, _ = run_cli([*argv, "--review", tmp_path / f"review-{name}.csv"])
        assert rc == 0, err
    cli = {
        kind: {(tmp_path / f"{kind}-{n}.csv").read_bytes() for n in ("folder", "ratings")}
        for kind in ("next", "review")
    }
    assert len(cli["next"]) == 1 and len(cli["review"]) == 1  # the two sources agree

    # the dashboard: the same file uploaded and fitted, then the Items and Annotators pages
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    at.file_uploader(key="data_upload").upload(RATINGS.name, RATINGS.read_bytes(), "text/csv")
    at.run()
    at.button(key="data_use_upload").click().run()
    at = fit_current(at, restarts=2)
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    at.switch_page("pages/annotators.py").run()
    assert_clean(at)
    assert len(downloads["review.csv"]) == 2  # the Items page's and the Annotators page's
    assert set(downloads["review.csv"]) == cli["review"]
    assert set(downloads["next.csv"]) == cli["next"]
    review = pd.read_csv(tmp_path / "review-folder.csv")
    assert len(review) == 9 and review["reliability"].dtype == float  # numbers, not "<0.001"
    assert review["expertise"].notna().all()
    assert (review["p_unreliable"].astype(str).str.len() > 6).any()  # not rounded to 3 places
    # and the pages' items.csv and annotators.csv are the command's
    assert downloads["items.csv"] == [(fit / "items.csv").read_bytes()]
    assert downloads["annotators.csv"] == [(fit / "annotators.csv").read_bytes()]
