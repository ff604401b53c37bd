"""How sure a label is: the answer a careful annotator would give.

The confusion model's posterior over an item's latent level (``q``) says which level the
crowd's ratings point to, and how firmly, *if* the crowd's latent level were the truth. On
real crowds with expert gold it is over-confident: the expert agrees with the crowd's
consensus about as often as a careful member of the crowd does (on TREC the consensus of ten
raters matches the expert no better than one rating does), and no held-out rating can measure
that (``docs/results.md``, "How sure a label is"). What the ratings do measure is how the
crowd's careful members answer each latent level. So the probabilities a fit reports are a
mixture of the two hypotheses about who checks the label, the latent level itself (weight
``latent_weight``) or a careful annotator (the rest)::

    p_level[m, k] = sum_c q[m, c] * report[c, k],
    report = latent_weight * I + (1 - latent_weight) * reference

with ``reference`` the confusion of the annotators who give the policy's ``reference_share`` of
the ratings, the most balanced-accurate first (their answers without their careless share: a
spammer who always gives the commonest level looks accurate on the commonest level alone),
averaged by their ratings and made symmetric in the ordinal distance ``|k - c|`` (a careful
annotator misses by one level up as often as down). Both numbers were chosen
leave-one-data-set-out (``docs/results.md``). With gold, the expert is one more annotator whose
answers are the gold levels (``confusion_model.fit``): their confusion, learned with ``report``
as its prior, replaces ``report``, and the latent posterior's temperature is learned from the
gold items too (``gold_temperature``). Pure array functions.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics import libm
from ..numerics.fixed_order import first_sum, last_sum, matmul


def balanced_accuracy(confusion: np.ndarray) -> np.ndarray:
    """Each annotator's mean over the levels of their chance of answering the level (N,):
    ``mean_c P_n(c | c)``, ``confusion`` (N, K, K)."""
    k = confusion.shape[-1]
    return last_sum(np.diagonal(confusion, axis1=-2, axis2=-1)) / k


def reference_confusion(
    careful: np.ndarray, rho: np.ndarray, n_ratings: np.ndarray, share: float
) -> np.ndarray:
    """The careful annotator's confusion (K, K), rows summing to 1.

    The annotators are taken from the most balanced-accurate down (``careful`` (N, K, K):
    their answers without their careless share) until they have given ``share`` of the
    ratings (``n_ratings`` (N,); the last one included whole); their confusions are averaged,
    each weighted by its ratings, and the average is made symmetric in ordinal distance
    (``symmetric``, with ``rho`` (K,) the latent levels' prior). Annotators of equal accuracy
    are taken in their order (their codes)."""
    order = np.argsort(-balanced_accuracy(careful), kind="stable")
    w = np.asarray(n_ratings, dtype=float)[order]
    cum = np.cumsum(w) / max(w.sum(), 1e-300)
    take = order[: int(np.searchsorted(cum, share)) + 1]
    wt = np.asarray(n_ratings, dtype=float)[take]
    mean = first_sum(wt / max(math.fsum(wt), 1e-300), careful[take])  # (K, K)
    return symmetric(mean, rho)


def report_map(reference: np.ndarray, latent_weight: float) -> np.ndarray:
    """The map (K, K) from the latent level to the reported one: ``latent_weight`` of the
    latent level itself, the rest a careful annotator's answer (``reference``)."""
    k = reference.shape[0]
    return latent_weight * np.eye(k) + (1.0 - latent_weight) * reference


def symmetric(table: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``table`` (K, K) made a function of ``|k - c|`` alone (its rho-weighted mean at each
    distance), rows normalised to 1."""
    k = table.shape[0]
    dist = np.abs(np.arange(k)[:, None] - np.arange(k)[None, :])
    weight = np.broadcast_to(np.asarray(rho, dtype=float)[:, None], (k, k))
    at = np.bincount(dist.ravel(), weights=(weight * table).ravel(), minlength=k)
    n = np.bincount(dist.ravel(), weights=weight.ravel(), minlength=k)
    out = (at / np.maximum(n, 1e-300))[dist]
    return out / last_sum(out)[:, None]


#: the powers ``1/T`` of the latent posterior that gold chooses between
GOLD_TEMPERATURES = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def tempered(q: np.ndarray, temperature: float) -> np.ndarray:
    """``q`` (M, K) raised to ``1 / temperature`` and renormalised (zeros stay 0); its rows
    may be weights at any scale (each row's ``log q / temperature`` is shifted by its own
    largest before the exponential)."""
    with np.errstate(divide="ignore"):
        logq = libm.log(q) / temperature
    logq -= logq.max(axis=1, keepdims=True)
    w = libm.exp(logq)
    return w / last_sum(w)[:, None]


def gold_temperature(q_own: np.ndarray, gold: np.ndarray, expert: np.ndarray) -> float:
    """The temperature of the latent posterior under which the expert's answers are most
    likely: ``argmax_T sum_m log (tempered(q_own, T) @ expert)[m, gold_m]`` over
    ``GOLD_TEMPERATURES``. ``q_own`` (G, K): each gold item's latent posterior from the
    crowd's ratings alone; ``gold`` (G,) the expert's levels; ``expert`` (K, K) their
    confusion. The crowd's shared misreadings make ``q`` too sure in a way the ratings cannot
    show; the gold items can."""
    rows = np.arange(len(gold))
    scores = [
        math.fsum(libm.log(np.maximum(matmul(tempered(q_own, t), expert)[rows, gold], 1e-300)))
        for t in GOLD_TEMPERATURES
    ]
    return GOLD_TEMPERATURES[int(np.argmax(scores))]
