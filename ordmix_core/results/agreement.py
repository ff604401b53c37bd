"""Inter-annotator agreement: Krippendorff's alpha with the ordinal distance, for the whole
crowd (with a bootstrap interval over items) and for each annotator against the others.

The crowd's alpha (Krippendorff, "Computing Krippendorff's alpha-reliability", 2011) is
``1 - D_o / D_e`` over the items rated at least twice ("pairable"): with ``n_uc`` the ratings
of item u at level c and ``m_u`` its ratings, the coincidences are
``o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1)``, the level totals ``n_c = sum_k o_ck``
and ``n = sum_c n_c``; the ordinal distance is
``d_ck = (sum_{g between c and k} n_g - (n_c + n_k) / 2)^2``; ``D_o = sum o_ck d_ck / n`` and
``D_e = sum n_c n_k d_ck / (n (n - 1))``. 1 is perfect agreement, 0 what chance gives.
The ``krippendorff`` package computes the same figure (``tests/results/test_agreement.py``
checks both against a hand computation); here the coincidences are summed over the items'
distinct rating patterns, so the figure and its bootstrap take a few passes over the ratings
whatever their number, with the same bits on any machine (sums in a fixed order, no BLAS).

An annotator's ``agreement`` is the same alpha with their ratings as the observed values:
``1 - D_o(a) / D_e``, where ``D_o(a)`` is the mean, over their ratings of items that other
annotators rated too, of the mean ordinal distance between that rating and the other
annotators' ratings of the item, and ``D_e`` is the crowd's. Without repeated (annotator,
item) pairs the crowd's alpha is the mean of the annotators' agreements weighted by those
ratings. Empty (NaN) for an annotator no one else shares an item with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data.coding import id_array
from ..data.crowd import CrowdData
from ..numerics.fixed_order import last_sum

#: bootstrap draws of the crowd's alpha (items resampled with replacement) and their seed
DRAWS = 200
SEED = 0
#: the central share of the bootstrap draws reported as the interval
INTERVAL = 0.95
#: ratings taken at a time by an annotator's agreement (its memory: a few arrays this long)
CHUNK = 1 << 20


@dataclass(frozen=True)
class CrowdAgreement:
    """The crowd's ordinal alpha, its bootstrap interval and what it was computed on."""

    alpha: float
    lower: float
    upper: float
    items: int  # items rated at least twice (the others carry no agreement)
    ratings: int  # their ratings
    draws: int = DRAWS
    interval: float = INTERVAL

    def as_dict(self) -> dict:
        """``summary.json``'s ``agreement``."""
        return {
            "measure": "Krippendorff's alpha, ordinal distance",
            "alpha": _number(self.alpha),
            "lower": _number(self.lower),
            "upper": _number(self.upper),
            "interval": self.interval,
            "bootstrap_draws": self.draws,
            "seed": SEED,
            "items": self.items,
            "ratings": self.ratings,
        }

    def words(self) -> str:
        """One line for people (``words``)."""
        return words(self.as_dict())


def words(agreement: dict) -> str:
    """The crowd's agreement in one line for people, from ``CrowdAgreement.as_dict`` (or
    summary.json's ``agreement``): the figure, its interval and its base."""
    what = "agreement between annotators (Krippendorff's alpha, ordinal)"
    if agreement.get("alpha") is None:
        return f"{what}: not defined here (no item rated twice, or one level only)"
    span = ""
    if agreement.get("lower") is not None:
        span = (
            f" ({agreement['interval']:.0%} bootstrap interval {agreement['lower']:.3f} to "
            f"{agreement['upper']:.3f})"
        )
    return (
        f"{what}: {agreement['alpha']:.3f}{span}, over {agreement['items']:,} items rated at "
        "least twice (1: perfect, 0: what chance gives)"
    )


