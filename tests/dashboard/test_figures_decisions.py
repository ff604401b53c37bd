"""figures_decisions.py: the figures show the decision frames' numbers, grouped by flag."""

import numpy as np
import pandas as pd
import pytest

from ordmix_core.dashboard import figures_decisions as F
from ordmix_core.labels.posterior import LabelPosterior
from ordmix_core.results import decisions as D
from ordmix_core.results import explanations


def _annotators():
    return pd.DataFrame(
        {
            "n_ratings": [3, 5, 120, 400],
            "reliability": [1e-10, 1e-10, 0.99, 1e-10],
            "flag": ["undetermined", "unreliable", "ok", "unreliable"],
            "p_unreliable": [0.6, 0.95, 0.01, 0.999],
            "reliability_lower": [0.02, 0.01, 0.8, 0.01],
            "reliability_upper": [0.9, 0.48, 0.95, 0.1],
            "flag_confidence": 0.9,
        },
        index=pd.Index(["a", "b", "c", "d"], name="annotator"),
    )


def test_annotator_evidence_one_trace_per_flag_with_the_probabilities():
    fig = F.annotator_evidence(_annotators())
    traces = {t.name: t for t in fig.data}
    assert set(traces) == {"unreliable (2)", "ok (1)", "undetermined (1)"}
    assert list(traces["unreliable (2)"].y) == [0.95, 0.999]
    assert list(traces["unreliable (2)"].x) == [5, 400]
    assert fig.layout.xaxis.type == "log"
    lines = sorted(s.y0 for s in fig.layout.shapes if s.type == "line")
    assert lines == pytest.approx([0.1, 0.9])


def test_annotator_evidence_needs_the_flag_columns():
    with pytest.raises(ValueError, match="p_unreliable"):
        F.annotator_evidence(_annotators().drop(columns="p_unreliable"))


def test_item_level_bars_stack_to_one():
    proba = np.array([[0.95, 0.04, 0.01], [0.1, 0.6, 0.3], [0.4, 0.2, 0.4]])
    post = LabelPosterior(proba, np.array([1.0, 2.0, 3.0]), np.zeros(3), "confusion")
    items = pd.DataFrame({"estimate": [1.0, 2.2, 2.0]}, index=pd.Index(["x", "y", "z"]))
    dec = D.item_columns(post, items.index)
    fig = F.item_level_probabilities(dec, max_items=2)
    assert [t.name for t in fig.data] == ["1", "2", "3"]
    total = np.sum([np.asarray(t.x) for t in fig.data], axis=0)
    np.testing.assert_allclose(total, 1.0)
    assert list(fig.data[0].y) == ["y (uncertain)", "x (confident)"]  # first row on top
    with pytest.raises(ValueError, match="p_level_"):
        F.item_level_probabilities(items)


RATINGS = pd.DataFrame(
    {
        "annotator": ["s", "s", "s", "h", "h", "g", "g"],
        "instance": ["x", "y", "z", "x", "y", "x", "z"],
        "rating": [5.0, 5.0, 5.0, 2.0, 3.0, 2.0, 1.0],
    }
)


def test_rating_histogram_puts_an_annotator_beside_the_crowd():
    own = RATINGS.loc[RATINGS["annotator"] == "s", "rating"]
    fig = F.rating_histogram(own, RATINGS["rating"], [1, 2, 3, 4, 5], "s")
    mine, crowd = fig.data
    assert list(mine.y) == [0, 0, 0, 0, 1.0] and list(mine.text) == ["0", "0", "0", "0", "3"]
    np.testing.assert_allclose(crowd.y, np.array([1, 2, 1, 0, 3]) / 7)
    assert mine.name == "s (3 ratings)" and crowd.name == "the crowd (7 ratings)"
    assert list(mine.x) == ["1", "2", "3", "4", "5"] and fig.layout.barmode == "group"


def test_item_ratings_beside_its_level_probabilities():
    fig = F.item_ratings_and_levels(
        [2.0, 2.0, 5.0], [0.1, 0.7, 0.1, 0.05, 0.05], [1, 2, 3, 4, 5], "x"
    )
    ratings, levels = fig.data
    np.testing.assert_allclose(ratings.y, [0, 2 / 3, 0, 0, 1 / 3])
    assert list(levels.y) == [0.1, 0.7, 0.1, 0.05, 0.05]
    with pytest.raises(ValueError, match="one level probability per level"):
        F.item_ratings_and_levels([2.0], [0.5, 0.5], [1, 2, 3], "x")


def test_level_chart_starts_with_the_least_certain_items():
    items = pd.DataFrame(
        {"p_wrong": [0.0, 0.4, 0.0, 0.2], "p_level_1": [1.0, 0.6, 1.0, 0.8]},
        index=pd.Index(["a", "b", "c", "d"], name="instance"),
    )
    assert F.level_chart_items(items, 3).index.tolist() == ["b", "d", "a"]


def test_item_ratings_show_each_annotator_with_their_flag():
    flags = pd.Series(["unreliable", "ok"], index=pd.Index(["s", "h"], name="annotator"))
    t = explanations.item_ratings(RATINGS, "x", flags)
    assert t.to_dict("list") == {
        "annotator": ["h", "g", "s"],
        "rating": [2.0, 2.0, 5.0],
        "flag": ["ok", "", "unreliable"],
    }
    assert explanations.item_ratings(RATINGS, "nothing").empty


def test_annotator_items_and_agreement_with_the_labels():
    items = pd.DataFrame(
        {"label": [2.0, 3.0, 1.0], "estimate": [2.1, 3.2, 1.1]},
        index=pd.Index(["x", "y", "z"], name="instance"),
    )
    t = explanations.annotator_items(RATINGS, "h", items)
    assert t["instance"].tolist() == ["x", "y"] and t["agrees"].all()
    assert explanations.agreement(t) == 1.0
    s = explanations.annotator_items(RATINGS, "s", items)
    assert explanations.agreement(s) == 0.0 and s["label"].tolist() == [2.0, 3.0, 1.0]
    assert np.isnan(explanations.agreement(explanations.annotator_items(RATINGS, "nobody", items)))


def test_undetermined_items_most_useful_first():
    items = pd.DataFrame(
        {
            "flag": ["undetermined", "confident", "undetermined", "undetermined"],
            "expected_gain": [0.1, 0.9, 0.3, 0.1],
            "n_ratings": [4, 1, 2, 1],
            "label": 1.0,
            "p_wrong": 0.5,
        },
        index=pd.Index(["a", "b", "c", "d"], name="instance"),
    )
    assert explanations.undetermined_to_rate(items)["instance"].tolist() == ["c", "d", "a"]


def test_numbers_for_people():
    probabilities = (1e-10, 0.0143, 0.6094, 1 - 1e-9, np.nan)
    assert [explanations.probability_text(p) for p in probabilities] == [
        "<0.001", "0.014", "0.609", ">0.999", ""
    ]  # fmt: skip
    b = explanations.clean_round([-0.0004, -0.3, 0.004])
    assert list(b) == [0.0, -0.3, 0.0] and not np.signbit(b[0])
