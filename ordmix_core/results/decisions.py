"""Decisions from a fit: each item's decision columns, what to rate next, whom to review.

Everything here is a pure function of a fit (arrays or frames in, arrays or frames out); no
fitting, no I/O. Items: every decision column is read from the fit's one posterior over the
levels (``labels.posterior.LabelPosterior``, made by ``labels.choose``; the paper's model's is
its continuous posterior over the scale's intervals, ``continuous_posterior``) by
``item_columns``. Annotators: their flags come from ``reliability``; ``annotators_to_review``
lists the flagged ones with the evidence. ``next_batch`` ranks the items by the expected fall
of ``p_wrong`` from one more rating, computed from the same posterior.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.special import ndtr

from ..data.scale import level_labels
from ..errors import FitWarning, InputError, SpamWarning, UndeterminedWarning
from ..labels.choose import LabelResult
from ..labels.policy import DEFAULT as DEFAULT_POLICY
from ..labels.policy import LabelPolicy
from ..labels.posterior import ITEM_FLAGS, LabelPosterior, decide, item_flags

#: an annotator is judged against this reliability (share of ratings from the truth)
THRESHOLD = 0.5
#: a flag (annotator unreliable / ok, item confident) needs at least this posterior probability
CONFIDENCE = DEFAULT_POLICY.confidence
#: the label's interval holds this much of its item's probability (``lower_90``, ``upper_90``)
INTERVAL = DEFAULT_POLICY.interval

ANNOTATOR_FLAGS = ("unreliable", "ok", "undetermined")
#: a fit that takes more than this share of the ratings as spam says so (``SpamWarning``)
SPAM_WARNING_SHARE = 0.5
#: a fit with more than this share of its items undetermined says so (``UndeterminedWarning``)
UNDETERMINED_WARNING_SHARE = 0.1
__all__ = ["ITEM_FLAGS"]

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


def level_columns(values: Sequence[float], names: Sequence[str] | None = None) -> list[str]:
    """Names of the level-probability columns, ``p_level_<value>`` (e.g. ``p_level_2``), or
    ``p_level_<name>`` for a scale of named levels (``names``, e.g. ``p_level_G``)."""
    if names is not None:
        return [f"p_level_{n}" for n in names]
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
def continuous_posterior(
    mean: np.ndarray,
    sd: np.ndarray,
    hyperparams: dict,
    difficulty: np.ndarray,
    truth_share: float,
) -> LabelPosterior:
    """The continuous model's posterior as a ``LabelPosterior`` (the paper's model, and the
    Dask engine): q(z_m) = N(mean, sd^2) over the scale's threshold intervals, its expected
    gain (``expected_gain``) and its own estimate (the posterior mean of z, as the paper
    reports it). ``difficulty`` (M,): each item's category's E[delta]."""
    thresholds = np.asarray(hyperparams["thresholds"], dtype=float)
    values = np.asarray(hyperparams["scale"], dtype=float)
    rho = float(hyperparams["alpha"]) / float(hyperparams["beta"]) * difficulty
    names = hyperparams.get("levels")
    return LabelPosterior(
        level_probabilities(mean, sd, thresholds),
        values,
        expected_gain(mean, sd, thresholds, rho, truth_share),
        "continuous",
        estimate=np.asarray(mean, dtype=float),
        sd=np.asarray(sd, dtype=float),
        names=None if names is None else tuple(names),
    )


def continuous_labels(model) -> LabelResult:
    """The continuous posterior of a fitted model as its ``label_result_`` (the paper's model,
    and the Dask engine): from ``items_``' q(z) (``z_mean``, ``z_sd``), each item's
    category's difficulty, ``hyperparams_`` and the share of ratings taken as honest."""
    items = model.items_
    difficulty = model.categories_["difficulty"].reindex(items["category"].astype(object))
    if difficulty.isna().any():
        missing = items["category"][difficulty.isna().to_numpy()].iloc[0]
        raise InputError(f"category {missing!r} of the items is not in the categories table")
    post = continuous_posterior(
        items["z_mean"].to_numpy(dtype=float),
        items["z_sd"].to_numpy(dtype=float),
        model.hyperparams_,
        difficulty.to_numpy(dtype=float),
        truth_share(model),
    )
    return LabelResult(post, None, None, False, DEFAULT_POLICY)


def item_columns(
    post: LabelPosterior,
    index: pd.Index,
    policy: LabelPolicy = DEFAULT_POLICY,
    truth_weight: np.ndarray | None = None,
) -> pd.DataFrame:
    """The decision columns of items.csv, all read from the one posterior ``post``.

    Returns a frame indexed by ``index`` with ``label`` (the most probable level, as the
    scale writes it), ``p_wrong``, ``p_level_<v>`` for each level, ``lower_<pct>`` and
    ``upper_<pct>`` (the label's interval, levels), ``truth_weight`` (the continuous fit's sum
    of omega over the item's ratings; NaN when not given), ``expected_gain`` and ``flag``
    (``posterior.ITEM_FLAGS``). A scale of named levels writes the names (``label`` G,
    ``p_level_G``)."""
    cols = post.read(policy)
    levels = level_labels(post.values, post.names)
    lo_col, hi_col = interval_columns(policy.interval)
    out = {"label": levels[cols["label"]], "p_wrong": cols["p_wrong"]}
    out.update(zip(level_columns(post.values, post.names), post.proba.T, strict=True))
    out[lo_col] = levels[cols["lower"]]
    out[hi_col] = levels[cols["upper"]]
    out["truth_weight"] = np.nan if truth_weight is None else np.asarray(truth_weight, float)
    out["expected_gain"] = cols["expected_gain"]
    out["flag"] = cols["flag"]
    return pd.DataFrame(out, index=index)  # at once: a 0..100 scale has 101 level columns


