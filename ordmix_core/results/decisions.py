"""Decisions from a fit: per-item labels and level probabilities, what to rate next.

A fitted :class:`~ordmix_core.estimators.ordinal_mixture.OrdinalMixture` gives point
estimates; a manager needs to know which of them the ratings actually settle. Everything here is a
pure function of the fit (arrays or frames in, arrays or frames out); no fitting, no I/O.

Annotators: ``reliability`` (their flags from the evidence of their own ratings).

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

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from ..data.scale import level_labels
from ..errors import InputError
from . import label_rules

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

ANNOTATOR_FLAGS = ("unreliable", "ok", "undetermined")
ITEM_FLAGS = ("confident", "uncertain", "undetermined")

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
    ``hyperparams_`` or summary.json's; with ``levels``, names: ``label`` G, ``p_level_G``).
    ``truth_share``: share of all ratings as truth. ``truth_weight``: (M,) omega per item.

    Returns a frame indexed like ``items`` with columns ``label`` (scale value of the most
    probable level, for every item; ``flag`` says whether to trust it), ``p_wrong`` (1 - the
    most probable level's probability), ``p_level_<v>`` for each level v, ``lower_<pct>``,
    ``upper_<pct>`` (the central ``interval`` credible interval, clipped to the scale's
    outer thresholds), ``rating_info``, ``truth_weight`` (NaN if not given),
    ``expected_gain`` and ``flag``: ``undetermined`` when ``rating_info < min_info``, else
    ``confident`` when the label's probability is at least ``confidence``, else
    ``uncertain``.

    ``level_proba`` (M, K): the items' level probabilities from a label model, the ordinal
    confusion model's or the continuous posterior's levels as the label choice took them
    (``OrdinalMixture.level_proba_``, or ``items.csv``'s ``p_level_*`` of such a fit). When
    given, they are the ``p_level_*`` columns, the label is their most probable level (the
    decision that minimises the expected label error), ``lower``/``upper`` the narrowest run
    of adjacent levels around the label holding ``interval`` of them, and an item whose two
    most probable levels are within ``TIE`` is ``undetermined`` (the ratings do not decide
    its label). An item with a ``clear_majority`` (a column of ``items``: the level that
    trusted raters agree on, see ``level_fit.fit_levels``) has that level as its label.
    Otherwise all come from the continuous posterior N(estimate, sd^2).
    """
    interval = _check_probability("the credible interval", interval)
    confidence = _check_probability("the confidence", confidence, low=0.5)
    min_info = _check_probability("min_info", min_info)
    thresholds = np.asarray(hyperparams["thresholds"], dtype=float)
    values = np.asarray(hyperparams["scale"], dtype=float)
    names = hyperparams.get("levels")
    lam = float(hyperparams["lambda"])
    mean = items["estimate"].to_numpy(dtype=float)
    sd = items["sd"].to_numpy(dtype=float)

    info = rating_info(sd, lam)
    clear = items.get("clear_majority")
    probs, best, tie, lower, upper = _labels(
        mean, sd, thresholds, values, level_proba, clear, interval, names
    )
    undetermined = (info < min_info) | tie
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
    label = level_labels(values, names)[best]
    out = pd.DataFrame({"label": label, "p_wrong": 1.0 - p_best}, index=items.index)
    for col, p in zip(level_columns(values, names), probs.T, strict=True):
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


def _labels(
    mean: np.ndarray,
    sd: np.ndarray,
    thresholds: np.ndarray,
    values: np.ndarray,
    level_proba: np.ndarray | None,
    clear: pd.Series | None,
    interval: float,
    names: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each item's level probabilities (M, K), label (level index), tie (bool), and the
    label's interval (lower, upper on the scale): from ``level_proba`` when given (a clear
    majority, ``clear``'s levels where given, decides the label and is no tie; the interval's ends
    are levels, as ``level_labels`` gives them), else from the continuous posterior
    N(mean, sd^2) (no ties; the interval's ends are values on the scale, or with named
    levels ``names`` the names of the levels whose intervals hold them)."""
    if level_proba is None:
        probs = level_probabilities(mean, sd, thresholds)
        lower, upper = credible_interval(mean, sd, interval, thresholds[0], thresholds[-1])
        if names is not None:
            inner = thresholds[1:-1]
            lower, upper = (
                level_labels(values, names)[np.searchsorted(inner, end, side="right")]
                for end in (lower, upper)
            )
        return probs, probs.argmax(axis=1), np.zeros(len(mean), dtype=bool), lower, upper
    probs = np.asarray(level_proba, dtype=float)
    best, tie = label_rules.decide(probs, TIE)
    if clear is not None:
        if names is not None:  # a clear majority written as its level's name
            clear = clear.astype(object).map(dict(zip(names, values, strict=True)))
        clear = clear.to_numpy(dtype=float, na_value=np.nan)
        has = np.isfinite(clear)
        best = np.where(has, np.searchsorted(values, np.where(has, clear, values[0])), best)
        tie = tie & ~has
    lo, hi = label_rules.level_interval(probs, best, interval)
    levels = level_labels(values, names)  # written as the labels are (``3``, not ``3.0``)
    return probs, best, tie, levels[lo], levels[hi]


def clear_majority_column(
    clear: np.ndarray, values: np.ndarray, names: Sequence[str] | None = None
) -> pd.array:
    """``items_["clear_majority"]`` from ``label_rules.clear_majority``'s level indices (M,),
    -1 for none: the level as the labels give it (``3``, not ``3.0``; nullable ``Int64``
    when the scale's values are whole numbers; its name with named levels ``names``),
    missing where there is none."""
    levels = level_labels(values, names)[np.maximum(clear, 0)]
    none = np.asarray(clear) < 0
    if levels.dtype.kind == "i":
        return pd.arrays.IntegerArray(levels, none)
    return np.where(none, np.nan, levels)


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
    truth_weight = None
    if omega is not None:
        data = model.data_
        truth_weight = np.bincount(data.inst, weights=omega, minlength=data.n_instances)
    share = truth_share(model)
    items = model.items_
    proba = getattr(model, "level_proba_", None)
    for lo in range(0, max(len(items), 1), chunk):
        rows = slice(lo, lo + chunk)
        yield item_decisions_from_frames(
            items.iloc[rows],
            model.categories_,
            model.hyperparams_,
            share,
            None if truth_weight is None else truth_weight[rows],
            None if proba is None else proba[rows],
            interval=interval,
            confidence=confidence,
            min_info=min_info,
        )


# --------------------------------------------------------------------------- what to do next
def undetermined_reasons(items: pd.DataFrame, min_info: float = MIN_INFO) -> dict[str, int]:
    """How many items are undetermined and why (``items``: the decision columns, ``flag`` and
    ``rating_info``): ``weak``, their ratings carry less than ``min_info`` of what is known
    about them; ``tie``, enough ratings but the two most probable levels within ``TIE``."""
    und = (items["flag"] == "undetermined").to_numpy()
    weak = und & (items["rating_info"].to_numpy(dtype=float) < min_info)
    return {"weak": int(weak.sum()), "tie": int((und & ~weak).sum())}


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