def _number(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def level_counts(data: CrowdData) -> np.ndarray:
    """(M, K) ratings of each item at each level."""
    k = data.scale.k
    cell = np.multiply(data.inst, k, dtype=np.int64)
    cell += data.level
    return np.bincount(cell, minlength=data.n_instances * k).reshape(data.n_instances, k)


def coincidences(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(K, K) coincidence matrix of items with level counts ``counts`` (U, K), each item
    counted ``weights`` (U,) times (default once); items rated fewer than twice add nothing."""
    patterns = _Patterns.of(counts)
    w = patterns.freq if weights is None else patterns.weigh(weights)
    return patterns.coincidences(w)


def alpha_of(o: np.ndarray) -> float:
    """Krippendorff's ordinal alpha from a (K, K) coincidence matrix; NaN when undefined
    (fewer than two pairable values, or one level only)."""
    n_c = last_sum(o)
    d = ordinal_distance(n_c)
    n = float(last_sum(n_c[None, :])[0])
    expected = float(last_sum((n_c[:, None] * n_c[None, :] * d).reshape(1, -1))[0])
    if n < 2 or expected <= 0:
        return float("nan")
    observed = float(last_sum((o * d).reshape(1, -1))[0])
    return 1.0 - (n - 1.0) * observed / expected


def ordinal_distance(n_c: np.ndarray) -> np.ndarray:
    """(K, K) Krippendorff's ordinal distance from the level totals ``n_c`` (K,)."""
    cum = np.concatenate([[0.0], np.cumsum(n_c)])
    lo = np.minimum.outer(np.arange(n_c.size), np.arange(n_c.size))
    hi = np.maximum.outer(np.arange(n_c.size), np.arange(n_c.size))
    between = cum[hi + 1] - cum[lo]
    return (between - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2


def crowd_agreement(
    data: CrowdData, draws: int = DRAWS, seed: int = SEED, interval: float = INTERVAL
) -> CrowdAgreement:
    """The crowd's ordinal alpha and its bootstrap interval: the items rated at least twice
    resampled with replacement ``draws`` times (a fixed ``seed``: the same interval every
    time), the central ``interval`` of the draws' alphas."""
    return patterns_agreement(_Patterns.of(level_counts(data)), draws, seed, interval)


def rating_patterns(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct level counts (P, K) of the items rated at least twice among ``counts``
    (U, K), in increasing order, and how many items have each (P,): all the crowd's alpha
    needs, so that parts of the items (a Dask engine's blocks) send these and
    ``merged_patterns`` adds them."""
    p = _Patterns.of(counts)
    return p.counts, p.freq


def merged_patterns(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> _Patterns:
    """The patterns of the items of every part (``rating_patterns`` of each, K levels): the
    same as those of all the items at once."""
    rows = np.concatenate([np.asarray(c, np.int64).reshape(-1, k) for c, _ in parts])
    freq = np.concatenate([np.asarray(f, np.int64) for _, f in parts])
    uniq, inverse, _ = _unique_rows(rows)
    return _Patterns.of_distinct(uniq, np.bincount(inverse, weights=freq).astype(np.int64))


def patterns_agreement(
    patterns: _Patterns, draws: int = DRAWS, seed: int = SEED, interval: float = INTERVAL
) -> CrowdAgreement:
    """``crowd_agreement`` from the items' rating patterns."""
    alpha = alpha_of(patterns.coincidences(patterns.freq))
    n_items = int(patterns.freq.sum())
    lower = upper = float("nan")
    if n_items >= 2 and np.isfinite(alpha) and draws > 0:
        rng = np.random.default_rng(seed)
        p = patterns.freq / n_items
        boot = np.array(
            [alpha_of(patterns.coincidences(rng.multinomial(n_items, p))) for _ in range(draws)]
        )
        boot = boot[np.isfinite(boot)]
        if boot.size:
            tail = (1.0 - interval) / 2.0
            lower, upper = (float(x) for x in np.quantile(boot, [tail, 1.0 - tail]))
    ratings = int((patterns.freq * patterns.m).sum())
    return CrowdAgreement(alpha, lower, upper, n_items, ratings, draws, interval)


def annotator_agreement(data: CrowdData) -> pd.Series:
    """Each annotator's ``agreement`` (see the module), a Series by annotator in the order of
    ``data.annotators``, NaN for one whose items no other annotator rated. The ratings are
    taken ``CHUNK`` at a time, so that the per-rating work costs a chunk's memory."""
    counts = level_counts(data)
    d, expected = expected_disagreement(_Patterns.of(counts))
    total, used = agreement_sums(data.inst, data.ann, data.level, counts, data.n_annotators, d)
    return pd.Series(
        agreement_from_sums(total, used, expected),
        index=pd.Index(id_array(data.annotators), name="annotator"),
        name="agreement",
    )


def expected_disagreement(patterns: _Patterns) -> tuple[np.ndarray, float]:
    """The ordinal distance (K, K) of the crowd's level totals and its expected disagreement
    ``D_e`` between two ratings (0 with fewer than two pairable ratings)."""
    n_c = last_sum(patterns.coincidences(None))
    d = ordinal_distance(n_c)
    n = float(last_sum(n_c[None, :])[0])
    pairs = float(last_sum((n_c[:, None] * n_c[None, :] * d).reshape(1, -1))[0])
    return d, pairs / (n * (n - 1.0)) if n > 1 else 0.0


def agreement_sums(
    inst: np.ndarray,
    ann: np.ndarray,
    level: np.ndarray,
    counts: np.ndarray,
    n_annotators: int,
    d: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per annotator (N,), over their ratings (R,: item ``inst``, annotator ``ann``, level
    index ``level``) of items others rated too: the summed mean ordinal distance ``d`` (K, K)
    to the other annotators' ratings of the item, and how many such ratings. ``counts``
    (M, K): every rating of each item at each level, so the items must come with all their
    ratings (a whole fit's, or a Dask block's). Sums that add over parts of the items."""
    own_rows, own_dist, own_n = _own_pairs(ann, inst, level, counts.shape[0], d)
    to_levels = _to_levels(counts, d)  # (M, K) an item's summed distance to each level
    m_item = counts.sum(axis=1).astype(float)
    total = np.zeros(n_annotators)
    used = np.zeros(n_annotators)
    for lo in range(0, inst.size, CHUNK):
        hi = min(lo + CHUNK, inst.size)
        i, a = inst[lo:hi], ann[lo:hi]
        # each rating's summed distance to every rating of its item, less its own rater's
        dist = to_levels[i, level[lo:hi]]
        others = m_item[i] - 1.0
        mine = slice(*np.searchsorted(own_rows, [lo, hi]))
        dist[own_rows[mine] - lo] -= own_dist[mine]
        others[own_rows[mine] - lo] -= own_n[mine]
        use = others > 0
        per = np.where(use, dist / np.where(use, others, 1.0), 0.0)
        total += np.bincount(a, weights=per, minlength=n_annotators)
        used += np.bincount(a, weights=use.astype(float), minlength=n_annotators)
    return total, used


def agreement_from_sums(total: np.ndarray, used: np.ndarray, expected: float) -> np.ndarray:
    """Each annotator's agreement (N,) from ``agreement_sums``'s (N,) sums and the crowd's
    expected disagreement; NaN where no rating was shared."""
    with np.errstate(invalid="ignore", divide="ignore"):
        value = 1.0 - (total / used) / expected if expected > 0 else np.full(used.size, np.nan)
    return np.where(used > 0, value, np.nan)


def _own_pairs(
    ann: np.ndarray, inst: np.ndarray, level: np.ndarray, n_instances: int, d: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ratings (R,) whose annotator rated their item more than once (repeated pairs;
    ascending), and for each the summed distance to, and the number of, the other ratings of
    its item by the same annotator. Found by one sort of the (annotator, item) keys, in place,
    then a chunked lookup of the few repeated keys: no per-rating grouping, and one (R,)
    array of keys at a time."""

    def keys(rows: slice | np.ndarray) -> np.ndarray:
        key = np.multiply(ann[rows], n_instances, dtype=np.int64)
        key += inst[rows]
        return key

    ordered = keys(slice(None))
    ordered.sort()
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if repeated.size == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    hits = []
    for lo in range(0, ann.size, CHUNK):
        part = keys(slice(lo, lo + CHUNK))
        at = np.minimum(np.searchsorted(repeated, part), repeated.size - 1)
        hits.append(np.flatnonzero(repeated[at] == part) + lo)
    rows = np.concatenate(hits)
    _, group, size = np.unique(keys(rows), return_inverse=True, return_counts=True)
    group, lev = group.ravel(), level[rows]
    k = d.shape[0]
    counts = np.bincount(group * k + lev, minlength=size.size * k).reshape(-1, k)
    return rows, _to_levels(counts, d)[group, lev], (size - 1)[group].astype(float)


def _to_levels(counts: np.ndarray, d: np.ndarray) -> np.ndarray:
    """(U, K): for each row of level counts (U, K) and level c, the summed distance
    ``sum_k counts[u, k] d[k, c]``, the columns added in a fixed order (the same bits on any
    machine: no BLAS), ``CHUNK`` rows at a time (each term's products a chunk's memory)."""
    out = np.zeros(counts.shape, dtype=float)
    for lo in range(0, counts.shape[0], CHUNK):
        rows = slice(lo, lo + CHUNK)
        for k in range(counts.shape[1]):
            out[rows] += counts[rows, k : k + 1] * d[k][None, :]
    return out


@dataclass(frozen=True)
class _Patterns:
    """The distinct level counts (P, K) of the items rated at least twice, how many items
    have each (``freq``), their ratings (``m``) and each item's pattern (``of_item``, -1 for
    an item rated fewer than twice); and each pattern's coincidences as sparse triples."""

    counts: np.ndarray
    freq: np.ndarray
    m: np.ndarray
    of_item: np.ndarray
    cell: np.ndarray  # (T,) c * K + k of each triple
    pattern: np.ndarray  # (T,) its pattern
    value: np.ndarray  # (T,) its coincidence (n_c n_k - [c = k] n_c) / (m - 1)

    @classmethod
    def of(cls, counts: np.ndarray) -> _Patterns:
        counts = np.asarray(counts, dtype=np.int64)
        m_item = counts.sum(axis=1)
        pairable = m_item >= 2
        uniq, inverse, freq = _unique_rows(counts[pairable])
        of_item = np.full(counts.shape[0], -1, dtype=np.int64)
        of_item[pairable] = inverse
        return cls._build(uniq, freq, of_item)

    @classmethod
    def of_distinct(cls, uniq: np.ndarray, freq: np.ndarray) -> _Patterns:
        """The patterns from their distinct rows (P, K) and counts (P,) (no items' map)."""
        return cls._build(uniq, freq, np.zeros(0, dtype=np.int64))

    @classmethod
    def _build(cls, uniq: np.ndarray, freq: np.ndarray, of_item: np.ndarray) -> _Patterns:
        k = uniq.shape[1]
        m = uniq.sum(axis=1)
        p_of, lev = np.nonzero(uniq)  # sorted by pattern, then level
        size = np.bincount(p_of, minlength=len(uniq))
        start = np.concatenate([[0], np.cumsum(size)[:-1]])
        reps = size[p_of]  # each nonzero entry pairs with every nonzero entry of its pattern
        first = np.repeat(np.arange(p_of.size), reps)
        offset = np.arange(first.size) - np.repeat(np.cumsum(reps) - reps, reps)
        second = start[p_of[first]] + offset
        pat, c, kk = p_of[first], lev[first], lev[second]
        n_c, n_k = uniq[pat, c], uniq[pat, kk]
        value = (n_c * n_k - np.where(c == kk, n_c, 0)) / (m[pat] - 1.0)
        return cls(uniq, freq, m, of_item, c * k + kk, pat, value)

    def weigh(self, weights: np.ndarray) -> np.ndarray:
        """(P,) the items' ``weights`` (U,) summed per pattern."""
        keep = self.of_item >= 0
        return np.bincount(
            self.of_item[keep], weights=np.asarray(weights, float)[keep], minlength=len(self.freq)
        )

    def coincidences(self, per_pattern: np.ndarray | None) -> np.ndarray:
        """(K, K) coincidences with each pattern counted ``per_pattern`` (P,) times (None:
        as often as the items have it)."""
        k = self.counts.shape[1]
        w = self.freq if per_pattern is None else np.asarray(per_pattern, dtype=float)
        flat = np.bincount(self.cell, weights=w[self.pattern] * self.value, minlength=k * k)
        return flat.reshape(k, k)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows (P, K) of ``rows`` (U, K) non-negative ints, each row's index among them,
    and how many rows each has: one integer key per row when the counts allow it."""
    if rows.shape[0] == 0:
        return rows.reshape(0, rows.shape[1]), np.zeros(0, np.int64), np.zeros(0, np.int64)
    base = int(rows.max()) + 1
    if base ** rows.shape[1] < 2**62:
        key = np.zeros(rows.shape[0], dtype=np.int64)
        for col in range(rows.shape[1]):
            key = key * base + rows[:, col]
        _, first, inverse, freq = np.unique(
            key, return_index=True, return_inverse=True, return_counts=True
        )
        return rows[first], inverse.ravel(), freq
    uniq, inverse, freq = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return uniq, inverse.ravel(), freq
