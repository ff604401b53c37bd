"""The output schema: the files of ``ordmix fit``, the frames the dashboard downloads."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ordmix_core import outputs
from ordmix_core.model import OrdinalMixture
from ordmix_core.simulate import simulate_crowd


@pytest.fixture(scope="module")
def model() -> OrdinalMixture:
    crowd = simulate_crowd(n_items=40, n_annotators=6, ratings_per_item=3, random_state=2)
    return OrdinalMixture("query", n_restarts=2, random_state=0).fit(crowd.ratings)


def test_write_fit_outputs_writes_exactly_the_declared_files(model, tmp_path) -> None:
    outputs.write_fit_outputs(model, tmp_path, settings={"func": print, "path": tmp_path})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(outputs.FILES)
    ids = {"instance": str, "annotator": str, "query": str, "category": str}
    for name in outputs.TABLES:
        written = pd.read_csv(tmp_path / f"{name}.csv", dtype=ids)
        expected = outputs.table(model, name)
        assert list(written.columns) == list(expected.columns), name
        assert len(written) == len(expected), name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["settings"] == {"path": str(tmp_path)}  # no "func"; paths as text
    assert summary["hyperparameters"]["pi"] == model.hyperparams_["pi"]
    assert "random_state" not in summary["model"] and summary["model"]["granularity"] == "query"


def test_tables_put_ids_first_in_a_fixed_order(model) -> None:
    items = outputs.items_table(model)
    assert list(items.columns) == ["instance", "estimate", "sd", "n_ratings", "query", "category"]
    np.testing.assert_array_equal(items["estimate"], model.estimates_)
    ann = outputs.annotators_table(model)
    assert list(ann.columns) == [
        "annotator", "n_ratings", "expertise", "reliability", "expertise_sd", "spam_share",
        "bias", "bias_sd",
    ]  # fmt: skip
    trace = outputs.table(model, "trace")  # no named index: nothing added
    assert list(trace.columns) == ["restart", "iteration", "lower_bound", "stage"]


def test_learned_frames_from_arrays() -> None:
    items = outputs.items_frame(
        np.array(["b", "a"], dtype=object), np.array([1.0, 2.0]), np.array([4.0, 16.0]),
        np.array([3, 5]), None, np.array(["all", "all"], dtype=object),
    )  # fmt: skip
    assert list(items.columns) == ["estimate", "sd", "n_ratings", "category"]
    np.testing.assert_allclose(items["sd"], [0.5, 0.25])
    ann = outputs.annotators_frame(
        np.array(["w"]), np.array([4]), np.array([2.0]), np.array([4.0]), np.array([0.9]),
        np.array([3.0]),
    )  # fmt: skip
    assert ann.loc["w", "expertise"] == 0.5
    assert ann.loc["w", "expertise_sd"] == pytest.approx(np.sqrt(2.0) / 4.0)
    assert ann.loc["w", "spam_share"] == pytest.approx(0.25)


def test_json_default() -> None:
    assert outputs._json_default(np.arange(3)) == [0, 1, 2]
    assert outputs._json_default(np.float64(1.5)) == 1.5
    assert outputs._json_default(object) == "<class 'object'>"
