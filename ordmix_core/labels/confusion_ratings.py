"""The label fit's passes over the ratings: each item's start, the annotators' soft tables,
the E-step's item posteriors, each the numpy formula (the readable specification) or, with
compiled code on (``kernels.USE_JIT``), ``confusion_passes``' pass with its bits.

``ItemRatings`` groups a fit's ratings once for both passes: the in-memory fit holds every
rating, a Dask block the ratings of its items (``dask_engine.block_labels``), so the engine
runs the same passes on its blocks and only their sums travel. Pure array functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..numerics import libm
from ..numerics.fixed_order import last_sum
from ..vb import kernels
from . import confusion_passes as passes
from . import confusion_steps as label_steps

if TYPE_CHECKING:
    from .confusion_model import ConfusionFit

#: the label model's passes run over the cores from this many ratings: it runs after the race,
#: alone, so the cores are free (the sweeps' ``kernels.PARALLEL_MIN_RATINGS`` is for passes
#: that share them); the bits are the same either way
PARALLEL_MIN_RATINGS = 10_000


def soft_tables(
    q: np.ndarray, annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, n: int
) -> np.ndarray:
    """Each annotator's K x K table of soft truth (rows) against rating (columns), shape (N, K, K).

    ``q`` (M, K) is each item's level posterior; ``annotator``, ``instance``, ``rating`` (R,)
    are integer codes, ratings as level indices 0..K-1.
    """
    k = q.shape[1]
    cell = annotator * k + rating
    t = np.empty((n, k, k))
    for c in range(k):  # K reductions over the ratings
        t[:, c, :] = np.bincount(cell, weights=q[instance, c], minlength=n * k).reshape(n, k)
    return t


def item_log_lik(
    logp: np.ndarray, annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, m: int
) -> np.ndarray:
    """Log likelihood of each item's ratings at each level, shape (M, K), from log P (N, K, K)."""
    k = logp.shape[1]
    contrib = logp[annotator, :, rating]  # (R, K)
    out = np.zeros((m, k))
    for c in range(k):
        out[:, c] = np.bincount(instance, weights=contrib[:, c], minlength=m)
    return out


def posterior(log_lik: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, float]:
    """Each item's level posterior (M, K) from its log likelihood at each level (M, K) and the
    class prior ``rho`` (K,), and the log evidence of all ratings."""
    s = log_lik + libm.log(rho)[None, :]
    top = s.max(axis=1, keepdims=True)
    w = libm.exp(s - top)
    tot = last_sum(w)[:, None]
    q = w / tot
    return q, float((libm.log(tot) + top).sum())


def start(instance: np.ndarray, rating: np.ndarray, m: int, k: int) -> np.ndarray:
    """Start: each item's share of ratings at each level, smoothed by one rating spread
    evenly."""
    cell = np.multiply(instance, k, dtype=np.int64)  # int32 codes: no overflow at m * k
    cell += rating
    counts = np.bincount(cell, minlength=m * k).reshape(m, k) + 1.0 / k
    return counts / last_sum(counts)[:, None]


class ItemRatings:
    """The ratings of a label fit, grouped once for its passes: the soft tables by annotator
    (``tables``) and the E-step by item (``e_step``), compiled (``passes``) or the numpy
    formulas (the same bits). ``annotator``, ``instance``, ``rating`` (R,) codes, kept as
    int32 (``passes.codes``: no copy of int32 codes), ``n`` the annotators (rows of the
    tables), ``m`` the items. The in-memory fit holds every rating; a Dask block its items'
    ratings, its annotators coded locally."""

    def __init__(
        self, annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, n: int, m: int
    ) -> None:
        self.annotator = passes.codes(annotator)
        self.instance = passes.codes(instance)
        self.rating = passes.codes(rating)
        self.n, self.m = int(n), int(m)
        self.by_part, self.by_item = _groupings(
            self.annotator, self.instance, self.rating, self.n, self.m
        )

    def tables(self, q: np.ndarray) -> np.ndarray:
        """``soft_tables`` (n, K, K) of the item posteriors ``q`` (m, K)."""
        if self.by_part is not None:
            return passes.soft_tables(q, self.by_part, self.n)
        return soft_tables(q, self.annotator, self.instance, self.rating, self.n)

    def e_step(self, logp: np.ndarray, rho: np.ndarray, q: np.ndarray) -> tuple:
        """The new level posteriors (m, K) from the log confusions ``logp`` (n, K, K) and the
        class prior ``rho`` (K,), the log evidence and ``max |q_new - q|``."""
        if self.by_item is not None:
            return passes.e_step(logp, libm.log(rho), self.by_item, q)
        ll = item_log_lik(logp, self.annotator, self.instance, self.rating, q.shape[0])
        q_new, evidence = posterior(ll, rho)
        return q_new, evidence, float(np.abs(q_new - q).max())


