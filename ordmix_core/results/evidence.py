"""Each rating's evidence, truth against spam, from the other ratings of its item: the
observations of each annotator's reliability posterior (``reliability``, whose docstring
derives it), taken against the posterior the fit's labels come from.

- The label model's (``labels/confusion_model``): ``label_evidence`` is the probability that
  the item's latent-level posterior without the rating gives the rating's level, against the
  ratings' share of that level; ``ratings_label_evidence`` takes it a chunk at a time.
- The continuous posterior's (the paper's model, a fine scale): ``rating_evidence`` is the
  likelihood ratio of one rating against its item's leave-one-out q(z) (``leave_one_out``);
  ``ratings_evidence`` takes it for a set of ratings holding every rating of their items (a
  fit's, or a Dask block's), a chunk at a time.

Pure array functions but ``annotator_evidence`` and ``continuous_evidence``, which read a
fitted in-memory model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ..errors import InputError
from ..numerics import libm
from ..numerics.fixed_order import log_softmax
from ..numerics.truncnorm import tn_log_z, tn_stats
from ..vb.updates import update_z, z_from_sums

#: ratings per chunk of the per-rating passes (evidence, the reliability posterior's sums):
#: temporaries stay ~50 MB
CHUNK = 1 << 20
#: ratings per chunk of ``ratings_label_evidence``, whose temporaries are (chunk, K) floats,
#: about four of them alive at once (measured: 150 MB for a chunk of 2**20 at K = 5, 10 MB
#: for one of 2**16); each rating's evidence is its own, so the chunks change no bit
LABEL_CHUNK = 1 << 16
#: evidence ratios are clipped to exp(+-LOG_R_CLIP): beyond that a rating is decisive anyway
LOG_R_CLIP = 50.0


def leave_one_out(
    inst: np.ndarray,
    omega: np.ndarray,
    rho: np.ndarray,
    ex: np.ndarray,
    mu: float,
    lam: float,
    n_instances: int,
    z: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and precision of each rating's item posterior without that rating; (L,) each.

    The q(z) update (``updates.update_z``) with weights ``omega_l rho_l`` and observations
    ``E[x_l]``, minus rating l's own term. Inputs (L,) but ``mu``, ``lam`` (the prior of z);
    ``z``: that update's ``(mu_m, lambda_m)`` (M,) when already summed over all the ratings
    (then the inputs may be a chunk of them).
    """
    w = omega * rho
    mu_m, lam_m = update_z(inst, w, ex, mu, lam, n_instances) if z is None else z
    prec = np.maximum(lam_m[inst] - w, lam)
    mean = (mu_m[inst] * lam_m[inst] - w * ex) / prec
    return mean, prec


def rating_evidence(
    level: np.ndarray,
    mean: np.ndarray,
    prec: np.ndarray,
    rho: np.ndarray,
    thresholds: np.ndarray,
    pi: np.ndarray,
) -> np.ndarray:
    """``log r_l``: log likelihood ratio truth : spam of each rating's level; (L,).

    ``level`` (L,) level index; ``mean``, ``prec``: the item's posterior without the rating
    (``leave_one_out``); ``rho`` (L,): the rating's precision. A truthful rating is
    ``x ~ N(z, 1/rho)`` with z from that posterior, so x ~ N(mean, 1/prec + 1/rho); its level
    probability is normalised over the scale's range ``[b_0, b_K)`` (a vague prior's mass off
    the scale is not evidence). A spam rating has probability ``pi[level]``. Clipped to
    ``+-LOG_R_CLIP``.
    """
    t = np.asarray(thresholds, dtype=float)
    s2 = 1.0 / (1.0 / prec + 1.0 / rho)
    log_in_level = tn_log_z(t[level], t[level + 1], mean, s2)
    full_lo = np.full_like(mean, t[0])
    full_hi = np.full_like(mean, t[-1])
    log_on_scale = tn_log_z(full_lo, full_hi, mean, s2)
    log_r = log_in_level - log_on_scale - libm.log(np.asarray(pi, dtype=float))[level]
    return np.clip(log_r, -LOG_R_CLIP, LOG_R_CLIP)


