"""figures_decisions.py: the figures show the decision frames' numbers, grouped by flag."""

import numpy as np
import pandas as pd
import pytest

from ordmix_core import decisions as D
from ordmix_core import figures_decisions as F


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
    items = pd.DataFrame(
        {"estimate": [1.0, 2.2, 2.0], "sd": [0.2, 0.4, 3.16], "category": "c"},
        index=pd.Index(["x", "y", "z"], name="instance"),
    )
    cats = pd.DataFrame({"difficulty": [2.0]}, index=pd.Index(["c"], name="category"))
    hp = {"thresholds": [0.5, 1.5, 2.5, 3.5], "scale": [1, 2, 3], "lambda": 0.1, "alpha": 2,
          "beta": 1}  # fmt: skip
    dec = D.item_decisions_from_frames(items, cats, hp, 1.0)
    fig = F.item_level_probabilities(dec, max_items=2)
    assert [t.name for t in fig.data] == ["1", "2", "3"]
    total = np.sum([np.asarray(t.x) for t in fig.data], axis=0)
    np.testing.assert_allclose(total, 1.0)
    assert list(fig.data[0].y) == ["y (uncertain)", "x (confident)"]  # first row on top
    with pytest.raises(ValueError, match="p_level_"):
        F.item_level_probabilities(items)
