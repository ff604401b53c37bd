"""report: a data set validated once, and its validation report against plain pandas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ordmix_core.data.crowd as data_mod
import ordmix_core.io as oio
from ordmix_core.dashboard.fit_job import FitJob, FitParams
from ordmix_core.dashboard.report import (
    best_at,
    best_methods,
    comparison_words,
    guess_column,
    make_dataset,
    validation_report,
)
from ordmix_core.errors import InputError

DEMO = Path(__file__).resolve().parents[2] / "demo_data"

RAW = pd.DataFrame(
    {
        "worker": ["a1", "a2", "a1", "a3", "a2", "a3", "a1", "a1"],
        "task": ["007", "007", "008", "008", "009", "009", "007", "007"],
        "label": ["1", "2", "3", "3", "1", "1", "1", "3"],
        "query": ["q1", "q1", "q1", "q1", "q2", "q2", "q1", "q1"],
    }
)


def pandas_report(r: pd.DataFrame, levels: list[float], gold: pd.Series | None) -> dict:
    """The report computed the obvious way with pandas on the normalised table."""
    per_item = r.groupby("instance").size()
    per_ann = r.groupby("annotator").size()
    counts = r["rating"].value_counts().reindex(levels, fill_value=0)
    out = {
        "ratings": len(r),
        "annotators": per_ann.size,
        "instances": per_item.size,
        "queries": r["query"].nunique() if "query" in r else None,
        "per_item": per_item.describe()[["min", "50%", "mean", "max"]].to_dict(),
        "per_annotator": per_ann.describe()[["min", "50%", "mean", "max"]].to_dict(),
        "single_rating_items": int((per_item == 1).sum()),
        "duplicate_pairs": int(r.duplicated(["annotator", "instance"]).sum()),
        "exact_duplicate_rows": int(r.duplicated().sum()),
        "level_counts": counts.to_numpy().tolist(),
        "unused_levels": [v for v in levels if counts[v] == 0],
    }
    if gold is not None:
        inside = gold.index.isin(per_item.index)
        out["gold"] = {
            "gold_items": len(gold),
            "rated_gold_items": int(inside.sum()),
            "gold_not_rated": int((~inside).sum()),
            "gold_off_scale": int((~gold.isin(levels)).sum()),
        }
    return out


def check_report(ds, raw: pd.DataFrame, levels: list[float], gold=None) -> None:
    rep = validation_report(ds)
    ref = pandas_report(data_mod.normalize_columns(raw), levels, gold)
    for key, value in ref.items():
        got = rep[key]
        if key == "level_counts":
            assert got["ratings"].tolist() == value and got.index.tolist() == levels
        elif isinstance(value, dict):
            assert got == pytest.approx(value), key
        else:
            assert got == value, key


def test_report_matches_pandas_with_duplicates_an_unused_level_and_gold():
    gold = pd.Series([1.0, 1.0, 9.0, 2.0], index=["007", "009", "010", "x"], name="truth")
    ds = make_dataset("r.csv", RAW, gold, "1,2,3,4")
    check_report(ds, RAW, [1.0, 2.0, 3.0, 4.0], gold)
    rep = validation_report(ds)
    # by hand: a1 rated 007 three times (1, 1, 3): two repeated pairs, one exact repeat
    assert (rep["duplicate_pairs"], rep["exact_duplicate_rows"]) == (2, 1)
    assert rep["unused_levels"] == [4.0] and rep["scale"] == "1,2,3,4"
    assert rep["gold"] == {
        "gold_items": 4,
        "rated_gold_items": 2,
        "gold_not_rated": 2,
        "gold_off_scale": 1,
    }


def test_report_matches_pandas_on_the_trec_demo():
    raw = oio.read_ratings(DEMO / "trec-rf10-ratings.csv")
    gold = oio.read_gold(DEMO / "trec-rf10-gold.csv")
    ds = make_dataset("trec", raw, gold)
    check_report(ds, raw, ds.scale.values.tolist(), gold)
    assert validation_report(ds)["ratings"] == 91_783


def test_ratings_come_back_as_normalised_in_row_order():
    ds = make_dataset("r.csv", RAW)
    back = ds.ratings
    ref = data_mod.normalize_columns(RAW)
    pd.testing.assert_frame_equal(back, ref, check_dtype=False)
    assert back["instance"].tolist()[:3] == ["007", "007", "008"]  # leading zeros kept
    assert ds.ratings is back  # built once
    assert ds.n_ratings == 8 and ds.has_query
    assert not make_dataset("r.csv", RAW.drop(columns="query")).has_query


def test_the_table_is_validated_once_per_fit(monkeypatch):
    """One validation (``data._select``: the columns read and checked by ``prepare``) when the
    data set is made; the fit reuses its prepared ratings."""
    calls = []
    real = data_mod._select
    monkeypatch.setattr(data_mod, "_select", lambda *a, **k: calls.append(1) or real(*a, **k))
    ds = make_dataset("r.csv", RAW)
    validation_report(ds)
    assert len(calls) == 1
    job = FitJob(dataset=ds, params=FitParams(n_restarts=1))
    job.run()
    assert job.error is None and job.model is not None
    assert len(calls) == 1
    assert job.model.data_.n_ratings == 8


def test_a_new_scale_and_bad_input_are_clear_errors():
    ds = make_dataset("r.csv", RAW)
    wider = make_dataset(ds.name, ds.ratings, None, "1,2,3,4,5,6")
    assert wider.scale.values.tolist() == [1, 2, 3, 4, 5, 6]
    assert np.array_equal(wider.data.level, ds.data.level)
    with pytest.raises(InputError, match="not on the scale"):
        make_dataset(ds.name, ds.ratings, None, "1,2")
    with pytest.raises(InputError, match="none of the gold file's instances"):
        make_dataset("r.csv", RAW, pd.Series([1.0], index=["nope"]))
    with pytest.raises(InputError, match="required column"):
        make_dataset("r.csv", RAW.drop(columns="label"))


def test_guess_column_uses_the_aliases():
    cols = ["Worker ", "doc", "LABEL"]
    assert guess_column(cols, "annotator") == "Worker "
    assert guess_column(cols, "rating") == "LABEL"
    assert guess_column(cols, "instance") is None


def test_the_best_method_per_metric_and_a_winning_baseline_in_words():
    table = pd.DataFrame(
        {
            "method": ["mean", "majority", "odm-query", "odm-global"],
            "mse": [0.40, 0.50, 0.30, 0.30],
            "correlation": [0.80, 0.70, 0.75, 0.60],
            "ndcg": [0.90, np.nan, 0.95, 0.93],
        }
    )
    assert best_methods(table) == {
        "mse": ["odm-query", "odm-global"],  # a tie: both are best
        "correlation": ["mean"],
        "ndcg": ["odm-query"],
    }
    assert best_at(table).tolist() == ["correlation", "", "MSE, NDCG", "MSE"]
    assert comparison_words(table) == [
        "Best MSE: odm-query and odm-global (0.3000).",
        "Best correlation: mean (0.8000). A baseline wins here: the best odm method, "
        "odm-query, has 0.7500.",
        "Best NDCG: odm-query (0.9500).",
    ]
    only_baselines = table[table["method"].isin(["mean", "majority"])]
    assert all("A baseline wins" not in w for w in comparison_words(only_baselines))
    assert "ndcg" not in best_methods(table.assign(ndcg=np.nan))


def test_rated_is_membership_in_the_rated_instances():
    """``rated``: each ID (in any order, repeated or not) is True exactly when an instance of
    the ratings has it, as a set's membership says."""
    from ordmix_core.dashboard.report import rated

    instances = np.array(["a", "b:1", "10", "c"], dtype=object)
    ids = pd.Index(["10", "x", "a", "a", "b:1", "1", "C"], dtype="str")
    expected = [i in set(instances) for i in ids]
    assert rated(ids, instances).tolist() == expected
    assert rated(pd.Index([], dtype="str"), instances).tolist() == []
