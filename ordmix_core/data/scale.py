"""The ordinal scale: its levels and thresholds, inferred from the ratings or given, checked.

``Scale`` holds ``v_1 < ... < v_K`` and its thresholds (midpoints, half a step outside the
outer levels: the paper's 0.5 ... 5.5 for 1..5); ``as_scale`` and ``checked_scale`` make one
from the ratings and refuse an inferred scale with outlying values, naming them.

Named levels (``G,P,R,X``, ``low,medium,high``): a scale given as names, lowest first, has
the values 1..K and keeps the names (``Scale.names``); the engine works on the values, and
every label, level column and chart shows the names (``Scale.labels``, ``level_labels``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError

#: an inferred scale is refused when values sit far from the bulk of the ratings: growing
#: from the narrowest run of values that holds half the ratings, a gap to the next value more
#: than ``OUTLIER_GAP_RANGE`` times the run's range and ``OUTLIER_GAP_STEP`` times its mean
#: spacing stops the growth, and what lies beyond is outlying: a stray 55, a "no answer" 99 or
#: a 99999999999999999999 among 1..5. Continuous ratings (sparse tails), Snow et al.'s 0..100
#: and -100..100 ratings (each of the seven files; random subsets of 100) and 0/1/2 pass.
OUTLIER_GAP_RANGE = 5.0

OUTLIER_GAP_STEP = 20.0

#: a scale of more levels than this is *fine* (a slider, 0..100): the label model's classes
#: stop here (``labels.choose``), and the continuous model is fitted in ``Scale.fit_unit``
#: with open ends (``Scale.fit_thresholds``). The paper's priors and tolerances were set, and
#: every shared set measured, on scales of 2 to 11 levels written 1..K: a range of at most 10.
MAX_COARSE_LEVELS = 11

#: a fine scale's outer levels reach this many times its range beyond its ends in the
#: continuous fit: a slider's end holds every answer beyond it (a rater whose truth is below
#: 0 answers 0), and beyond one range a rater's normal mass is nil. Open ends (-inf) break the
#: truncated-normal arithmetic. Simulated 0..100 crowds with half their items at 0: MSE 90
#: with the paper's half step, 37 at a quarter of the range, 33 at one, 32 at three
#: (``docs/results.md``, "Fine scales")
FINE_END_RANGES = 1.0

_ROW = "(counting the header as row 1)"


@dataclass(frozen=True)
class Scale:
    """An ordinal scale ``v_1 < ... < v_K`` and its thresholds ``b_0 < ... < b_K``.

    Inner thresholds sit at the midpoints; the outer ones half a step outside
    (the paper's 0.5 ... 5.5 for 1..5). A one-level scale gets ``v +- 0.5``. ``names``: the
    levels' names, lowest first, for a scale of named levels (:meth:`named`: values 1..K);
    None for a scale of numbers.
    """

    values: np.ndarray
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        v = np.asarray(self.values, dtype=float)
        if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
            raise InputError("the rating scale must be a non-empty list of finite numbers")
        if np.any(np.diff(v) <= 0):
            raise InputError(
                f"the rating scale {fmt_scale(v)} must be strictly increasing without repeats"
            )
        object.__setattr__(self, "values", v)
        if self.names is not None:
            object.__setattr__(self, "names", _check_names(self.names, v.size))

    @classmethod
    def named(cls, names: Sequence[str]) -> Scale:
        """A scale of named levels, lowest first (``["G", "P", "R", "X"]``): values 1..K."""
        names = tuple(str(n).strip() for n in names)
        return cls(np.arange(1.0, len(names) + 1.0), names)

    @property
    def labels(self) -> np.ndarray:
        """The levels as labels are written: the names, else :func:`level_labels`' values."""
        return level_labels(self.values, self.names)

    @property
    def text(self) -> str:
        """The scale as ``--scale`` takes it: ``G,P,R,X`` or ``1,2,3,4,5``."""
        return ",".join(self.names) if self.names is not None else fmt_scale(self.values)

    def same_as(self, other: Scale) -> bool:
        """The same levels: the same values and the same names (or none)."""
        return np.array_equal(self.values, other.values) and self.names == other.names

    def codes(self, labels: Sequence[object], what: str = "label") -> np.ndarray:
        """The values (K,) of ``labels`` written as this scale writes them (names, or
        numbers); NaN for a missing one. InputError naming the first that is not a level."""
        labels = pd.Series(labels, dtype=object)
        missing = labels.isna().to_numpy() | (labels.astype(str).str.strip() == "").to_numpy()
        if self.names is not None:
            where = {n: v for n, v in zip(self.names, self.values, strict=True)}
            out = np.array([where.get(str(x).strip(), np.inf) for x in labels], dtype=float)
        else:
            num = pd.to_numeric(labels, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            on = np.isfinite(num)
            on[on] = self.index_of(num[on]) >= 0
            out = np.where(on, num, np.inf)
        out[missing] = np.nan
        bad = np.isinf(out)
        if bad.any():
            first = labels[bad].iloc[0]
            raise InputError(
                f"{what} {str(first)[:40]!r} is not a level of the scale {self.text}"
                f" ({int(bad.sum())} such); use the scale's levels"
            )
        return out

    @property
    def k(self) -> int:
        return int(self.values.size)

    @property
    def thresholds(self) -> np.ndarray:
        """Shape (K+1,)."""
        v = self.values
        if v.size == 1:
            return np.array([v[0] - 0.5, v[0] + 0.5])
        mid = 0.5 * (v[1:] + v[:-1])
        lo = v[0] - 0.5 * (v[1] - v[0])
        hi = v[-1] + 0.5 * (v[-1] - v[-2])
        return np.concatenate([[lo], mid, [hi]])

    @property
    def step(self) -> float:
        """Mean spacing of the levels (1 for a one-level scale): the scale's natural unit."""
        v = self.values
        return float((v[-1] - v[0]) / (v.size - 1)) if v.size > 1 else 1.0

    @property
    def fine(self) -> bool:
        """More than ``MAX_COARSE_LEVELS`` levels: a slider rather than a few categories."""
        return self.k > MAX_COARSE_LEVELS

    @property
    def fit_unit(self) -> float:
        """The distance the continuous model's priors and tolerances (``lam``,
        ``tol_estimate``) are in: 1, the scale's own numbers, on a scale of up to
        ``MAX_COARSE_LEVELS`` levels; on a fine scale a tenth of its range, so that a 0..100
        slider is fitted as its positions divided by 10 would be, a range of 10 like the
        11-level scales the priors were set for (not its step: a step of one point in 100
        makes a prior of sd 3 a claim that every item is near 50)."""
        if not self.fine:
            return 1.0
        return float(self.values[-1] - self.values[0]) / (MAX_COARSE_LEVELS - 1)

    @property
    def fit_thresholds(self) -> np.ndarray:
        """The thresholds (K+1,) of the continuous fit: ``thresholds``, but on a fine scale the
        outer two ``FINE_END_RANGES`` ranges beyond the outer levels (a slider's end holds
        the answers beyond it)."""
        b = self.thresholds
        if not self.fine:
            return b
        reach = FINE_END_RANGES * float(self.values[-1] - self.values[0])
        return np.concatenate([[self.values[0] - reach], b[1:-1], [self.values[-1] + reach]])

    @property
    def center(self) -> float:
        """The paper's prior mean mu: the mean of the scale values."""
        return float(self.values.mean())

    def index_of(self, ratings: np.ndarray) -> np.ndarray:
        """Level index (0..K-1) of each rating; -1 where the value is not on the scale."""
        v = self.values
        pos = np.clip(np.searchsorted(v, ratings), 0, v.size - 1)
        tol = 1e-9 * max(1.0, float(np.abs(v).max()))
        ok = np.abs(v[pos] - ratings) <= tol
        return np.where(ok, pos, -1).astype(np.int32)

    @classmethod
    def parse(cls, text: str) -> Scale:
        """Parse ``"1,2,3,4,5"`` or names lowest first, ``"G,P,R,X"`` (as given to
        ``--scale``): numbers when every level is one, else every level is a name."""
        tokens = [t.strip() for t in str(text).split(",") if t.strip() != ""]
        if not tokens:
            raise InputError(
                f"--scale {text!r} names no level; write the levels lowest first, like "
                "--scale 1,2,3,4,5 or --scale low,medium,high"
            )
        if all(_is_number(t) for t in tokens):
            return cls(np.array([float(t) for t in tokens]))
        return cls.named(tokens)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _check_names(names: Sequence[object], k: int) -> tuple[str, ...]:
    """Named levels as kept: text, stripped, one per value, none blank, no repeats."""
    out = tuple(str(n).strip() for n in names)
    if len(out) != k:
        raise InputError(f"the rating scale has {k} levels but {len(out)} names")
    if any(not n for n in out):
        raise InputError("a level of the rating scale has an empty name; name every level")
    dup = sorted({n for n in out if out.count(n) > 1})
    if dup:
        raise InputError(
            f"the rating scale names {', '.join(map(repr, dup))} more than once; "
            "give each level once, lowest first"
        )
    return out


def level_labels(values: Sequence[float], names: Sequence[str] | None = None) -> np.ndarray:
    """The scale's levels as labels: its names when it has them (an object array), else its
    values, int64 when every value is a whole number (a label is ``3``, as the annotators
    gave it, not ``3.0``), else float64."""
    if names is not None:
        return np.array(list(names), dtype=object)
    v = np.asarray(values, dtype=float)
    whole = np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.abs(v) < 2**53)
    return v.astype(np.int64) if whole else v


def fmt_scale(values: Scale | Sequence[float]) -> str:
    """A scale (its names, when it has them) or its values as ``--scale`` takes them."""
    if isinstance(values, Scale):
        return values.text
    return ",".join(f"{x:g}" for x in values)


def as_scale(scale: Scale | Sequence[float] | str | None, ratings: np.ndarray) -> Scale:
    """Resolve a scale argument; ``None`` means the distinct values seen, as they are.

    A list holding a name that is not a number (``["low", "medium", "high"]``) is a scale of
    named levels, lowest first. The inferred scale is checked for outlying values by
    :func:`rating_levels` (which ``prepare`` runs, naming the file and the rows), not here.
    """
    if scale is None:
        return Scale(_distinct_levels(np.asarray(ratings, dtype=float))[0])
    if isinstance(scale, Scale):
        return scale
    if isinstance(scale, str):
        return Scale.parse(scale)
    levels = list(scale)
    if any(isinstance(v, str) and not _is_number(v) for v in levels):
        return Scale.named(levels)
    return Scale(np.asarray(levels, dtype=float))


def scale_names(scale: Scale | Sequence[float] | str | None) -> tuple[str, ...] | None:
    """The names of a scale argument's levels (None: numbers, or no scale given)."""
    return None if scale is None else as_scale(scale, np.empty(0)).names


def infer_scale(
    ratings: np.ndarray, source: str | None = None, rows: bool = False
) -> tuple[Scale, np.ndarray]:
    """The distinct values seen as the scale, and each rating's level (L,).

    Refused (InputError) when some values sit far from the rest (:func:`outlying_levels`);
    the message names them, with their first rows when ``rows`` (``ratings`` in file order),
    and the fix (delete them, or give the scale).
    """
    vals, level, counts = _distinct_levels(ratings)
    return checked_scale(vals, counts, source, level if rows else None), level


def checked_scale(
    values: np.ndarray,
    counts: np.ndarray,
    source: str | None = None,
    level: np.ndarray | None = None,
) -> Scale:
    """The distinct values seen (sorted, (K,); ``counts`` ratings each) as the scale, refused
    (InputError) when some sit far from the rest (:func:`outlying_levels`). ``level``: each
    rating's index into ``values`` in file order, to name the rows; the Dask engine, whose
    blocks are shuffled, gives only the counts."""
    far = outlying_levels(values, counts)
    if far.any():  # before the scale's own checks: this message names rows and the fix
        raise InputError(_outlier_message(values, counts, far, level), source=source)
    return Scale(values)


def _distinct_levels(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted distinct values (K,), each rating's index among them (L,) int32, counts (K,).

    Whole-number ratings in a short range (the usual 1..5, 0..100) are counted directly;
    anything else is hashed, then only the distinct values are sorted.
    """
    if r.size:
        lo, hi = float(r.min()), float(r.max())
        if hi - lo < 1e6 and abs(lo) < 2**52 and abs(hi) < 2**52:
            shifted = r - lo
            idx = shifted.astype(np.int64)
            if np.array_equal(idx, shifted):  # every rating a whole number
                counts = np.bincount(idx)
                present = np.flatnonzero(counts)
                rank = np.zeros(counts.size, dtype=np.int32)
                rank[present] = np.arange(present.size, dtype=np.int32)
                return present + lo, rank[idx], counts[present]
    codes, seen = pd.factorize(r)
    vals, where = np.unique(seen, return_inverse=True)  # (-0.0 and 0.0 become one value)
    level = where.astype(np.int32)[codes]
    return vals, level, np.bincount(level, minlength=vals.size)


def outlying_levels(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(K,) bool: distinct values cut off from the bulk of the ratings by an outsized gap.

    ``values`` sorted, ``counts`` ratings per value. The bulk starts as the narrowest run of
    values holding half the ratings (with its nearer neighbour if that is one value) and grows
    outwards over every gap that is at most ``OUTLIER_GAP_RANGE`` x its range or at most
    ``OUTLIER_GAP_STEP`` x its mean spacing; values it cannot reach are outlying. Growing from
    the middle, outliers on both sides, or several on one side, cannot hide each other.
    """
    k = values.size
    far = np.zeros(k, dtype=bool)
    if k < 3:
        return far
    with np.errstate(over="ignore", invalid="ignore"):  # 1e308 - -1e308 is inf: still far
        return _grow_bulk(values, counts, far)


def _grow_bulk(values: np.ndarray, counts: np.ndarray, far: np.ndarray) -> np.ndarray:
    k = values.size
    gaps = np.diff(values)
    cum = np.concatenate([[0], np.cumsum(counts)])
    half = cum[-1] / 2
    # for each start i, the first end j whose run i..j holds half the ratings; narrowest wins
    ends = np.clip(np.searchsorted(cum, cum[:-1] + half, side="left") - 1, 0, k - 1)
    width = np.where(cum[ends + 1] - cum[:-1] >= half, values[ends] - values, np.inf)
    i = int(np.argmin(width))
    j = int(ends[i])
    if i == j:  # one value holds half the ratings: it has no spread yet
        if j + 1 < k and (i == 0 or gaps[j] <= gaps[i - 1]):
            j += 1
        else:
            i -= 1
    while True:
        up = np.arange(j, k - 1)  # gap up from value m, the run being i..m
        spread = values[up] - values[i]
        stop = (gaps[up] > OUTLIER_GAP_RANGE * spread) & (
            gaps[up] > OUTLIER_GAP_STEP * spread / (up - i)
        )
        new_j = j + int(np.argmax(stop)) if stop.any() else k - 1
        down = np.arange(i - 1, -1, -1)  # gap down from value m + 1, the run being m + 1..j
        spread = values[j] - values[down + 1]
        stop = (gaps[down] > OUTLIER_GAP_RANGE * spread) & (
            gaps[down] > OUTLIER_GAP_STEP * spread / (j - down - 1)
        )
        new_i = i - int(np.argmax(stop)) if stop.any() else 0
        if (new_i, new_j) == (i, j):
            break
        i, j = new_i, new_j
    far[:i] = True
    far[j + 1 :] = True
    return far


def _outlier_message(
    vals: np.ndarray, counts: np.ndarray, far: np.ndarray, level: np.ndarray | None
) -> str:
    near = vals[~far]
    idx = np.flatnonzero(far)
    rows = {int(k): np.flatnonzero(level == k) + 2 for k in idx[:3]} if level is not None else {}

    def rows_of(k: int, skip_first: bool) -> str:
        r = rows[k][1:] if skip_first else rows[k]
        if r.size == 0:
            return ""
        more = f" and {r.size - 3} more" if r.size > 3 else ""
        return f"row{'s' if r.size > 1 else ''} {', '.join(map(str, r[:3]))}{more}"

    if level is None:
        parts = [f"{vals[k]:g} ({int(counts[k])} rating(s))" for k in idx[:3]]
        where = ""
    elif idx.size == 1:
        also = rows_of(int(idx[0]), skip_first=True)
        parts = [f"{vals[idx[0]]:g}" + (f" (also on {also})" if also else "")]
        where = f"row {rows[int(idx[0])][0]} {_ROW}: "
    else:
        parts = [f"{vals[k]:g} ({rows_of(int(k), skip_first=False)})" for k in idx[:3]]
        where = f"row {min(int(r[0]) for r in rows.values())} {_ROW}: "
    if idx.size > 3:
        parts.append(f"{idx.size - 3} more value(s)")
    what = f"rating {parts[0]} lies" if idx.size == 1 else f"ratings {', '.join(parts)} lie"
    step = float(np.median(np.diff(near))) if near.size > 1 else float(np.median(np.diff(vals)))
    plausible = vals.size <= 12 and np.abs(vals).max() <= 1e6
    example = f", e.g. --scale {fmt_scale(vals)}" if plausible else ""
    return (
        f"{where}{what} far outside the other ratings ({near[0]:g} to {near[-1]:g}, typically "
        f"{step:g} apart), so the scale inferred from the values seen would be wrong; if they "
        "are typos or a code for 'no answer', fix or delete those rows; if they really are "
        f"levels, give the scale explicitly (--scale{example})"
    )
