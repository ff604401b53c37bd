"""An annotator who rates one level off: the label model's shifts, as pure array functions.

The adjacent-category confusion (``confusion_model``) has one odds of stepping over a threshold
from below the truth, whatever the truth below it, so it cannot say "one level higher than the
truth": stepping over ``s + 1`` must be likely when the truth is ``s`` and unlikely when it is
``s - 1``. An annotator shifted by ``b`` levels answers through its adjacent-category confusion
of the truth ``c + b`` (kept on the scale): ``P_n(k | c) = A_n(k | clip(c + b_n))``. Each
M-step gives every annotator the shift in ``-MAX_SHIFT..MAX_SHIFT`` under which its Newton
step reaches the highest penalised likelihood plus the shift's log prior (``log_prior``).

Measured (``docs/results.md``, "The label model"): on simulated crowds with lenient and strict
raters the labels' error falls by 0.06-0.10 on 5 and 11 levels, and the shared sets move by
less than 0.002.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics.fixed_order import last_sum, matmul

#: the prior probability that an annotator is shifted, split evenly over the shifts
#: ``+-1..MAX_SHIFT``: chosen leave-one-data-set-out over 0, 0.02, 0.1 and 0.4 (0.02 in
#: every fold, ``docs/results.md``); 0 turns the shifts off
SHIFT_PRIOR = 0.02
#: the largest shift tried, in levels: a rater two levels off on a 5-level scale is better
#: told by its confusion than by a shift
MAX_SHIFT = 1


def shifts(k: int, prior: float = SHIFT_PRIOR) -> list[int]:
    """The shifts an M-step tries on a scale of ``k`` levels, 0 first (a tie keeps an
    annotator unshifted); only 0 without a prior or below 3 levels (on 2 the adjacent-category
    confusion is already any 2 x 2 confusion)."""
    if prior <= 0.0 or k < 3:
        return [0]
    out = [0]
    for s in range(1, MAX_SHIFT + 1):
        out += [-s, s]
    return out


def log_prior(s: int, prior: float = SHIFT_PRIOR) -> float:
    """Log prior probability of the shift ``s``: ``1 - prior`` for 0, ``prior`` shared by the
    ``2 MAX_SHIFT`` others."""
    if s == 0:
        return math.log1p(-prior)
    return math.log(prior / (2 * MAX_SHIFT))


def truth_rows(k: int, s: int) -> np.ndarray:
    """(K,) the row of an annotator's own confusion each truth is read at under shift ``s``."""
    return np.clip(np.arange(k) + s, 0, k - 1)


def shifted_tables(t: np.ndarray, s: int) -> np.ndarray:
    """Soft tables ``t`` (N, K, K) of truth against rating as tables of the shifted truth
    ``clip(c + s)`` against rating (truths shifted past an end add up there), in a fixed
    order."""
    k = t.shape[1]
    rows = truth_rows(k, s)
    out = np.zeros_like(t)
    for c in range(k):
        out[:, rows[c]] += t[:, c]
    return out


def shifted_confusion(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Each annotator's confusion of the truth (N, K, K) from its own ``p`` (N, K, K) of the
    shifted truth and its shift (N,)."""
    out = np.empty_like(p)
    k = p.shape[1]
    for s in np.unique(shift):
        rows = shift == s
        out[rows] = p[rows][:, truth_rows(k, int(s))]
    return out


def penalised(
    t: np.ndarray, log_p: np.ndarray, a: np.ndarray, a_bar: np.ndarray, lam: np.ndarray
) -> np.ndarray:
    """(N,) each annotator's penalised log likelihood, ``sum_{c,k} t log p - (a - a_bar)' lam
    (a - a_bar) / 2``: tables ``t`` and log confusions ``log_p`` (N, K, K), parameters ``a``
    (N, J), their prior's mean (J,) and precision (J, J); fixed-order sums."""
    dev = a - a_bar
    tl = np.multiply(t, log_p, out=np.zeros_like(t), where=t > 0.0)  # an empty cell: 0
    return last_sum(last_sum(tl)) - 0.5 * last_sum(dev * matmul(dev, lam))