def _groupings(annotator, instance, rating, n_annotators: int, n_instances: int) -> tuple:
    """For the compiled passes (``passes``): the ratings parted once by annotator and grouped
    once by item; ``(None, None)`` without compiled code (the numpy formulas then run). Parts
    and chunks over the threads from ``PARALLEL_MIN_RATINGS`` ratings (the bits do not depend
    on them), else one: no parallel launches."""
    if not kernels.USE_JIT:
        return None, None
    big = len(rating) >= PARALLEL_MIN_RATINGS
    threads = kernels.numba.get_num_threads() if big else 1
    by_part = passes.partition(annotator, n_annotators, threads, instance, rating)
    chunks = passes.N_CHUNKS if big else 1
    by_item = passes.group(instance, n_instances, annotator, rating, n_chunks=chunks)
    return by_part, by_item


def column_sums(q: np.ndarray) -> np.ndarray:
    """``q.sum(axis=0)`` (K,) of the item posteriors (M, K), rows in order (compiled:
    ``label_steps.column_sums``, the same bits)."""
    return label_steps.column_sums(q) if kernels.USE_JIT else q.sum(axis=0)


def with_expert(
    annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, gold: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ratings (R,) with the expert's after them, in the ratings' types: annotator ``n``
    rates each gold item (``gold`` (M,) a level index, -1 elsewhere) its gold level."""
    items = np.flatnonzero(gold >= 0)
    return (
        np.concatenate([annotator, np.full(items.size, n, annotator.dtype)]),
        np.concatenate([instance, items.astype(instance.dtype)]),
        np.concatenate([rating, gold[items].astype(rating.dtype)]),
    )


def own_posterior(
    fit: ConfusionFit,
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    items: np.ndarray,
) -> np.ndarray:
    """The level posterior (G, K) of ``items`` (G,) from their own ratings alone, with the
    fit's confusions and class prior (a gold item's level not imposed): what the crowd says of
    a gold item, which the expert's answers are learned against."""
    log_conf = libm.log(fit.confusion)
    return own_posterior_of(log_conf, fit.rho, annotator, instance, rating, items, fit.q.shape[0])


def own_posterior_of(
    log_conf: np.ndarray,
    rho: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    items: np.ndarray,
    m: int,
) -> np.ndarray:
    """``own_posterior`` from the log confusions (N, K, K) and the class prior (K,): the
    ratings (R,) of ``m`` items, every rating of ``items`` (G,) among them (a fit's, or a
    Dask block's with its annotators coded locally)."""
    rows = np.full(m, -1, dtype=np.int64)
    rows[items] = np.arange(len(items))
    take = rows[instance] >= 0
    ll = item_log_lik(log_conf, annotator[take], rows[instance[take]], rating[take], len(items))
    return posterior(ll, rho)[0]


def gold_levels(gold: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(M,) the level index of each item's gold value (M,; NaN: none), -1 where there is none;
    a gold value off the scale counts as its nearest level (``values`` (K,))."""
    known = np.isfinite(gold)
    out = np.full(gold.shape[0], -1, dtype=np.int64)
    out[known] = np.abs(gold[known][:, None] - values[None, :]).argmin(axis=1)
    return out
