"""Dawid-Skene: levels as classes, a full confusion matrix per annotator, EM."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...data.crowd import CrowdData
from ...data.scale import Scale
from ...errors import InputError
from ...numerics import libm
from ..base import CrowdEstimator
from ._common import level_counts, normalize_log, posterior_frame

_EPS = 1e-10  # floor on confusion cells and priors (crowd-kit's), so that no log is of 0


def ds_m_step(
    post: np.ndarray, data: CrowdData, smoothing: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Confusion matrices (N, K, K) ``[n, true, observed]``, class priors (K,) and the soft
    tables they were normalised from (N, K, K): ``sum post[item, true]`` over each annotator's
    ratings of each observed level.

    ``post`` (M, K) are the class posteriors; ``smoothing`` pseudo-counts are added to every
    confusion cell and prior before normalising.
    """
    k, n = data.scale.k, data.n_annotators
    idx = data.ann * k + data.level  # (L,) cell (annotator, observed)
    pr = post[data.inst]  # (L, K)
    table = np.empty((n, k, k))
    for t in range(k):  # K reductions over L ratings
        table[:, t, :] = np.bincount(idx, weights=pr[:, t], minlength=n * k).reshape(n, k)
    conf = np.maximum(table + smoothing, _EPS)  # the floor only matters when smoothing = 0
    conf /= conf.sum(axis=2, keepdims=True)
    priors = np.maximum(post.sum(axis=0) + smoothing, _EPS)
    return conf, priors / priors.sum(), table


def ds_e_step(conf: np.ndarray, priors: np.ndarray, data: CrowdData) -> tuple[np.ndarray, float]:
    """Class posteriors (M, K) and the log-likelihood given confusions (N, K, K), priors (K,)."""
    k, m = data.scale.k, data.n_instances
    logc = libm.log(conf)  # (N, K, K)
    contrib = logc[data.ann, :, data.level]  # (L, K): log p(observed | true = t)
    logp = np.empty((m, k))
    for t in range(k):
        logp[:, t] = np.bincount(data.inst, weights=contrib[:, t], minlength=m)
    return normalize_log(logp + libm.log(priors)[None, :])


def ds_lower_bound(
    post: np.ndarray, conf: np.ndarray, priors: np.ndarray, table: np.ndarray, n_ratings: int
) -> float:
    """The EM lower bound per rating as crowd-kit computes it (its loss): every rating's
    expected log probability, ``sum_c post[item, c] (log conf[n, c, r] + log prior[c])``, from
    the M-step's soft ``table`` (N, K, K) (``sum_{n,c,r} table log conf`` and the class totals
    of the table against the log priors), plus the entropy of ``post`` (M, K), over the ratings."""
    joint = float((table * libm.log(conf)).sum())
    joint += float((table.sum(axis=(0, 2)) * libm.log(np.maximum(priors, _EPS))).sum())
    entropy = -float((libm.log(np.maximum(post, _EPS)) * post).sum())
    return (joint + entropy) / max(n_ratings, 1)


class DawidSkene(CrowdEstimator):
    """Dawid & Skene (1979) EM with the scale levels as classes, as crowd-kit 1.4.2 runs it.

    Started from majority-vote shares (M-step first); each round an E-step, the class priors
    as the posteriors' mean, an M-step, and the stop when the lower bound per rating
    (``ds_lower_bound``) rises by less than ``tol`` (it stops, too, when the bound falls, as
    crowd-kit does: on adult-content2 after two rounds). ``smoothing`` pseudo-counts are added
    to every confusion cell (default 0, crowd-kit's; cells are floored at 1e-10). The estimate
    is the posterior expected level value ``posterior_ @ scale``.

    Learned: ``posterior_`` (M, K) DataFrame, ``map_level_`` (M,) level index (ties: lower
    level), ``confusion_`` (N, K, K) ``[annotator, true, observed]``, ``priors_`` (K,),
    ``log_likelihood_`` (the last lower bound per rating), ``n_iter_``.
    """

    name = "dawid-skene"

    def __init__(
        self,
        scale: Scale | Sequence[float] | str | None = None,
        max_iter: int = 100,
        tol: float = 1e-5,
        smoothing: float = 0.0,
    ) -> None:
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol
        self.smoothing = smoothing

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) posterior expected values."""
        if self.max_iter < 1 or self.tol < 0 or self.smoothing < 0:
            raise InputError("DawidSkene needs max_iter >= 1, tol >= 0 and smoothing >= 0")
        counts = level_counts(data)
        post = counts / counts.sum(axis=1, keepdims=True)  # (M, K) majority-vote shares
        conf, priors, _ = ds_m_step(post, data, self.smoothing)
        bound = -np.inf
        self.n_iter_ = 0
        for it in range(1, self.max_iter + 1):
            post, _ = ds_e_step(conf, priors, data)
            conf, priors, table = ds_m_step(post, data, self.smoothing)
            new = ds_lower_bound(post, conf, priors, table, data.n_ratings)
            self.n_iter_ = it
            if new - bound < self.tol:
                bound = new
                break
            bound = new
        self.confusion_, self.priors_ = conf, priors
        self.log_likelihood_ = bound
        self.map_level_ = np.argmax(post, axis=1)
        self.posterior_ = posterior_frame(post, data)
        return post @ data.scale.values
