"""Evidence-aware annotator flags: each annotator's reliability judged from their own ratings.

Annotators (``annotator_flags``). The fitted reliability ``eps_n`` is a type-II maximum
likelihood estimate, the mean of omega over n's own ratings; omega is in turn pulled towards
``eps_n``. This loop runs to 0 or 1 whatever the number of ratings (``eps = 0`` is a fixed
point of eq. 5: on TREC 684 of 762 annotators end within 1e-6 of 0 or 1, 79 of them below 0.5
with 5 ratings or fewer), so neither ``eps_n`` nor a Beta posterior built from
``sum(omega)`` and ``n - sum(omega)`` measures evidence: that Beta counts each rating's
omega, which already contains ``eps_n``, as an observation (on TREC it flags 335 annotators,
six of them with 3 ratings or fewer). Instead each rating gets the likelihood ratio
truth : spam that the *other* ratings give it, against the posterior the fit's labels come from
(``evidence.annotator_evidence``). With the label model (the default on up to 11 levels)::

    r_l = q_{-l}(level of l) / pi_level

with ``q_{-l}`` the item's latent-level posterior without rating l (the label fit's, divided
by the rating's own likelihood, so a rating cannot confirm itself): a truthful rating answers
the item's level, a spam one is a draw from the ratings' share of each level ``pi`` (so the
crowd's favourite answer is little evidence). The reliability is then each annotator's share
of ratings that give their item's level, the gold accuracy a manager would measure; it ranks
annotators by that accuracy far better than the continuous fit's (``docs/results.md``, "The
annotator table, against gold"). With the continuous posterior's labels (the paper's model, a
fine scale)::

    r_l = P(level of l | z_m ~ q_{-l}(z_m), x ~ N(z_m, 1/rho_l), x within the scale) / pi_level

with ``q_{-l}`` the item's q(z) without rating l and ``rho_l = E[tau_n] E[delta_c]``
(``evidence.rating_evidence``). Either way an item nobody else rated credibly gives
``r_l ~ 1``: no evidence. With the ratings independent given the items (their leave-one-out
posteriors held at the fit's values), the posterior of n's reliability is one-dimensional and
computed as it is::

    p(eps | n's ratings) ∝ Beta(eps; a0, b0) * prod_l (1 - eps + eps r_l)

(``reliability_posterior`` integrates it on a grid around its mode). An annotator is
``unreliable`` when ``P(eps < threshold) >= confidence``, ``ok`` when
``P(eps >= threshold) >= confidence``, else ``undetermined`` (too few ratings, or a
reliability near the threshold). Since ``r_l >= 0``, P(eps < t) is at most that of n ratings
of pure spam evidence, ``Beta(a0, b0 + n)``: with the defaults (uniform prior, threshold 0.5,
confidence 0.9) no annotator with fewer than 3 ratings can be flagged unreliable, and 3
ratings need decisive contradictions of well-known items (P = 0.9375 at best).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.special import log_expit

from ..numerics import libm
from ..vb import kernels
from . import evidence, passes
from .decisions import (
    CONFIDENCE,
    THRESHOLD,
    _check_prior,
    _check_probability,
    check_flag_settings,
)

#: Beta prior of an annotator's reliability in the evidence posterior (uniform)
RELIABILITY_PRIOR = (1.0, 1.0)

# grid of the reliability posterior in logit space: mode +- _GRID_HALF_WIDTH sds, _GRID_N nodes
_GRID_HALF_WIDTH = 16.0

_GRID_N = 481

# ... and with more than _BIG_L ratings (the 481-node grid costs 481 passes over the ratings,
# 1 s on TREC RF10's 91,783): _GRID_N_BIG nodes, probabilities to about 1e-4 instead of 1e-6
# (tests; on TREC the same flags, P(unreliable) within 3e-5, in 0.4 s)
_BIG_L = 50_000

_GRID_N_BIG = 161

_BISECT_STEPS = 45


# --------------------------------------------------------------------------- annotators
def _eps_of(u: np.ndarray) -> np.ndarray:
    """eps = expit(u), through libm."""
    return libm.exp(log_expit(u))


def _per_annotator(
    ann: np.ndarray, log_r: np.ndarray, n: int, term: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """(N,) sums of ``term(ann, log_r)`` over each annotator's ratings, a chunk at a time
    (``log_r`` clipped to ``evidence.LOG_R_CLIP`` per chunk: no per-rating copy)."""
    out = np.zeros(n)
    for lo in range(0, len(ann), evidence.CHUNK):
        a = ann[lo : lo + evidence.CHUNK]
        lr = np.clip(log_r[lo : lo + evidence.CHUNK], -evidence.LOG_R_CLIP, evidence.LOG_R_CLIP)
        out += np.bincount(a, weights=term(a, lr), minlength=n)
    return out


def pull_sums(
    ann: np.ndarray, log_r: np.ndarray, n: int
) -> Callable[[np.ndarray, bool], np.ndarray]:
    """``pulls(e, square)``: (N,) sums over each annotator's ratings of ``_pull(e[ann], r)``
    (squared if ``square``), ``r = exp(clip(log_r))``; ``ann``, ``log_r`` (L,), ``e`` (N,).

    Compiled (``kernels.USE_JIT``): each call is one pass (``passes.pull_sums``, the same
    bits), with ``r`` computed once when the ratings fit in one chunk, else in every pass, summed
    a chunk at a time as ``_per_annotator`` sums (no (L,) array of ratios beyond a chunk); else
    ``_per_annotator``."""
    if kernels.USE_JIT and len(ann) <= evidence.CHUNK:
        r = libm.exp(np.clip(log_r, -evidence.LOG_R_CLIP, evidence.LOG_R_CLIP))
        return lambda e, square: passes.pull_sums(ann, r, e, square)
    if kernels.USE_JIT:
        return lambda e, square: passes.pull_sums(
            ann, log_r, e, square, evidence.LOG_R_CLIP, evidence.CHUNK
        )

    def pulls(e: np.ndarray, square: bool) -> np.ndarray:
        if square:
            return _per_annotator(ann, log_r, n, lambda a, lr: _pull(e[a], libm.exp(lr)) ** 2)
        return _per_annotator(ann, log_r, n, lambda a, lr: _pull(e[a], libm.exp(lr)))

    return pulls


#: ``pulls(e, square)``: (N,) sums over each annotator's ratings of ``_pull(e[ann], r)``
#: (squared if ``square``), at reliabilities ``e`` (N,)
PullSums = Callable[[np.ndarray, bool], np.ndarray]
#: ``grid(mode, width, z)``: (G, N) sums over each annotator's ratings of
#: ``log(1 - eps + eps r)`` at the nodes ``eps = expit(mode + width z)`` (``grid_nodes``)
GridSums = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _posterior_mode(pulls: PullSums, n: int, a0: float, b0: float) -> tuple[np.ndarray, np.ndarray]:
    """Each annotator's posterior mode in u = logit(eps) (bisection) and the width of its
    curvature there, (N,) each, from their ratings' ``pulls``."""
    # mode of g(u): a0 (1 - eps) - b0 eps + eps (1 - eps) sum (r - 1) / (1 - eps + eps r) = 0
    lo = np.full(n, -60.0)
    hi = np.full(n, 60.0)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        e = _eps_of(mid)
        s = pulls(e, False)
        up = a0 * (1.0 - e) - b0 * e + e * (1.0 - e) * s > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    mode = 0.5 * (lo + hi)
    e = _eps_of(mode)
    s2 = pulls(e, True)
    curv = a0 * (1.0 - e) ** 2 + b0 * e**2 + (e * (1.0 - e)) ** 2 * s2
    return mode, 1.0 / np.sqrt(curv)