def leave_one_out_by_chunk(
    inst: np.ndarray,
    omega: np.ndarray,
    chunks: list[slice],
    rho_ex: Callable[[slice], tuple[np.ndarray, np.ndarray]],
    mu: float,
    lam: float,
    n_instances: int,
) -> Iterator[tuple[slice, np.ndarray, np.ndarray, np.ndarray]]:
    """``(sl, rho, mean, prec)`` for each chunk ``sl`` of the ratings (slices of the (L,)
    arrays ``inst``, ``omega``): ``rho_ex(sl)``'s precisions (and truncated-normal means, the
    observations of ``leave_one_out``) and each rating's item posterior without it. With more
    than one chunk the items' posteriors are summed over every chunk first (``rho_ex`` then
    runs twice a chunk), so that no per-rating temporary is bigger than a chunk."""
    z = None  # one chunk: leave_one_out sums over it; more: the sums over all chunks first
    if len(chunks) > 1:
        sum_w, sum_wx = np.zeros(n_instances), np.zeros(n_instances)
        for sl in chunks:
            rho, ex = rho_ex(sl)
            w = omega[sl] * rho
            sum_w += np.bincount(inst[sl], weights=w, minlength=n_instances)
            sum_wx += np.bincount(inst[sl], weights=w * ex, minlength=n_instances)
        z = z_from_sums(sum_w, sum_wx, mu, lam)
    for sl in chunks:
        rho, ex = rho_ex(sl)
        mean, prec = leave_one_out(inst[sl], omega[sl], rho, ex, mu, lam, n_instances, z)
        yield sl, rho, mean, prec


def label_evidence(
    q: np.ndarray, log_own: np.ndarray, level: np.ndarray, log_pi: np.ndarray
) -> np.ndarray:
    """``log r_l`` against the label model: log ``q_{-l}(level_l) / pi[level_l]``; (L,).

    ``q`` (L, K): the latent-level posterior of each rating's item, that rating included;
    ``log_own`` (L, K): log P_n(level_l | c) of the rating under its annotator's confusion,
    which ``q`` is divided by to leave the rating out (a rating cannot confirm itself);
    ``level`` (L,); ``log_pi`` (K,): the log of the ratings' share of each level. A truthful
    rating answers its item's level; a spam one is a draw from the ratings' level shares (so
    that answering the crowd's favourite level is little evidence). An item nobody else rated
    has ``q_{-l}`` = the class prior: r_l near 1. Clipped to ``+-LOG_R_CLIP``."""
    loo = log_softmax(libm.log(np.maximum(q, 1e-300)) - log_own)
    log_r = loo[np.arange(level.size), level] - log_pi[level]
    return np.clip(log_r, -LOG_R_CLIP, LOG_R_CLIP)


def level_log_shares(counts: np.ndarray) -> np.ndarray:
    """log of each level's share of the ratings (K,) from their counts (K,); a level nobody
    chose (never looked up) gets the share of one rating."""
    c = np.maximum(np.asarray(counts, dtype=float), 1.0)
    return libm.log(c / c.sum())


def ratings_label_evidence(
    ann: np.ndarray,
    inst: np.ndarray,
    level: np.ndarray,
    q: np.ndarray,
    confusion: np.ndarray,
    log_pi: np.ndarray,
) -> np.ndarray:
    """``label_evidence`` of the ratings ``ann``, ``inst``, ``level`` (L,; the levels the label
    model was fitted on), every rating of their items among them, a chunk at a time: ``q``
    (M, K) the items' latent-level posteriors, ``confusion`` (N, K, K) the annotators'
    (``[n, c, k]``: P_n(k | c)), ``log_pi`` (K,) ``level_log_shares``."""
    log_r = np.empty(len(ann))
    for lo in range(0, len(ann), LABEL_CHUNK):
        sl = slice(lo, lo + LABEL_CHUNK)
        lev = level[sl]
        own = libm.log(np.maximum(confusion[ann[sl], :, lev], 1e-300))
        log_r[sl] = label_evidence(q[inst[sl]], own, lev, log_pi)
    return log_r


