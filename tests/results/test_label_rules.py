"""The label decided from level probabilities: ties, the interval, the clear majority."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.results import label_rules as lr


def test_decide_marks_ties():
    p = np.array([[0.5, 0.3, 0.2], [0.4, 0.2, 0.395], [0.1, 0.1, 0.8]])
    best, tie = lr.decide(p, 0.01)
    np.testing.assert_array_equal(best, [0, 0, 2])
    np.testing.assert_array_equal(tie, [False, True, False])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.001, 1.0), min_size=2, max_size=6),
    st.floats(0.05, 0.99),
)
def test_level_interval_holds_the_label_and_the_mass(weights, mass):
    p = np.asarray(weights)[None, :] / np.sum(weights)
    best, _ = lr.decide(p, 0.0)
    lo, hi = lr.level_interval(p, best, mass)
    assert lo[0] <= best[0] <= hi[0]
    assert p[0, lo[0] : hi[0] + 1].sum() >= mass - 1e-9


def test_clear_majority_needs_the_share_and_no_flagged_rater():
    # item 0: 4 of 5 at level 2 (80%); item 1: 3 of 5 (60%); item 2: 4 of 5, one flagged rater;
    # item 3: one rating; item 4: no ratings
    inst = np.array([0] * 5 + [1] * 5 + [2] * 5 + [3])
    rating = np.array([2, 2, 2, 2, 1, 0, 0, 0, 1, 1, 3, 3, 3, 3, 0, 1])
    flagged = np.zeros(16, bool)
    flagged[14] = True
    got = lr.clear_majority(inst, rating, flagged, 5, 4)
    np.testing.assert_array_equal(got, [2, -1, -1, 1, -1])