def grid_nodes(mode: np.ndarray, width: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The grid (G, N) in u = logit(eps): each annotator's ``mode + width z`` ((N,) each, z
    (G,))."""
    return mode[None, :] + width[None, :] * z[:, None]


def grid_sums(
    ann: np.ndarray,
    log_r: np.ndarray,
    n: int,
    mode: np.ndarray,
    width: np.ndarray,
    z: np.ndarray,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """(G, N) sums over each annotator's ratings (``ann``, ``log_r`` (L,)) of
    ``log(1 - eps + eps r)`` at the nodes ``grid_nodes(mode, width, z)``; each node's the
    same whatever the other nodes of ``z``. ``order`` (L,): ``ann``'s stable argsort, when
    the caller keeps it for several calls (compiled code reads it)."""
    u = grid_nodes(mode, width, z)
    log_e, log_1me = log_expit(u), log_expit(-u)
    if kernels.USE_JIT:  # compiled: one pass per node, the nodes over the cores
        return kernels.grid_loglik(ann, log_r, evidence.LOG_R_CLIP, log_e, log_1me, order)
    return np.stack(
        [
            _per_annotator(
                ann, log_r, n, lambda a, lr, le=le, l1=l1: np.logaddexp(l1[a], le[a] + lr)
            )
            for le, l1 in zip(log_e, log_1me, strict=True)
        ]
    )


def _log_density(
    lik: np.ndarray, a0: float, b0: float, u: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior's log density (up to a constant) at the nodes ``u`` (G, N), from the
    ratings' ``lik`` there (G, N, ``grid_sums``), and eps there; both (N, G)."""
    log_e, log_1me = log_expit(u), log_expit(-u)
    log_g = np.ascontiguousarray((a0 * log_e + b0 * log_1me + lik).T)  # (N, G)
    return log_g, np.ascontiguousarray(libm.exp(log_e).T)