def annotator_evidence(model) -> np.ndarray:
    """``log r_l`` for every rating of a fitted in-memory model; (L,): against its label
    model (``ratings_label_evidence``) when its labels are that model's, else against its
    continuous posterior (``continuous_evidence``). The Dask engine's blocks hold their own."""
    data = getattr(model, "data_", None)
    result = getattr(model, "label_result_", None)
    fit = getattr(result, "fit", None)
    if fit is not None and getattr(fit, "q", None) is not None and hasattr(data, "level"):
        classes = result.classes
        level = data.level if classes is None else classes[data.level]
        counts = np.bincount(level, minlength=fit.q.shape[1])
        return ratings_label_evidence(
            data.ann, data.inst, level, fit.q, fit.confusion, level_log_shares(counts)
        )
    return continuous_evidence(model)


def continuous_evidence(model) -> np.ndarray:
    """``log r_l`` for every rating of a fitted in-memory model against its continuous
    posterior q(z) (``ratings_evidence``); (L,). Needs the per-rating ``omega_`` and
    ``data_`` (the Dask engine's blocks hold theirs)."""
    data = getattr(model, "data_", None)
    omega = getattr(model, "omega_", None)
    if omega is None or not hasattr(data, "level"):
        raise InputError(
            "annotator flags need the fit's per-rating results (omega_), which the Dask engine "
            "keeps on its workers; fit with the in-memory engine"
        )
    return ratings_evidence(
        data.ann, data.inst, data.cat, data.level, omega,
        model.annotators_["expertise"].to_numpy(dtype=float),
        model.categories_["difficulty"].to_numpy(dtype=float),
        model.items_["z_mean"].to_numpy(dtype=float),  # the continuous fit's q(z)
        model.hyperparams_, getattr(model, "ordinal", True),
    )  # fmt: skip


def ratings_evidence(
    ann: np.ndarray,
    inst: np.ndarray,
    cat: np.ndarray,
    level: np.ndarray,
    omega: np.ndarray,
    expertise: np.ndarray,
    difficulty: np.ndarray,
    z_mean: np.ndarray,
    hp: dict,
    ordinal: bool = True,
) -> np.ndarray:
    """``log r_l`` of the ratings ``ann``, ``inst``, ``cat``, ``level``, ``omega`` (L,) (see
    ``rating_evidence``), every rating of their items among them: the annotators' ``expertise``
    (E[tau], indexed by ``ann``), the categories' ``difficulty`` (E[delta], by ``cat``), the
    items' ``z_mean`` (M,, by ``inst``), the fit's ``hyperparams_`` ``hp`` (thresholds, scale,
    mu, lambda, pi)."""
    thresholds = np.asarray(hp["thresholds"], dtype=float)
    values = np.asarray(hp["scale"], dtype=float)
    mu, lam, n_inst = float(hp["mu"]), float(hp["lambda"]), z_mean.size
    # a chunk of ratings at a time, so that no per-rating temporary is bigger than a chunk
    chunks = [slice(lo, lo + CHUNK) for lo in range(0, len(ann), CHUNK)] or [slice(0, 0)]

    def rho_ex(sl: slice) -> tuple[np.ndarray, np.ndarray]:
        rho = expertise[ann[sl]] * difficulty[cat[sl]]
        lev = level[sl]
        if not ordinal:
            return rho, values[lev]
        return rho, tn_stats(thresholds[lev], thresholds[lev + 1], z_mean[inst[sl]], rho).ex

    log_r = np.empty(len(ann))
    for sl, rho, mean, prec in leave_one_out_by_chunk(inst, omega, chunks, rho_ex, mu, lam, n_inst):
        log_r[sl] = rating_evidence(level[sl], mean, prec, rho, thresholds, np.asarray(hp["pi"]))
    return log_r
