"""Evaluation against gold: MSE, Pearson correlation, tie-aware NDCG (docs/model.md, "Metrics"),
the label error rate (the metric of the published Web anchors), and the calibration of the
level probabilities (expected calibration error, log loss of the gold level).

The array functions take aligned ``(G,)`` arrays over the gold items; :func:`evaluate` aligns
estimates, gold and queries by instance ID and calls them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError
from ..numerics import libm


def mse(est: np.ndarray, truth: np.ndarray) -> float:
    """Mean squared error ``mean((truth - est)^2)`` over ``(G,)`` arrays."""
    est, truth = _pair(est, truth)
    return float(np.mean((truth - est) ** 2))


def pearson(est: np.ndarray, truth: np.ndarray) -> float:
    """Pearson correlation of ``(G,)`` arrays; NaN if either is constant or ``G < 2``."""
    est, truth = _pair(est, truth)
    if est.size < 2:
        return float("nan")
    de, dt = est - est.mean(), truth - truth.mean()
    denom = np.sqrt(np.sum(de * de) * np.sum(dt * dt))
    if denom == 0:
        return float("nan")
    return float(np.sum(de * dt) / denom)


def ndcg(est: np.ndarray, truth: np.ndarray, query: np.ndarray | None = None) -> float:
    """Mean NDCG over queries, tie-aware, no cutoff.

    ``est``, ``truth``, ``query``: ``(G,)``; ``query=None`` means one query. Per query the items
    are ranked by descending ``est``; gain ``2^truth - 1``, discount ``1/log2(rank + 1)``, and
    items with equal estimates share the mean discount of the ranks they occupy. Neighbours in
    the ranking closer than ``1e-14 * max(1, max|est|)`` (a few units of float rounding) count
    as equal, so arithmetic noise cannot split a tie while real differences still rank.
    Queries whose ideal DCG is 0 are left out of the mean; NaN if no query remains.
    """
    est, truth = _pair(est, truth)
    g = est.size
    if g == 0:
        return float("nan")
    if query is None:
        qcode = np.zeros(g, dtype=np.int64)
    else:
        query = np.asarray(query)
        if query.shape != est.shape:
            raise InputError(f"query has shape {query.shape} but the estimates {est.shape}")
        qcode = pd.factorize(query)[0].astype(np.int64)
    nq = int(qcode.max()) + 1
    gain = libm.power(2.0, truth) - 1.0
    if not np.all(np.isfinite(est)):
        raise InputError("estimates contain NaN or infinite values; refit the method")
    tie_tol = 1e-14 * max(1.0, float(np.max(np.abs(est))))

    # rank within query: position in (query, -est) order minus the query's start
    order = np.lexsort((-est, qcode))
    q_sorted, e_sorted = qcode[order], est[order]
    start = np.searchsorted(q_sorted, np.arange(nq))
    rank = np.arange(g) - start[q_sorted] + 1  # 1-based
    disc = 1.0 / libm.log2(rank + 1.0)
    # tie groups: runs of equal (query, est) in sorted order share their mean discount
    new = np.ones(g, dtype=bool)
    new[1:] = (q_sorted[1:] != q_sorted[:-1]) | (e_sorted[:-1] - e_sorted[1:] > tie_tol)
    grp = np.cumsum(new) - 1
    shared = np.bincount(grp, weights=disc) / np.bincount(grp)
    dcg = np.bincount(q_sorted, weights=gain[order] * shared[grp], minlength=nq)

    # ideal DCG: the same discounts, gains sorted descending within each query
    ideal_order = np.lexsort((-gain, qcode))
    idcg = np.bincount(qcode[ideal_order], weights=gain[ideal_order] * disc, minlength=nq)
    ok = idcg > 0
    if not ok.any():
        return float("nan")
    return float(np.mean(dcg[ok] / idcg[ok]))


def nearest_level(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Each value of ``x`` (G,) rounded to the nearest of the scale's ``levels`` (K,), ties to
    the lower level."""
    lv = np.sort(np.asarray(levels, dtype=float))
    x = np.asarray(x, dtype=float)
    i = np.clip(np.searchsorted(lv, x), 1, max(lv.size - 1, 1))
    lo = lv[i - 1]
    hi = lv[np.minimum(i, lv.size - 1)]
    return np.where(np.abs(x - lo) <= np.abs(hi - x), lo, hi)


