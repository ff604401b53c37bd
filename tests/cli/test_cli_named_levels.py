"""Named levels through the command line: AdultContent2 with its letters G < P < R < X.

The shared copy writes the levels as 1..4; written back as the letters and fitted with
``--scale G,P,R,X`` (gold as letters too), every file says what the numbers' fit says, with
the names in place of the numbers: the same bytes elsewhere.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from _cli_helpers import run_cli
from _shared import need_adult

LETTERS = {"1": "G", "2": "P", "3": "R", "4": "X"}
#: items.csv's columns that hold levels
LEVEL_COLUMNS = ("label", "lower_90", "upper_90")


def _inputs(tmp_path, n_items: int | None, gold_items: int = 0) -> dict[str, str]:
    """The ratings and gold as numbers and as letters (the first ``n_items`` items and the
    first ``gold_items`` gold items only; gold is sparse among the first items)."""
    adult = need_adult()
    ratings = pd.read_csv(adult / "ratings.csv", dtype=str)
    gold = pd.read_csv(adult / "gold.csv", dtype=str)
    if n_items is not None:
        items = ratings["instance"].drop_duplicates()
        golden = items[items.isin(gold["instance"])].iloc[:gold_items]
        keep = pd.concat([items.iloc[:n_items], golden])
        ratings = ratings[ratings["instance"].isin(keep)]
        gold = gold[gold["instance"].isin(keep)]
    paths = {}
    for kind, r, g in (
        ("numbers", ratings, gold),
        ("letters", ratings.assign(rating=ratings["rating"].map(LETTERS)),
         gold.assign(truth=gold["truth"].map(LETTERS))),
    ):  # fmt: skip
        paths[kind] = str(tmp_path / f"{kind}.csv")
        paths[f"{kind}-gold"] = str(tmp_path / f"{kind}-gold.csv")
        r.to_csv(paths[kind], index=False)
        g.to_csv(paths[f"{kind}-gold"], index=False)
    return paths


def _fit_both(tmp_path, n_items: int | None, restarts: int, gold_items: int = 0) -> tuple:
    paths = _inputs(tmp_path, n_items, gold_items)
    out = {}
    for kind, scale in (("numbers", []), ("letters", ["--scale", "G,P,R,X"])):
        out[kind] = tmp_path / f"fit-{kind}"
        argv = ["fit", paths[kind], "--gold", paths[f"{kind}-gold"], "--out", out[kind]]
        rc, err, _ = run_cli([*argv, *scale, "--restarts", str(restarts), "--quiet"])
        assert rc == 0, err
    return out["numbers"], out["letters"]


def _named(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """A numbers' table as the letters' fit writes it: levels as letters, p_level_<letter>."""
    out = frame.copy()
    for c in columns:
        if c in out:
            out[c] = out[c].map(LETTERS).where(out[c].notna())
    return out.rename(columns={f"p_level_{k}": f"p_level_{v}" for k, v in LETTERS.items()})


def _same_fit_named(numbers, letters, tmp_path) -> None:
    items_n = pd.read_csv(numbers / "items.csv", dtype=str, keep_default_na=False)
    items_l = pd.read_csv(letters / "items.csv", dtype=str, keep_default_na=False)
    assert [c for c in items_l if c.startswith("p_level_")] == [f"p_level_{v}" for v in "GPRX"]
    assert set(items_l["label"]) <= set("GPRX") and (items_n["gold"] == "True").sum() > 50
    got = _named(items_n.replace("", None), LEVEL_COLUMNS).fillna("")
    pd.testing.assert_frame_equal(items_l, got)  # every number the same text
    for name in ("annotators.csv", "categories.csv", "restarts.csv", "trace.csv"):
        assert (numbers / name).read_bytes() == (letters / name).read_bytes(), name
    sum_n, sum_l = (json.loads((f / "summary.json").read_text()) for f in (numbers, letters))
    assert sum_l["hyperparameters"].pop("levels") == list("GPRX")
    assert sum_n["hyperparameters"] == sum_l["hyperparameters"]
    assert (
        sum_n["model_choice"] == sum_l["model_choice"] and sum_n["decisions"] == sum_l["decisions"]
    )
    # ordmix next from each folder: the batch with the letters, the review the same bytes
    for folder in (numbers, letters):
        argv = ["next", folder, "--out", tmp_path / f"next-{folder.name}.csv", "--quiet"]
        rc, err, _ = run_cli([*argv, "--review", tmp_path / f"review-{folder.name}.csv"])
        assert rc == 0, err
    next_n, next_l = (
        pd.read_csv(tmp_path / f"next-{f.name}.csv", dtype=str) for f in (numbers, letters)
    )
    assert set(next_l["label"]) <= set("GPRX")
    pd.testing.assert_frame_equal(next_l, _named(next_n, ["label"]))
    review = [(tmp_path / f"review-{f.name}.csv").read_bytes() for f in (numbers, letters)]
    assert review[0] == review[1] and review[0].count(b"\n") > 1


def test_the_first_items_of_adultcontent2_as_letters_fit_as_they_do_as_numbers(tmp_path) -> None:
    """The first 400 items and the first 60 gold items (450 items, 3,451 ratings): the labels
    are the expert's answer learned from gold, as on the whole crowd."""
    numbers, letters = _fit_both(tmp_path, 400, restarts=2, gold_items=60)
    _same_fit_named(numbers, letters, tmp_path)


@pytest.mark.slow
def test_adultcontent2_as_letters_fits_as_it_does_as_numbers(tmp_path) -> None:
    """The whole crowd (92,721 ratings, 333 gold items), gold-checked."""
    numbers, letters = _fit_both(tmp_path, None, restarts=3)
    _same_fit_named(numbers, letters, tmp_path)


def test_compare_scores_the_letters_as_the_numbers(tmp_path) -> None:
    paths = _inputs(tmp_path, 600)
    tables = []
    for kind, scale in (("numbers", []), ("letters", ["--scale", "G,P,R,X"])):
        out = tmp_path / f"compare-{kind}.csv"
        argv = ["compare", paths[kind], "--gold", paths[f"{kind}-gold"], "--out", out]
        rc, err, _ = run_cli([*argv, *scale, "--methods", "majority,dawid-skene,odm",
                              "--restarts", "2", "--quiet"])  # fmt: skip
        assert rc == 0, err
        tables.append(pd.read_csv(out).drop(columns="seconds"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[1]["label_error"].notna().all() and (tables[1]["n_gold"] > 10).all()
