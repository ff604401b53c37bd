"""One posterior per item over the K levels, and everything a manager reads from it.

``LabelPosterior`` holds each item's probability of each level (``proba``, M x K) and the
expected gain of one more rating, computed from the same model. Every item column of a fit is
read from it here: the label is the most probable level (the Bayes decision for label error);
``p_wrong`` is one minus its probability; a label whose runner-up is within the policy's
``tie`` is ``undetermined`` (on a fine scale, a runner-up a tenth of the range away or more);
the interval is the narrowest run of adjacent levels around the label holding the policy's
``interval`` of the probability; the ``estimate`` is the posterior mean of the level's value
(inside the scale by construction) and ``sd`` its posterior standard deviation; the ``flag``
is ``undetermined`` for a tie, ``confident`` at the policy's ``confidence``, else
``uncertain``. Pure array functions, their sums in a fixed order (``numerics.fixed_order``: the
same bits on every machine); ``choose`` makes the posterior.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..data.scale import Scale
from ..numerics.fixed_order import last_sum, matmul
from .policy import DEFAULT, LabelPolicy

ITEM_FLAGS = ("confident", "uncertain", "undetermined")


def decide(
    p: np.ndarray, tie: float, values: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The label (M,), the most probable level of each row of ``p`` (M, K) (the lowest on an
    exact tie), and whether its runner-up is within ``tie`` of it (M,) bool. ``values`` (K,):
    the scale; on a fine scale (``Scale.fine``, a slider) a runner-up less than its fit unit
    (a tenth of the range) from the label is no tie: neighbouring values a point apart are
    always nearly as probable, and either is as good an answer."""
    order = np.argsort(-p, axis=1, kind="stable")
    rows = np.arange(len(p))
    best = order[:, 0]
    if p.shape[1] < 2:
        return best, np.zeros(len(p), bool)
    tied = p[rows, best] - p[rows, order[:, 1]] < tie
    scale = None if values is None else Scale(np.asarray(values, dtype=float))
    if scale is not None and scale.fine:
        apart = np.abs(scale.values[order[:, 1]] - scale.values[best]) >= scale.fit_unit
        tied &= apart
    return best, tied


def item_flags(tie: np.ndarray, p_best: np.ndarray, confidence: float) -> np.ndarray:
    """Each item's flag (M,) from ``decide``'s tie and its label's probability (M,):
    ``undetermined`` for a tie, ``confident`` at ``confidence`` or more, else ``uncertain``."""
    return np.where(tie, "undetermined", np.where(p_best >= confidence, "confident", "uncertain"))


def level_interval(p: np.ndarray, best: np.ndarray, mass: float) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest level index (M,) of the narrowest run of adjacent levels that holds
    the label ``best`` (M,) and at least ``mass`` of the probability ``p`` (M, K); grown one
    level at a time towards the more probable neighbour (the lower one when they are equal,
    a neighbour of probability 0 included: the run stays adjacent levels)."""
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


def mean_and_sd(p: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and standard deviation (M,) of the level's value under ``p`` (M, K):
    a mean of the scale's values, so never outside the scale."""
    v = np.asarray(values, dtype=float)
    mean = last_sum(p * v)
    second = last_sum(p * (v * v))
    return np.clip(mean, v[0], v[-1]), np.sqrt(np.maximum(second - mean * mean, 0.0))


def expected_gain(q: np.ndarray, rater: np.ndarray, report: np.ndarray) -> np.ndarray:
    """Expected fall of ``p_wrong`` from one more rating (M,), every entry >= 0.

    ``q`` (M, K): each item's posterior over the latent level; ``rater`` (K, K): the chance
    that the next annotator (a typical one of the crowd) answers k when the level is c;
    ``report`` (K, K): the map from the latent level to the reported probabilities (the item's
    ``proba`` is ``q @ report``). The new rating k has probability ``sum_c q_c rater[c, k]``
    and moves ``q`` to ``q * rater[:, k]``, normalised; the gain is the expected largest
    reported probability after it minus the largest now (Jensen: never negative).
    """
    now = matmul(q, report).max(axis=1)
    after = np.zeros(len(q))
    for k in range(rater.shape[1]):
        joint = q * rater[None, :, k]  # (M, K): P(level c and answer k)
        after += matmul(joint, report).max(axis=1)  # P(k) * max of the updated report
    return np.maximum(after - now, 0.0)


@dataclass(frozen=True)
class LabelPosterior:
    """Each item's posterior over the levels and what is read from it.

    ``proba`` (M, K): the probability of each level, the one posterior every item column is
    read from; ``values`` (K,): the scale; ``gain`` (M,): the expected fall of ``p_wrong``
    from one more rating, under the same model; ``source``: the model the probabilities come
    from (``confusion``: the ordinal confusion model, calibrated to a careful annotator;
    ``continuous``: the paper's continuous posterior over the scale's intervals);
    ``estimate``, ``sd`` (M,): the model's own estimate where it has one (the continuous
    posterior's mean of z), else None: the posterior mean of the level's value; ``names``
    (K,): the levels' names on a scale of named levels, else None.
    """

    proba: np.ndarray
    values: np.ndarray
    gain: np.ndarray
    source: str
    estimate: np.ndarray | None = None
    sd: np.ndarray | None = None
    names: tuple[str, ...] | None = None

    def rows(self, sl: slice) -> LabelPosterior:
        """The posterior of the items ``sl`` (a slice of them)."""
        pick = None if self.estimate is None else (self.estimate[sl], self.sd[sl])
        est, sd = (None, None) if pick is None else pick
        return replace(self, proba=self.proba[sl], gain=self.gain[sl], estimate=est, sd=sd)

    def estimates(self) -> tuple[np.ndarray, np.ndarray]:
        """Each item's estimate and its sd (M,): the model's own, else the posterior mean and
        standard deviation of the level's value (``mean_and_sd``)."""
        if self.estimate is not None:
            return self.estimate, self.sd
        return mean_and_sd(self.proba, self.values)

    def undetermined(self, policy: LabelPolicy = DEFAULT) -> np.ndarray:
        """(M,) bool: the items ``read`` flags ``undetermined`` under ``policy`` (a tie,
        ``decide``), without the other columns: a big fit's warning counts them without
        building its item table."""
        return decide(self.proba, policy.tie, self.values)[1]

    def read(self, policy: LabelPolicy = DEFAULT) -> dict[str, np.ndarray]:
        """The item columns under ``policy``: ``label`` (level index), ``p_wrong``,
        ``lower`` / ``upper`` (level indices), ``estimate``, ``sd``, ``expected_gain`` and
        ``flag``, each (M,)."""
        p = self.proba
        best, tie = decide(p, policy.tie, self.values)
        p_best = p[np.arange(len(p)), best]
        lo, hi = level_interval(p, best, policy.interval)
        mean, sd = self.estimates()
        flag = item_flags(tie, p_best, policy.confidence)
        return {
            "label": best,
            "p_wrong": 1.0 - p_best,
            "lower": lo,
            "upper": hi,
            "estimate": mean,
            "sd": sd,
            "expected_gain": self.gain,
            "flag": flag,
        }