def label_error(est: np.ndarray, truth: np.ndarray, levels: np.ndarray) -> float:
    """Share of gold items whose estimate rounded to the nearest level differs from the gold
    level (the truth rounded the same way); ``(G,)`` arrays, ``levels`` (K,)."""
    est, truth = _pair(est, truth)
    if est.size == 0:
        return float("nan")
    return float(np.mean(nearest_level(est, levels) != nearest_level(truth, levels)))


#: equal-width confidence bins of the expected calibration error
ECE_BINS = 10
#: a probability of the gold level below this counts as this in the log loss (log 0 is -inf)
LOG_LOSS_FLOOR = 1e-12


def calibration_error(proba: np.ndarray, truth_level: np.ndarray, bins: int = ECE_BINS) -> float:
    """Expected calibration error of the label's probability.

    ``proba`` (G, K) level probabilities, ``truth_level`` (G,) the gold level's index. The
    label is the most probable level and its probability the confidence; items are put in
    ``bins`` equal-width confidence bins, and the error is the item-weighted mean over bins of
    |accuracy - mean confidence|. 0 when the confidences are what the accuracy bears out.
    """
    proba = np.asarray(proba, dtype=float)
    truth_level = np.asarray(truth_level)
    if len(proba) == 0:
        return float("nan")
    conf = proba.max(axis=1)
    hit = proba.argmax(axis=1) == truth_level
    b = np.minimum((conf * bins).astype(int), bins - 1)
    n = np.bincount(b, minlength=bins)
    gap = np.abs(np.bincount(b, hit, bins) - np.bincount(b, conf, bins))
    return float(gap.sum() / n.sum())


def p_wrong_auroc(proba: np.ndarray, truth_level: np.ndarray) -> float:
    """How well ``p_wrong`` ranks the wrong labels first: the area under the ROC curve of
    ``1 - max(proba)`` for telling the wrong labels (the most probable level is not the gold
    one) from the right ones; 0.5 is chance, ties count half. ``proba`` (G, K),
    ``truth_level`` (G,). NaN when every label is right or every one is wrong."""
    proba = np.asarray(proba, dtype=float)
    if len(proba) == 0:
        return float("nan")
    wrong = proba.argmax(axis=1) != np.asarray(truth_level)
    n_wrong, n_right = int(wrong.sum()), int((~wrong).sum())
    if n_wrong == 0 or n_right == 0:
        return float("nan")
    from scipy.stats import rankdata  # here: scipy.stats adds a second to every command's start

    ranks = rankdata(1.0 - proba.max(axis=1))  # average ranks: ties count half
    return float((ranks[wrong].sum() - n_wrong * (n_wrong + 1) / 2) / (n_wrong * n_right))


def log_loss(proba: np.ndarray, truth_level: np.ndarray) -> float:
    """Mean negative log probability of the gold level, ``proba`` (G, K), ``truth_level`` (G,)
    (floored at ``LOG_LOSS_FLOOR``)."""
    proba = np.asarray(proba, dtype=float)
    if len(proba) == 0:
        return float("nan")
    p = proba[np.arange(len(proba)), np.asarray(truth_level)]
    return float(-np.mean(libm.log(np.maximum(p, LOG_LOSS_FLOOR))))


