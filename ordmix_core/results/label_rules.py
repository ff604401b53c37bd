"""The label a manager ships, decided from each item's level probabilities (M, K).

The most probable level (the Bayes decision for label error) and whether its runner-up is so
close that it is a tie (``decide``); the label's interval, the narrowest run of adjacent levels
around it holding a given mass (``level_interval``); and the manager's rule over the model,
trusted raters' clear majority (``clear_majority``). Pure array functions; the level
probabilities come from ``label_model``.
"""

from __future__ import annotations

import numpy as np


def decide(p: np.ndarray, tie: float) -> tuple[np.ndarray, np.ndarray]:
    """Label (M,) = most probable level (the decision that minimises expected label error), and
    whether it is a tie (M,): the runner-up is within ``tie`` of it, so the label is not decided
    by the ratings and must be reported as undetermined."""
    order = np.argsort(-p, axis=1, kind="stable")
    rows = np.arange(len(p))
    best = order[:, 0]
    if p.shape[1] < 2:
        return best, np.zeros(len(p), bool)
    return best, p[rows, best] - p[rows, order[:, 1]] < tie


def level_interval(p: np.ndarray, best: np.ndarray, mass: float) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest level index (M,) of the narrowest run of adjacent levels that holds the
    label and at least ``mass`` of the probability: the label's credible interval on the scale.

    Grown one level at a time from the label towards the more probable neighbour.
    """
    m, k = p.shape
    lo = best.copy()
    hi = best.copy()
    rows = np.arange(m)
    held = p[rows, best].copy()
    for _ in range(k - 1):
        short = held < mass - 1e-12
        if not short.any():
            break
        left = np.where(lo > 0, p[rows, np.maximum(lo - 1, 0)], -1.0)
        right = np.where(hi < k - 1, p[rows, np.minimum(hi + 1, k - 1)], -1.0)
        go_left = short & (left >= right) & (left >= 0)
        go_right = short & ~go_left & (right >= 0)
        lo = np.where(go_left, lo - 1, lo)
        hi = np.where(go_right, hi + 1, hi)
        held = held + np.where(go_left, left, 0.0) + np.where(go_right, right, 0.0)
    return lo, hi


#: share of an item's ratings that makes its most common level a clear majority
CLEAR_MAJORITY = 0.8


def clear_majority(
    instance: np.ndarray,
    rating: np.ndarray,
    flagged: np.ndarray,
    n_instances: int,
    n_levels: int,
    share: float = CLEAR_MAJORITY,
) -> np.ndarray:
    """Each item's clear majority: the level index (M,) that at least ``share`` of its ratings
    give, where none of its ratings is ``flagged`` (R,) (from an annotator judged unreliable);
    -1 elsewhere.

    A manager's rule over the model: trusted raters who agree this clearly are not overruled
    (the model may still give the level a low probability, and says so).
    """
    k = n_levels
    counts = np.bincount(instance * k + rating, minlength=n_instances * k).reshape(-1, k)
    n = counts.sum(axis=1)
    top = counts.argmax(axis=1)
    tainted = np.bincount(instance, weights=flagged.astype(float), minlength=n_instances) > 0
    clear = (n > 0) & (counts[np.arange(n_instances), top] >= share * n) & ~tainted
    return np.where(clear, top, -1)