def _cumulative(
    g: np.ndarray, log_g: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Of the density ``g`` (N, G) on a uniform grid: its first and second differences, its
    cumulative integral at the nodes (units of the node spacing) and its total, the tails
    beyond the grid extrapolated as exponentials."""
    n = g.shape[0]
    # cumulative trapezoid in units of the node spacing, with the Euler-Maclaurin end
    # correction -(g'(z_j) - g'(z_0)) / 12 so that partial sums are accurate to O(h^4)
    gp = np.gradient(g, axis=1, edge_order=2)
    gpp = np.zeros_like(g)
    gpp[:, 1:-1] = g[:, 2:] - 2.0 * g[:, 1:-1] + g[:, :-2]
    cell = 0.5 * (g[:, 1:] + g[:, :-1])
    cum = np.concatenate([np.zeros((n, 1)), np.cumsum(cell, axis=1)], axis=1)
    cum -= (gp - gp[:, :1]) / 12.0
    # the tails beyond the grid, extrapolated as exponentials (the prior's tails in logit space)
    slope_left = np.maximum(log_g[:, 1] - log_g[:, 0], 1e-3)
    slope_right = np.maximum(log_g[:, -2] - log_g[:, -1], 1e-3)
    cum += (g[:, 0] / slope_left)[:, None]
    return gp, gpp, cum, cum[:, -1] + g[:, -1] / slope_right


def reliability_posterior(
    ann: np.ndarray,
    log_r: np.ndarray,
    n_annotators: int,
    threshold: float = THRESHOLD,
    interval: float = CONFIDENCE,
    prior: Sequence[float] = RELIABILITY_PRIOR,
    nodes: int | None = None,
) -> pd.DataFrame:
    """Posterior of each annotator's reliability given the evidence of their ratings.

    ``p(eps | ratings) ∝ Beta(eps; a0, b0) prod_l (1 - eps + eps exp(log_r_l))``;
    ``ann``, ``log_r``: (L,). Returns a frame of N rows: ``p_below`` = P(eps < threshold),
    ``mean``, ``median`` (the point a fit reports: inside every central interval and on its
    flag's side), ``lower``, ``upper`` (central ``interval`` credible interval).

    The density is log-concave in eps, so in ``u = logit(eps)`` (where the Jacobian keeps it
    unimodal with a finite mode even when all the evidence points one way) it has one mode,
    found per annotator by bisection; a uniform grid of ``_GRID_N`` nodes spanning
    ``+-16`` curvature sds around it carries the trapezoid rule with its Euler-Maclaurin end
    correction, and the tails beyond are extrapolated as exponentials. Probabilities agree
    with the exact Beta-mixture form of the posterior to about 1e-6 (tests; 481 nodes: 241
    left errors of 2e-6 where a skewed posterior's long tail in u meets the threshold); the
    work is ``O(L * _GRID_N)``. Above ``_BIG_L`` ratings (or with ``nodes``) the grid has
    ``_GRID_N_BIG`` nodes, three times cheaper: probabilities and quantiles to about 1e-4, the
    mean to about 1e-3 (tests), plenty for a flag at 0.9 confidence.
    """
    # no per-rating copy: the codes as given (int32 from CrowdData), log_r clipped per chunk
    ann = np.asarray(ann)
    if ann.dtype.kind not in "iu":
        ann = ann.astype(np.int64)
    log_r = np.asarray(log_r, dtype=float)
    n = n_annotators

    def grid(mode: np.ndarray, width: np.ndarray, z: np.ndarray) -> np.ndarray:
        return grid_sums(ann, log_r, n, mode, width, z)

    grid_n = nodes or grid_nodes_for(len(ann))
    return posterior_from_sums(
        pull_sums(ann, log_r, n), grid, n, threshold, interval, prior, grid_n
    )


def grid_nodes_for(n_ratings: int) -> int:
    """The grid's nodes for a fit of ``n_ratings`` ratings (``reliability_posterior``)."""
    return _GRID_N if n_ratings <= _BIG_L else _GRID_N_BIG


def posterior_from_sums(
    pulls: PullSums,
    grid: GridSums,
    n: int,
    threshold: float,
    interval: float,
    prior: Sequence[float],
    grid_n: int,
) -> pd.DataFrame:
    """``reliability_posterior``'s frame of ``n`` annotators from their ratings' sums: the
    ``pulls`` of the bisection (``_posterior_mode``) and the ``grid`` of ``grid_n`` nodes,
    each a sum per annotator over their ratings (taken in one process, or on the Dask
    engine's blocks and added)."""
    a0, b0 = _check_prior(prior)
    threshold = _check_probability("the reliability threshold", threshold)
    interval = _check_probability("the credible interval", interval)
    mode, width = _posterior_mode(pulls, n, a0, b0)
    z = np.linspace(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH, grid_n)
    lik = grid(mode, width, z)
    log_g, eps_grid = _log_density(lik, a0, b0, grid_nodes(mode, width, z))
    g = libm.exp(log_g - log_g.max(axis=1, keepdims=True))
    gp, gpp, cum, total = _cumulative(g, log_g)
    dz = z[1] - z[0]
    rows = np.arange(n)

    def partial(j: np.ndarray, f: np.ndarray) -> np.ndarray:
        """Integral of g from node j to j + f (0 <= f <= 1), g quadratic around node j."""
        return f * g[rows, j] + 0.5 * f * f * gp[rows, j] + libm.power(f, 3.0) / 6.0 * gpp[rows, j]

    def cdf_at(u: np.ndarray) -> np.ndarray:
        """P(logit eps < u) per annotator."""
        pos = np.clip((u - mode) / width - z[0], 0.0, z[-1] - z[0]) / dz
        j = np.minimum(pos.astype(int), grid_n - 2)
        return (cum[rows, j] + partial(j, pos - j)) / total

    def quantile(q: float) -> np.ndarray:
        """eps at which the posterior's cumulative reaches q (bisection within the cell)."""
        target = q * total
        j = np.clip((cum <= target[:, None]).sum(axis=1) - 1, 0, grid_n - 2)
        rest = target - cum[rows, j]
        f_lo, f_hi = np.zeros(n), np.ones(n)
        for _ in range(40):
            f = 0.5 * (f_lo + f_hi)
            below = partial(j, f) < rest
            f_lo, f_hi = np.where(below, f, f_lo), np.where(below, f_hi, f)
        return _eps_of(mode + width * (z[j] + 0.5 * (f_lo + f_hi) * dz))

    u_t = libm.log(threshold) - libm.log1p(-threshold)
    p_below = np.clip(cdf_at(np.full(n, u_t)), 0.0, 1.0)
    mean = np.sum(0.5 * (g[:, 1:] * eps_grid[:, 1:] + g[:, :-1] * eps_grid[:, :-1]), axis=1)
    return pd.DataFrame(
        {"p_below": p_below, "mean": mean / total, "median": quantile(0.5),
         "lower": quantile(0.5 - 0.5 * interval), "upper": quantile(0.5 + 0.5 * interval)}
    )  # fmt: skip


def _pull(el: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The derivative in eps of ``log(1 - eps + eps r)``: ``(r - 1) / (1 - e + e r)``."""
    return (r - 1.0) / (1.0 - el + el * r)


def annotator_flags(
    model,
    *,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    prior: Sequence[float] = RELIABILITY_PRIOR,
) -> pd.DataFrame:
    """Evidence-aware flag of every annotator; join it to ``model.annotators_``.

    Returns a frame indexed like ``annotators_`` with columns ``flag`` (``unreliable`` when
    P(reliability < threshold | their ratings) >= confidence, ``ok`` when
    P(reliability >= threshold | their ratings) >= confidence, else ``undetermined``),
    ``p_unreliable`` (that first probability), ``reliability_lower`` and ``reliability_upper``
    (central ``confidence`` credible interval of the reliability from the same posterior,
    whose median is ``annotators_["reliability"]``: ``fitted_flags``),
    ``flag_threshold`` and ``flag_confidence`` (the settings used, so a CSV explains itself).
    The posterior is the module docstring's, against the posterior the fit's labels come
    from; it works for fits with or without the spam component (the evidence compares each
    rating with spam drawn at the levels' shares either way).
    At the default settings a fit's own flags (``annotator_flags_``, computed with the fit)
    are returned as they are, not computed again.
    """
    threshold, confidence = check_flag_settings(threshold, confidence)
    own = getattr(model, "annotator_flags_", None)
    defaults = (THRESHOLD, CONFIDENCE, tuple(RELIABILITY_PRIOR))
    if own is not None and (threshold, confidence, tuple(prior)) == defaults:
        return own
    return _flags(model, threshold, confidence, prior)[0]


def fitted_flags(model) -> tuple[pd.DataFrame, np.ndarray]:
    """A fit's own flags at the default settings (``annotator_flags_``) and each annotator's
    reliability (N,), the median of the same posterior (``annotators_["reliability"]``): one
    posterior for the point, its interval and the flag."""
    return _flags(model, THRESHOLD, CONFIDENCE, RELIABILITY_PRIOR)


def _flags(
    model, threshold: float, confidence: float, prior: Sequence[float]
) -> tuple[pd.DataFrame, np.ndarray]:
    """``annotator_flags``' frame and the posterior medians (N,)."""
    log_r = evidence.annotator_evidence(model)
    data = model.data_
    post = reliability_posterior(data.ann, log_r, data.n_annotators, threshold, confidence, prior)
    return flag_frame(post, model.annotators_.index, threshold, confidence)


def flag_frame(
    post: pd.DataFrame, index: pd.Index, threshold: float, confidence: float
) -> tuple[pd.DataFrame, np.ndarray]:
    """The flags' frame (indexed by ``index``, the annotators) read from the reliability
    posterior ``post`` (``reliability_posterior``'s), and its medians (N,)."""
    p = post["p_below"].to_numpy()
    flag = np.where(
        p >= confidence, "unreliable", np.where(1.0 - p >= confidence, "ok", "undetermined")
    )
    frame = pd.DataFrame(
        {
            "flag": flag,
            "p_unreliable": p,
            "reliability_lower": post["lower"].to_numpy(),
            "reliability_upper": post["upper"].to_numpy(),
            "flag_threshold": threshold,
            "flag_confidence": confidence,
        },
        index=index,
    )
    return frame, post["median"].to_numpy()


def fewest_ratings_to_flag(
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    prior: Sequence[float] = RELIABILITY_PRIOR,
    max_n: int = 100_000,
) -> int:
    """The fewest ratings with which an annotator can be flagged ``unreliable`` at all.

    Every rating contradicting its item decisively (``r_l = 0``) gives the posterior
    ``Beta(a0, b0 + n)``; no evidence gives a higher P(reliability < threshold). Returns the
    smallest n with ``P(Beta(a0, b0 + n) < threshold) >= confidence``.
    """
    from scipy.stats import beta

    a0, b0 = _check_prior(prior)
    n = np.arange(max_n + 1)
    ok = beta.cdf(threshold, a0, b0 + n) >= confidence
    return int(n[ok][0]) if ok.any() else max_n + 1
