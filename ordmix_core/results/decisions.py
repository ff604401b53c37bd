"""Decisions from a fit: evidence-aware flags, per-item level probabilities, what to rate next.

A fitted :class:`~ordmix_core.estimators.ordinal_mixture.OrdinalMixture` gives point
estimates; a manager needs to know which of them the ratings actually settle. Everything here is a
pure function of the fit (arrays or frames in, arrays or frames out); no fitting, no I/O.

Annotators (``annotator_flags``). The fitted reliability ``eps_n`` is a type-II maximum
likelihood estimate, the mean of omega over n's own ratings; omega is in turn pulled towards
``eps_n``. This loop runs to 0 or 1 whatever the number of ratings (``eps = 0`` is a fixed
point of eq. 5: on TREC 684 of 762 annotators end within 1e-6 of 0 or 1, 79 of them below 0.5
with 5 ratings or fewer), so neither ``eps_n`` nor a Beta posterior built from
``sum(omega)`` and ``n - sum(omega)`` measures evidence: that Beta counts each rating's
omega, which already contains ``eps_n``, as an observation (on TREC it flags 335 annotators,
six of them with 3 ratings or fewer). Instead each rating gets the likelihood ratio
truth : spam that the *other* ratings give it (``rating_evidence``)::

    r_l = P(level of l | z_m ~ q_{-l}(z_m), x ~ N(z_m, 1/rho_l), x within the scale) / pi_level

with ``q_{-l}`` the item's posterior without rating l (leave-one-out, so a rating cannot
confirm itself) and ``rho_l = E[tau_n] E[delta_c]``. An item nobody else rated credibly has
``q_{-l}`` = the prior and gives ``r_l ~ 1``: no evidence either way. With the ratings
independent given the items (their leave-one-out posteriors and n's expertise held at the
fit's values), the posterior of n's reliability is one-dimensional and computed as it is::

    p(eps | n's ratings) ∝ Beta(eps; a0, b0) * prod_l (1 - eps + eps r_l)

(``reliability_posterior`` integrates it on a grid around its mode). An annotator is
``unreliable`` when ``P(eps < threshold) >= confidence``, ``ok`` when
``P(eps >= threshold) >= confidence``, else ``undetermined`` (too few ratings, or a
reliability near the threshold). Since ``r_l >= 0``, P(eps < t) is at most that of n ratings
of pure spam evidence, ``Beta(a0, b0 + n)``: with the defaults (uniform prior, threshold 0.5,
confidence 0.9) no annotator with fewer than 3 ratings can be flagged unreliable, and 3
ratings need decisive contradictions of well-known items (P = 0.9375 at best).

Items (``item_decisions``). The probability of each level comes from the ordinal confusion
model (``label_model``: the truth one of the levels, an ordinal confusion matrix per
annotator), fitted to the same ratings after the continuous model (``level_proba_``); with
``labels="continuous"`` (the paper's model) from q(z_m) = N(mu_m, 1/lambda_m) integrated over
the scale's threshold intervals, outer ones extended to +-inf. The most probable level is the
``label``, filled for every item, and ``p_wrong = 1 - its probability``; a label whose
runner-up is within ``TIE`` is a tie, and the item ``undetermined``; an item that trusted
raters clearly agree on (``clear_majority``) has their level as its label. An item is
also ``undetermined`` when its ratings carry less than ``min_info`` of the posterior precision
(``rating_info = 1 - lambda / lambda_m``; default 0.5: the prior weighs at least as much as
every rating together): its label is still the most probable level, but that is the prior's
doing (a vague prior puts most of its mass on the outer levels, whose intervals extend to
+-inf), and the ``flag`` says not to trust it.
``expected_gain`` is the expected fall of ``p_wrong`` from one more rating of typical
precision (``expected_gain``); ``next_batch`` ranks items by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from scipy.special import log_expit, ndtr, ndtri

from ..data.crowd import level_labels
from ..errors import InputError
from ..numerics import libm
from ..numerics.truncnorm import tn_stats
from ..vb import kernels
from ..vb.updates import update_z, z_from_sums
from . import label_model

#: an annotator is judged against this reliability (share of ratings from the truth)
THRESHOLD = 0.5
#: a flag (annotator unreliable / ok, item confident) needs at least this posterior probability
CONFIDENCE = 0.9
#: central credible interval of each item's value (columns ``lower_90``, ``upper_90``)
INTERVAL = 0.9
#: an item whose ratings carry less than this share of its posterior precision is undetermined
MIN_INFO = 0.5
#: an item whose two most probable levels are this close is undetermined (a tie, not a label)
TIE = 0.01
#: Beta prior of an annotator's reliability in the evidence posterior (uniform)
RELIABILITY_PRIOR = (1.0, 1.0)
#: evidence ratios are clipped to exp(+-LOG_R_CLIP): beyond that a rating is decisive anyway
LOG_R_CLIP = 50.0

ANNOTATOR_FLAGS = ("unreliable", "ok", "undetermined")
ITEM_FLAGS = ("confident", "uncertain", "undetermined")

# grid of the reliability posterior in logit space: mode +- _GRID_HALF_WIDTH sds, _GRID_N nodes
_GRID_HALF_WIDTH = 16.0
_GRID_N = 481
# ... and with more than _BIG_L ratings (the 481-node grid costs 481 passes over the ratings,
# 1 s on TREC RF10's 91,783): _GRID_N_BIG nodes, probabilities to about 1e-4 instead of 1e-6
# (tests; on TREC the same flags, P(unreliable) within 3e-5, in 0.4 s)
_BIG_L = 50_000
_GRID_N_BIG = 161
_BISECT_STEPS = 45
# ratings per chunk of the per-rating passes (evidence, posterior): temporaries stay ~50 MB
_CHUNK = 1 << 20
# Gauss-Hermite nodes for the expected gain (the integrand is smooth but for kinks of the max)
_GAIN_NODES = 64


# --------------------------------------------------------------------------- checks
def _check_probability(name: str, value: float, low: float = 0.0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not (low < v < 1.0):
        raise InputError(
            f"{name} must be a number between {low:g} and 1 (exclusive), not {value!r}"
        )
    return v


def _check_prior(prior: Sequence[float]) -> tuple[float, float]:
    try:
        a0, b0 = (float(x) for x in prior)
    except (TypeError, ValueError):
        raise InputError(
            f"the reliability prior must be two positive numbers, not {prior!r}"
        ) from None
    if not (a0 > 0 and b0 > 0 and np.isfinite(a0) and np.isfinite(b0)):
        raise InputError(f"the reliability prior must be two positive numbers, not {prior!r}")
    return a0, b0


def check_flag_settings(
    threshold: float = THRESHOLD, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Validate a reliability threshold in (0, 1) and a confidence in (0.5, 1); InputError."""
    return (
        _check_probability("the reliability threshold", threshold),
        _check_probability("the confidence", confidence, low=0.5),
    )