def evaluate(
    estimates: pd.Series,
    gold: pd.Series | pd.DataFrame,
    queries: pd.Series | None = None,
    levels: np.ndarray | None = None,
    proba: pd.DataFrame | None = None,
    labels: pd.Series | None = None,
) -> dict[str, float | int]:
    """MSE, correlation and NDCG on the instances that have both an estimate and gold.

    ``estimates``: Series indexed by instance ID. ``gold``: Series of truth indexed by instance ID
    (or a DataFrame with columns ``instance, truth``). ``queries``: Series instance ID -> query ID,
    or None to treat all gold items as one query. ``levels``: the scale's values, for the
    label error. ``proba``: the method's level probabilities (index instance ID, one column per
    level of ``levels``, in order), where it has them: the label is then their most probable
    level (ties: the lower), and they are scored too. ``labels``: the labels the method ships
    (Series by instance ID, values on the scale), when they are not simply ``proba``'s most
    probable level (a vote's tie rule, say). Returns ``{"mse", "correlation", "ndcg",
    "n_gold"}``, plus ``"label_error"`` when ``levels`` are given (of ``labels``, else of
    ``proba``'s labels, else of the estimate rounded to the nearest level), plus
    ``"calibration_error"``, ``"p_wrong_auroc"`` and ``"log_loss"`` (``calibration_error``,
    ``p_wrong_auroc``, ``log_loss``; NaN without ``proba``). Raises InputError.
    """
    est = _as_series(estimates, "estimates")
    truth = _gold_series(gold).dropna()
    common = est.index.intersection(truth.index, sort=False)
    if len(common) == 0:
        raise InputError(
            "no instance has both an estimate and gold; check that the gold file's instance IDs "
            "are the ones in the ratings (IDs are compared as strings)"
        )
    e = est.loc[common].to_numpy(dtype=float)
    t = truth.loc[common].to_numpy(dtype=float)
    if not np.all(np.isfinite(e)):
        raise InputError("some estimates on gold items are NaN or infinite; refit the method")
    q = None
    if queries is not None:
        qs = _as_series(queries, "queries")
        missing = common.difference(qs.index)
        if len(missing):
            raise InputError(
                f"{len(missing)} gold item(s) have no query (e.g. {missing[0]!r}); give a query "
                "for every rated instance, or pass queries=None to treat all as one query"
            )
        q = qs.loc[common].astype(str).to_numpy()
    out = {"mse": mse(e, t), "correlation": pearson(e, t), "ndcg": ndcg(e, t, q)}
    if levels is not None:
        out.update(_label_scores(e, t, np.asarray(levels, dtype=float), proba, common))
        if labels is not None:
            shipped = _as_series(labels, "labels").reindex(common).to_numpy(dtype=float)
            out["label_error"] = label_error(shipped, t, np.sort(np.asarray(levels, float)))
    out["n_gold"] = len(common)
    return out


def _label_scores(
    e: np.ndarray, t: np.ndarray, levels: np.ndarray, proba: pd.DataFrame | None, common
) -> dict[str, float]:
    """Label error, calibration error and log loss on the gold items ``common``."""
    lv = np.sort(levels)
    if proba is None:
        nan = float("nan")
        return {
            "label_error": label_error(e, t, lv),
            "calibration_error": nan,
            "p_wrong_auroc": nan,
            "log_loss": nan,
        }
    p = proba.reindex(common).to_numpy(dtype=float)
    if p.shape[1] != lv.size or not np.isfinite(p).all():
        raise InputError("the level probabilities must have one column per level of the scale")
    gold_level = np.searchsorted(lv, nearest_level(t, lv))
    return {
        "label_error": float(np.mean(p.argmax(axis=1) != gold_level)),
        "calibration_error": calibration_error(p, gold_level),
        "p_wrong_auroc": p_wrong_auroc(p, gold_level),
        "log_loss": log_loss(p, gold_level),
    }


def _pair(est: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    est = np.asarray(est, dtype=float).ravel()
    truth = np.asarray(truth, dtype=float).ravel()
    if est.shape != truth.shape:
        raise InputError(f"estimates have {est.size} values but the truth {truth.size}")
    return est, truth


def _as_series(s: pd.Series, what: str) -> pd.Series:
    if not isinstance(s, pd.Series):
        raise InputError(f"{what} must be a pandas Series indexed by instance ID")
    s = s.copy()
    s.index = s.index.astype(str)
    if s.index.has_duplicates:
        dup = s.index[s.index.duplicated()][0]
        raise InputError(f"{what}: instance {dup!r} appears more than once; keep one entry")
    return s


def _gold_series(gold: pd.Series | pd.DataFrame) -> pd.Series:
    if isinstance(gold, pd.DataFrame):
        cols = {str(c).strip().lower(): c for c in gold.columns}
        if "instance" not in cols or "truth" not in cols:
            raise InputError(
                f"gold needs columns instance, truth (found: {', '.join(map(str, gold.columns))})",
                source="gold",
            )
        gold = pd.Series(
            gold[cols["truth"]].to_numpy(), index=gold[cols["instance"]].astype(str).to_numpy()
        )
    s = _as_series(gold, "gold")
    num = pd.to_numeric(s, errors="coerce")
    bad = num.isna() & s.notna()
    if bad.any():
        raise InputError(
            f"gold for instance {s.index[bad.to_numpy()][0]!r} is {s[bad].iloc[0]!r}, not a "
            "number; gold truth values must be numbers on the rating scale"
        )
    return num.astype(float)