def item_decisions(model, *, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """``item_columns`` of a fitted model (join it to ``model.items_``), its label flags at
    ``confidence``."""
    parts = list(iter_item_decisions(model, confidence=confidence))
    return parts[0] if len(parts) == 1 else pd.concat(parts)


#: items per chunk of ``iter_item_decisions`` (the columns of a chunk are built at once)
ITEM_CHUNK = 1 << 18


def truth_share(model) -> float:
    """The share of the ratings a fit attributes to the truth rather than spam: the mean of
    its per-rating omega, or (the Dask engine keeps omega on its workers) the annotators'
    ``spam_share`` weighted by their ratings (``annotators_truth_share``)."""
    omega = getattr(model, "omega_", None)
    if omega is not None:
        return float(np.mean(omega)) if omega.size else 1.0
    return annotators_truth_share(model.annotators_)


def annotators_truth_share(annotators: pd.DataFrame) -> float:
    """``truth_share`` from an annotators table (``n_ratings``, ``spam_share``): a fit folder's
    ``annotators.csv`` or a fit without per-rating omega."""
    total = float(annotators["n_ratings"].sum())
    honest = (annotators["n_ratings"] * (1.0 - annotators["spam_share"])).sum()
    return float(honest / max(total, 1.0))


def iter_item_decisions(
    model, *, confidence: float = CONFIDENCE, chunk: int | None = None
) -> Iterator[pd.DataFrame]:
    """``item_decisions`` of ``model.items_``' rows ``chunk`` (default ``ITEM_CHUNK``) at a
    time, in order (at least one frame, empty when there are no items): what ``ordmix fit``
    writes ``items.csv`` from without holding every item's decision columns at once."""
    chunk = max(int(ITEM_CHUNK if chunk is None else chunk), 1)
    omega = getattr(model, "omega_", None)
    truth_weight = getattr(model, "truth_weight_", None)  # the Dask engine's, from its blocks
    if omega is not None:
        data = model.data_
        # np.bincount's sums, added in the same order, without its intp copy of the codes
        truth_weight = np.zeros(data.n_instances)
        np.add.at(truth_weight, data.inst, omega)
    result = model.label_result_
    confidence = _check_probability("the confidence", confidence, low=0.5)
    policy = replace(result.policy, confidence=confidence)
    post, items = result.posterior, model.items_
    for lo in range(0, max(len(items), 1), chunk):
        rows = slice(lo, lo + chunk)
        yield item_columns(
            post.rows(rows),
            items.index[rows],
            policy,
            None if truth_weight is None else truth_weight[rows],
        )


def reflagged(
    items: pd.DataFrame,
    values: Sequence[float],
    confidence: float,
    names: Sequence[str] | None = None,
) -> pd.DataFrame:
    """An items table read back from ``items.csv`` with its ``flag`` read again from its own
    ``p_level_*`` (``p_level_<name>`` with named levels ``names``) at ``confidence`` (the
    label, its probability and the ties unchanged)."""
    confidence = _check_probability("the confidence", confidence, low=0.5)
    p = items[level_columns(values, names)].to_numpy(dtype=float)
    best, tie = decide(p, DEFAULT_POLICY.tie, values)
    p_best = p[np.arange(len(p)), best]
    out = items.copy()
    out["flag"] = item_flags(tie, p_best, confidence)
    return out


# --------------------------------------------------------------------------- what to do next
def label_warnings(spam_share: float, undetermined_share: float) -> list[FitWarning]:
    """A fit's warnings about its labels: more than ``SPAM_WARNING_SHARE`` of the ratings taken
    as spam, more than ``UNDETERMINED_WARNING_SHARE`` of the items undetermined; each one line
    that says what to do."""
    out = []
    if spam_share > SPAM_WARNING_SHARE:
        out.append(FitWarning(SpamWarning, (
            f"{spam_share:.0%} of the ratings are taken as spam: review the annotators flagged "
            "unreliable (ordmix next --review) and have the items ordmix next lists rated "
            "again (the labels already weigh each annotator by their own confusion)"
        )))  # fmt: skip
    if undetermined_share > UNDETERMINED_WARNING_SHARE:
        out.append(FitWarning(UndeterminedWarning, (
            f"{undetermined_share:.0%} of the items are undetermined (their two most probable "
            "levels tie): collect more ratings for them before shipping their labels (ordmix "
            "next ranks them)"
        )))  # fmt: skip
    return out


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


def disputed_gold(items: pd.DataFrame, step: float) -> pd.Series:
    """(M,) bool, by item: the gold items whose own ratings put them more than ``step`` (a
    level) from their gold (``crowd_estimate`` against ``estimate``, which is the gold); all
    False in a fit without gold. A honeypot the crowd disputes is one to check: its gold may
    be wrong, or the crowd may share a misreading the gold corrects."""
    if "crowd_estimate" not in items:
        return pd.Series(False, index=items.index)
    return (items["crowd_estimate"] - items["estimate"]).abs() > step


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