def interval_columns(interval: float = INTERVAL) -> tuple[str, str]:
    """Names of the credible-interval columns, e.g. ``('lower_90', 'upper_90')``."""
    pct = f"{100 * interval:.10g}"
    return f"lower_{pct}", f"upper_{pct}"


def level_columns(values: Sequence[float]) -> list[str]:
    """Names of the level-probability columns, ``p_level_<value>`` (e.g. ``p_level_2``)."""
    return [f"p_level_{float(v):g}" for v in values]


# --------------------------------------------------------------------------- items: arrays
def level_probabilities(mean: np.ndarray, sd: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Probability of each level under q(z) = N(mean, sd^2); shape (M, K), rows sum to 1.

    ``mean``, ``sd``: (M,); ``thresholds``: (K+1,) ``b_0 < ... < b_K``. Level k holds
    ``[b_{k-1}, b_k)`` with the outer intervals extended to -inf and +inf (a true value beyond
    the scale's end is still that end's level), so the rows sum to 1 exactly. An item with
    ``sd`` 0 (a gold item, its value known) has all its probability on its value's level.
    """
    mean = np.asarray(mean, dtype=float)[:, None]
    sd = np.asarray(sd, dtype=float)[:, None]
    inner = np.asarray(thresholds, dtype=float)[1:-1][None, :]
    spread = sd > 0
    z = (inner - mean) / np.where(spread, sd, 1.0)
    cdf = np.where(spread, ndtr(z), (mean < inner).astype(float))  # (M, K-1), nondecreasing
    ones = np.ones((cdf.shape[0], 1))
    edges = np.concatenate([0.0 * ones, cdf, ones], axis=1)
    return np.diff(edges, axis=1)


def credible_interval(
    mean: np.ndarray, sd: np.ndarray, interval: float, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Central ``interval`` credible interval of N(mean, sd^2), clipped to ``[lo, hi]``.

    ``lo``, ``hi`` are the scale's outer thresholds: the model's q(z) is Gaussian and can
    reach far beyond the scale (an unrated item's prior sd is 3.16 on a 1-3 scale), while the
    true value is on the scale, so the ends are clipped there; an interval that equals
    ``[lo, hi]`` says that the ratings do not narrow the value down. Returns two (M,) arrays.
    """
    z = ndtri(0.5 + 0.5 * interval)
    mean = np.asarray(mean, dtype=float)
    sd = np.asarray(sd, dtype=float)
    return np.clip(mean - z * sd, lo, hi), np.clip(mean + z * sd, lo, hi)


def rating_info(sd: np.ndarray, lam: float) -> np.ndarray:
    """Share of q(z)'s precision that comes from the ratings, ``1 - lam * sd^2``; (M,).

    ``lambda_m = lam + sum_l omega_l rho_l``, so this is 0 for an item whose ratings were all
    attributed to spam (q(z) is the prior) and near 1 once one truthful rating is in.
    """
    return np.clip(1.0 - lam * np.asarray(sd, dtype=float) ** 2, 0.0, 1.0)


def expected_gain(
    mean: np.ndarray,
    sd: np.ndarray,
    thresholds: np.ndarray,
    rho: np.ndarray,
    truth_share: float,
) -> np.ndarray:
    """Expected fall of ``p_wrong`` from one more rating; (M,), every entry >= 0.

    ``mean``, ``sd``: q(z_m); ``rho``: (M,) precision of a typical rating of the item
    (``E[tau]`` of the crowd's prior times the item's ``E[delta]``); ``truth_share``: the
    chance that the new rating comes from the truth (a spam rating teaches nothing).

    The new rating is approximated as a continuous observation ``x ~ N(z, 1/rho)``: then the
    updated q(z) has precision ``1/sd^2 + rho`` and a mean distributed as
    ``N(mean, sd^2 - 1/(1/sd^2 + rho))`` before the rating is seen. The gain is
    ``truth_share * (E[max_k P_k(after)] - max_k P_k(now))``, the expectation taken by
    Gauss-Hermite quadrature. It is large for items whose label one rating can still flip
    (few or conflicting ratings), small for items that are settled and for those sitting so
    precisely on a threshold that one rating cannot move them.
    """
    mean = np.asarray(mean, dtype=float)
    sd = np.asarray(sd, dtype=float)
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore"):  # sd 0: a known value (gold), infinite precision
        prec_after = 1.0 / sd**2 + rho
    sd_after = 1.0 / np.sqrt(prec_after)
    spread = np.sqrt(np.maximum(sd**2 - 1.0 / prec_after, 0.0))
    nodes, weights = np.polynomial.hermite_e.hermegauss(_GAIN_NODES)
    weights = weights / weights.sum()
    now = level_probabilities(mean, sd, thresholds).max(axis=1)
    after = np.zeros_like(mean)
    for x, w in zip(nodes, weights, strict=True):
        after += w * level_probabilities(mean + spread * x, sd_after, thresholds).max(axis=1)
    return truth_share * np.maximum(after - now, 0.0)


# --------------------------------------------------------------------------- items: frames
def item_decisions_from_frames(
    items: pd.DataFrame,
    categories: pd.DataFrame,
    hyperparams: dict,
    truth_share: float,
    truth_weight: np.ndarray | None = None,
    level_proba: np.ndarray | None = None,
    *,
    interval: float = INTERVAL,
    confidence: float = CONFIDENCE,
    min_info: float = MIN_INFO,
) -> pd.DataFrame:
    """The decision columns for each item, from a fit's frames (a model or an output folder).

    ``items``: index instance; columns ``estimate``, ``sd``, ``category`` (the engine's
    ``items_`` or ``items.csv``). ``categories``: index category, column ``difficulty``.
    ``hyperparams``: ``thresholds``, ``scale``, ``lambda``, ``alpha``, ``beta`` (the engine's
    ``hyperparams_`` or summary.json's). ``truth_share``: share of all ratings attributed to
    the truth. ``truth_weight``: (M,) sum of omega per item, if known.

    Returns a frame indexed like ``items`` with columns ``label`` (scale value of the most
    probable level, for every item; ``flag`` says whether to trust it), ``p_wrong`` (1 - the
    most probable level's probability), ``p_level_<v>`` for each level v, ``lower_<pct>``,
    ``upper_<pct>`` (the central ``interval`` credible interval, clipped to the scale's
    outer thresholds), ``rating_info``, ``truth_weight`` (NaN if not given),
    ``expected_gain`` and ``flag``: ``undetermined`` when ``rating_info < min_info``, else
    ``confident`` when the label's probability is at least ``confidence``, else
    ``uncertain``.

    ``level_proba`` (M, K): the items' level probabilities from the ordinal confusion model
    (``OrdinalMixture.level_proba_``, or ``items.csv``'s ``p_level_*`` of such a fit). When
    given, they are the ``p_level_*`` columns, the label is their most probable level (the
    decision that minimises the expected label error), ``lower``/``upper`` the narrowest run
    of adjacent levels around the label holding ``interval`` of them, and an item whose two
    most probable levels are within ``TIE`` is ``undetermined`` (the ratings do not decide
    its label). An item with a ``clear_majority`` (a column of ``items``: the level that
    trusted raters agree on, see ``OrdinalMixture._fit_levels``) has that level as its label.
    Otherwise all come from the continuous posterior N(estimate, sd^2).
    """
    interval = _check_probability("the credible interval", interval)
    confidence = _check_probability("the confidence", confidence, low=0.5)
    min_info = _check_probability("min_info", min_info)
    thresholds = np.asarray(hyperparams["thresholds"], dtype=float)
    values = np.asarray(hyperparams["scale"], dtype=float)
    lam = float(hyperparams["lambda"])
    mean = items["estimate"].to_numpy(dtype=float)
    sd = items["sd"].to_numpy(dtype=float)

    info = rating_info(sd, lam)
    undetermined = info < min_info
    if level_proba is None:
        probs = level_probabilities(mean, sd, thresholds)
        best = probs.argmax(axis=1)
        lower, upper = credible_interval(mean, sd, interval, thresholds[0], thresholds[-1])
    else:
        probs = np.asarray(level_proba, dtype=float)
        best, tie = label_model.decide(probs, TIE)
        if "clear_majority" in items.columns:
            clear = items["clear_majority"].to_numpy(dtype=float)
            has = np.isfinite(clear)
            best = np.where(has, np.searchsorted(values, np.where(has, clear, values[0])), best)
            tie = tie & ~has
        undetermined = undetermined | tie
        lo, hi = label_model.level_interval(probs, best, interval)
        lower, upper = values[lo], values[hi]
    p_best = probs[np.arange(len(best)), best]
    difficulty = (
        categories["difficulty"].reindex(items["category"].astype(object)).to_numpy(dtype=float)
    )
    if np.isnan(difficulty).any():
        missing = items["category"][np.isnan(difficulty)].iloc[0]
        raise InputError(f"category {missing!r} of the items is not in the categories table")
    rho = float(hyperparams["alpha"]) / float(hyperparams["beta"]) * difficulty
    gain = expected_gain(mean, sd, thresholds, rho, truth_share)

    lo_col, hi_col = interval_columns(interval)
    out = pd.DataFrame(
        {
            "label": level_labels(values)[best],
            "p_wrong": 1.0 - p_best,
        },
        index=items.index,
    )
    for col, p in zip(level_columns(values), probs.T, strict=True):
        out[col] = p
    out[lo_col] = lower
    out[hi_col] = upper
    out["rating_info"] = info
    out["truth_weight"] = np.nan if truth_weight is None else np.asarray(truth_weight, float)
    out["expected_gain"] = gain
    out["flag"] = np.where(
        undetermined, "undetermined", np.where(p_best >= confidence, "confident", "uncertain")
    )
    return out


def item_decisions(
    model,
    *,
    interval: float = INTERVAL,
    confidence: float = CONFIDENCE,
    min_info: float = MIN_INFO,
) -> pd.DataFrame:
    """``item_decisions_from_frames`` for a fitted model; join it to ``model.items_``.

    ``truth_weight`` (sum of omega over the item's ratings) is filled when the model keeps
    ``omega_`` (the in-memory engine does; the Dask engine leaves it on the workers: NaN).
    Computed ``ITEM_CHUNK`` items at a time (``iter_item_decisions``): the same values, with
    temporaries of a chunk's size instead of a dozen (M, K) arrays.
    """
    parts = list(
        iter_item_decisions(model, interval=interval, confidence=confidence, min_info=min_info)
    )
    return parts[0] if len(parts) == 1 else pd.concat(parts)


#: items per chunk of ``iter_item_decisions`` (the expected gain's quadrature makes several
#: (chunk, K) temporaries per node: ~10 MB each at 5 levels)
ITEM_CHUNK = 1 << 18


def iter_item_decisions(
    model,
    *,
    interval: float = INTERVAL,
    confidence: float = CONFIDENCE,
    min_info: float = MIN_INFO,
    chunk: int | None = None,
) -> Iterator[pd.DataFrame]:
    """``item_decisions`` of ``model.items_``' rows ``chunk`` (default ``ITEM_CHUNK``) at a
    time, in order (at least one frame, empty when there are no items): what ``ordmix fit``
    writes ``items.csv`` from without holding every item's decision columns at once."""
    chunk = max(int(ITEM_CHUNK if chunk is None else chunk), 1)
    omega = getattr(model, "omega_", None)
    if omega is not None:
        data = model.data_
        truth_weight = np.bincount(data.inst, weights=omega, minlength=data.n_instances)
        truth_share = float(np.mean(omega)) if omega.size else 1.0
    else:
        truth_weight = None
        ann = model.annotators_
        total = float(ann["n_ratings"].sum())
        truth_share = float((ann["n_ratings"] * (1.0 - ann["spam_share"])).sum() / total)
    items = model.items_
    proba = getattr(model, "level_proba_", None)
    for lo in range(0, max(len(items), 1), chunk):
        rows = slice(lo, lo + chunk)
        yield item_decisions_from_frames(
            items.iloc[rows],
            model.categories_,
            model.hyperparams_,
            truth_share,
            None if truth_weight is None else truth_weight[rows],
            None if proba is None else proba[rows],
            interval=interval,
            confidence=confidence,
            min_info=min_info,
        )


# --------------------------------------------------------------------------- annotators
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
    log_in_level = tn_stats(t[level], t[level + 1], mean, s2).log_z
    full_lo = np.full_like(mean, t[0])
    full_hi = np.full_like(mean, t[-1])
    log_on_scale = tn_stats(full_lo, full_hi, mean, s2).log_z
    log_r = log_in_level - log_on_scale - libm.log(np.asarray(pi, dtype=float))[level]
    return np.clip(log_r, -LOG_R_CLIP, LOG_R_CLIP)


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
    ``mean``, ``lower``, ``upper`` (central ``interval`` credible interval).

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
    a0, b0 = _check_prior(prior)
    threshold = _check_probability("the reliability threshold", threshold)
    interval = _check_probability("the credible interval", interval)
    # no per-rating copy: the codes as given (int32 from CrowdData), log_r clipped per chunk
    ann = np.asarray(ann)
    if ann.dtype.kind not in "iu":
        ann = ann.astype(np.int64)
    log_r = np.asarray(log_r, dtype=float)
    n = n_annotators

    def per_annotator(term: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """(N,) sums of ``term(ann, log_r)`` over each annotator's ratings, a chunk at a time."""
        out = np.zeros(n)
        for lo in range(0, len(ann), _CHUNK):
            a = ann[lo : lo + _CHUNK]
            lr = np.clip(log_r[lo : lo + _CHUNK], -LOG_R_CLIP, LOG_R_CLIP)
            out += np.bincount(a, weights=term(a, lr), minlength=n)
        return out

    def eps_of(u: np.ndarray) -> np.ndarray:
        return libm.exp(log_expit(u))

    # mode of g(u): a0 (1 - eps) - b0 eps + eps (1 - eps) sum (r - 1) / (1 - eps + eps r) = 0
    lo = np.full(n, -60.0)
    hi = np.full(n, 60.0)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        e = eps_of(mid)
        s = per_annotator(lambda a, lr, e=e: _pull(e[a], libm.exp(lr)))
        up = a0 * (1.0 - e) - b0 * e + e * (1.0 - e) * s > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    mode = 0.5 * (lo + hi)
    e = eps_of(mode)
    s2 = per_annotator(lambda a, lr: _pull(e[a], libm.exp(lr)) ** 2)
    curv = a0 * (1.0 - e) ** 2 + b0 * e**2 + (e * (1.0 - e)) ** 2 * s2
    width = 1.0 / np.sqrt(curv)

    grid_n = nodes or (_GRID_N if len(ann) <= _BIG_L else _GRID_N_BIG)
    z = np.linspace(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH, grid_n)
    u = mode[None, :] + width[None, :] * z[:, None]  # (G, N)
    log_e, log_1me = log_expit(u), log_expit(-u)
    if kernels.USE_JIT:  # compiled: one pass per node, the nodes over the cores
        lik = kernels.grid_loglik(ann, log_r, LOG_R_CLIP, log_e, log_1me)
    else:
        lik = np.stack(
            [
                per_annotator(lambda a, lr, le=le, l1=l1: np.logaddexp(l1[a], le[a] + lr))
                for le, l1 in zip(log_e, log_1me, strict=True)
            ]
        )
    log_g = np.ascontiguousarray((a0 * log_e + b0 * log_1me + lik).T)  # (N, G)
    eps_grid = np.ascontiguousarray(libm.exp(log_e).T)
    del u, log_e, log_1me, lik  # (G, N) each: 26 MB at 20,000 annotators and 161 nodes
    g = libm.exp(log_g - log_g.max(axis=1, keepdims=True))
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
    total = cum[:, -1] + g[:, -1] / slope_right
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
        return eps_of(mode + width * (z[j] + 0.5 * (f_lo + f_hi) * dz))

    u_t = libm.log(threshold) - libm.log1p(-threshold)
    p_below = np.clip(cdf_at(np.full(n, u_t)), 0.0, 1.0)
    mean = np.sum(0.5 * (g[:, 1:] * eps_grid[:, 1:] + g[:, :-1] * eps_grid[:, :-1]), axis=1)
    return pd.DataFrame(
        {
            "p_below": p_below,
            "mean": mean / total,
            "lower": quantile(0.5 - 0.5 * interval),
            "upper": quantile(0.5 + 0.5 * interval),
        }
    )


def _pull(el: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The derivative in eps of ``log(1 - eps + eps r)``: ``(r - 1) / (1 - e + e r)``."""
    return (r - 1.0) / (1.0 - el + el * r)


def annotator_evidence(model) -> np.ndarray:
    """``log r_l`` for every rating of a fitted in-memory model (see ``rating_evidence``); (L,).

    Needs the per-rating ``omega_`` and ``data_`` (the Dask engine keeps them on its workers).
    """
    omega = getattr(model, "omega_", None)
    data = getattr(model, "data_", None)
    if omega is None or not hasattr(data, "level"):
        raise InputError(
            "annotator flags need the fit's per-rating results (omega_), which the Dask engine "
            "keeps on its workers; fit with the in-memory engine"
        )
    hp = model.hyperparams_
    thresholds = np.asarray(hp["thresholds"], dtype=float)
    expertise = model.annotators_["expertise"].to_numpy(dtype=float)
    difficulty = model.categories_["difficulty"].to_numpy(dtype=float)
    estimate = model.items_["estimate"].to_numpy(dtype=float)
    values = np.asarray(hp["scale"], dtype=float)
    ordinal = getattr(model, "ordinal", True)
    mu, lam, n_inst = float(hp["mu"]), float(hp["lambda"]), data.n_instances
    # a chunk of ratings at a time, so that no per-rating temporary is bigger than a chunk
    chunks = [slice(lo, lo + _CHUNK) for lo in range(0, len(data.ann), _CHUNK)] or [slice(0, 0)]

    def rho_ex(sl: slice) -> tuple[np.ndarray, np.ndarray]:
        rho = expertise[data.ann[sl]] * difficulty[data.cat[sl]]
        lev = data.level[sl]
        if not ordinal:
            return rho, values[lev]
        return rho, tn_stats(thresholds[lev], thresholds[lev + 1], estimate[data.inst[sl]], rho).ex

    z = None  # one chunk: leave_one_out sums over it; more: the sums over all chunks first
    if len(chunks) > 1:
        sum_w, sum_wx = np.zeros(n_inst), np.zeros(n_inst)
        for sl in chunks:
            rho, ex = rho_ex(sl)
            w = omega[sl] * rho
            sum_w += np.bincount(data.inst[sl], weights=w, minlength=n_inst)
            sum_wx += np.bincount(data.inst[sl], weights=w * ex, minlength=n_inst)
        z = z_from_sums(sum_w, sum_wx, mu, lam)
    log_r = np.empty(len(data.ann))
    for sl in chunks:
        rho, ex = rho_ex(sl)
        mean, prec = leave_one_out(data.inst[sl], omega[sl], rho, ex, mu, lam, n_inst, z)
        log_r[sl] = rating_evidence(
            data.level[sl], mean, prec, rho, thresholds, np.asarray(hp["pi"])
        )
    return log_r


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
    (central ``confidence`` credible interval of the reliability from the same posterior),
    ``flag_threshold`` and ``flag_confidence`` (the settings used, so a CSV explains itself).
    The posterior is the module docstring's; it works for fits with or without the spam
    component (the evidence compares each rating with uniform-at-``pi`` spam either way).
    At the default settings a fit's own flags (``annotator_flags_``, computed by the default's
    spam decision) are returned as they are, not computed again.
    """
    threshold, confidence = check_flag_settings(threshold, confidence)
    own = getattr(model, "annotator_flags_", None)
    defaults = (THRESHOLD, CONFIDENCE, tuple(RELIABILITY_PRIOR))
    if own is not None and (threshold, confidence, tuple(prior)) == defaults:
        return own
    log_r = annotator_evidence(model)
    data = model.data_
    post = reliability_posterior(data.ann, log_r, data.n_annotators, threshold, confidence, prior)
    p = post["p_below"].to_numpy()
    flag = np.where(
        p >= confidence, "unreliable", np.where(1.0 - p >= confidence, "ok", "undetermined")
    )
    return pd.DataFrame(
        {
            "flag": flag,
            "p_unreliable": p,
            "reliability_lower": post["lower"].to_numpy(),
            "reliability_upper": post["upper"].to_numpy(),
            "flag_threshold": threshold,
            "flag_confidence": confidence,
        },
        index=model.annotators_.index,
    )


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


# --------------------------------------------------------------------------- what to do next
def next_batch(items: pd.DataFrame, n: int = 50, by: str = "expected_gain") -> pd.DataFrame:
    """The ``n`` items one more rating would help most, ready for the annotation platform.

    ``items``: ``model.items_`` joined with ``item_decisions(model)`` (index instance; columns
    ``n_ratings``, ``label``, ``p_wrong``, ``expected_gain``, ``flag``, optionally ``query``).
    ``by``: ``expected_gain`` (default; how much one rating is expected to lower p_wrong) or
    ``p_wrong``. Ties are broken by the other score, then by fewer ratings, then by instance.
    Returns columns ``rank`` (1..n), ``instance``, ``query`` (if present), ``label``,
    ``p_wrong``, ``expected_gain``, ``n_ratings``, ``flag``.
    """
    if by not in ("expected_gain", "p_wrong"):
        raise InputError(f"rank the batch by expected_gain or p_wrong, not {by!r}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"the batch size must be a whole number >= 1, not {n!r}")
    need = ["n_ratings", "label", "p_wrong", "expected_gain", "flag"]
    missing = [c for c in need if c not in items.columns]
    if missing:
        raise InputError(f"the items table has no column(s) {', '.join(missing)}")
    other = "p_wrong" if by == "expected_gain" else "expected_gain"
    t = items.reset_index()
    if "instance" not in t.columns:
        t = t.rename(columns={t.columns[0]: "instance"})
    t = t.sort_values(
        [by, other, "n_ratings", "instance"],
        ascending=[False, False, True, True],
        kind="stable",
    ).head(int(n))
    cols = ["instance"] + (["query"] if "query" in t.columns else [])
    cols += ["label", "p_wrong", "expected_gain", "n_ratings", "flag"]
    out = t[cols].reset_index(drop=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    return out


def annotators_to_review(annotators: pd.DataFrame) -> pd.DataFrame:
    """Annotators flagged ``unreliable``, most certain first, with the evidence.

    ``annotators``: ``model.annotators_`` joined with ``annotator_flags(model)``. Returns
    columns ``annotator``, ``flag``, ``p_unreliable``, ``n_ratings``, ``reliability`` (the
    fit's point estimate), ``reliability_lower``, ``reliability_upper``, ``expertise``,
    ``spam_share``, sorted by ``p_unreliable`` then ``n_ratings`` (both descending).
    """
    need = ["flag", "p_unreliable", "n_ratings", "reliability", "reliability_lower",
            "reliability_upper", "expertise", "spam_share"]  # fmt: skip
    missing = [c for c in need if c not in annotators.columns]
    if missing:
        raise InputError(f"the annotators table has no column(s) {', '.join(missing)}")
    t = annotators.reset_index()
    if "annotator" not in t.columns:
        t = t.rename(columns={t.columns[0]: "annotator"})
    t = t[t["flag"] == "unreliable"].sort_values(
        ["p_unreliable", "n_ratings", "annotator"], ascending=[False, False, True], kind="stable"
    )
    return t[["annotator", *need]].reset_index(drop=True)


# --------------------------------------------------------------------------- the why


def _ids(values: pd.Series | pd.Index) -> np.ndarray:
    """IDs as plain strings (the readers' Arrow-backed or categorical IDs compare alike)."""
    return np.asarray(pd.Series(values).astype(str), dtype=object)


def item_ratings(
    ratings: pd.DataFrame, instance: str, flags: pd.Series | None = None
) -> pd.DataFrame:
    """One item's ratings: ``annotator``, ``rating`` and the annotator's ``flag``
    (``annotator_flags``' flag by annotator; "" without flags), most trusted raters first
    (ok, undetermined, unreliable), then by rating and annotator.

    ``ratings``: the long table (annotator, instance, rating).
    """
    t = ratings.loc[_ids(ratings["instance"]) == str(instance), ["annotator", "rating"]]
    t = pd.DataFrame({"annotator": _ids(t["annotator"]), "rating": t["rating"].to_numpy(float)})
    if flags is not None:
        by = pd.Series(flags.to_numpy(), index=_ids(flags.index))
        t["flag"] = by.reindex(t["annotator"]).fillna("").to_numpy()
    else:
        t["flag"] = ""
    order = {"ok": 0, "undetermined": 1, "": 1, "unreliable": 2}
    t["_o"] = t["flag"].map(order).fillna(3)
    return (
        t.sort_values(["_o", "rating", "annotator"], kind="stable")
        .drop(columns="_o")
        .reset_index(drop=True)
    )


def annotator_items(ratings: pd.DataFrame, annotator: str, items: pd.DataFrame) -> pd.DataFrame:
    """The items one annotator rated: ``instance``, ``rating``, the item's ``label`` and
    ``estimate``, and ``agrees`` (their rating is the label); disagreements first.

    ``items``: index instance, columns ``label`` and ``estimate`` (``items_`` joined with
    ``item_decisions``).
    """
    t = ratings.loc[_ids(ratings["annotator"]) == str(annotator), ["instance", "rating"]]
    inst = _ids(t["instance"])
    by = items[["label", "estimate"]].set_axis(_ids(items.index), axis=0)
    out = pd.DataFrame({"instance": inst, "rating": t["rating"].to_numpy(float)})
    out["label"] = by["label"].reindex(inst).to_numpy(float)
    out["estimate"] = by["estimate"].reindex(inst).to_numpy(float)
    out["agrees"] = out["rating"] == out["label"]
    return out.sort_values(["agrees", "instance"], kind="stable").reset_index(drop=True)


def agreement(annotator_items: pd.DataFrame) -> float:
    """The share of an annotator's ratings equal to their item's label (NaN without any)."""
    return float(annotator_items["agrees"].mean()) if len(annotator_items) else float("nan")


def undetermined_to_rate(items: pd.DataFrame) -> pd.DataFrame:
    """The undetermined items, most useful to rate first: ``expected_gain`` descending, then
    fewest ratings, then instance. ``items``: ``items_`` joined with ``item_decisions``."""
    t = items[items["flag"] == "undetermined"].reset_index()
    if "instance" not in t.columns:
        t = t.rename(columns={t.columns[0]: "instance"})
    t = t.sort_values(
        ["expected_gain", "n_ratings", "instance"], ascending=[False, True, True], kind="stable"
    )
    cols = ["instance"] + (["query"] if "query" in t.columns else [])
    cols += ["label", "p_wrong", "expected_gain", "n_ratings", "rating_info"]
    return t[[c for c in cols if c in t.columns]].reset_index(drop=True)


def probability_text(p: float, digits: int = 3) -> str:
    """A probability for people: ``digits`` decimals, "<0.001" (or ">0.999") at the ends
    instead of 1e-10, "" for NaN."""
    if not np.isfinite(p):
        return ""
    small = 10.0**-digits
    if p < small:
        return f"<{small:.{digits}f}"
    if p > 1 - small:
        return f">{1 - small:.{digits}f}"
    return f"{p:.{digits}f}"


def clean_round(x: pd.Series | np.ndarray, digits: int = 2) -> np.ndarray:
    """Rounded to ``digits``, without negative zeros (``-0.00`` shows as ``0.00``)."""
    return np.round(np.asarray(x, dtype=float), digits) + 0.0
