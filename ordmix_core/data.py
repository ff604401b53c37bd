"""Ratings in, integer-coded arrays out: the one place where pandas meets the engine.

Everything downstream (engine, baselines) works on :class:`CrowdData`, built once per fit:
IDs factorised to ``int32`` codes, ratings mapped to level indices on a known :class:`Scale`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .errors import InputError

#: accepted column names -> canonical name (crowd-kit's worker/task/label included)
COLUMN_ALIASES = {
    "annotator": "annotator",
    "worker": "annotator",
    "instance": "instance",
    "task": "instance",
    "item": "instance",
    "rating": "rating",
    "label": "rating",
    "query": "query",
}
REQUIRED = ("annotator", "instance", "rating")
GRANULARITIES = ("instance", "query", "global")


@dataclass(frozen=True)
class Scale:
    """An ordinal scale ``v_1 < ... < v_K`` and its thresholds ``b_0 < ... < b_K``.

    Inner thresholds sit at the midpoints; the outer ones half a step outside
    (the paper's 0.5 ... 5.5 for 1..5). A one-level scale gets ``v +- 0.5``.
    """

    values: np.ndarray

    def __post_init__(self) -> None:
        v = np.asarray(self.values, dtype=float)
        if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
            raise InputError("the rating scale must be a non-empty list of finite numbers")
        if np.any(np.diff(v) <= 0):
            raise InputError(
                f"the rating scale {fmt_scale(v)} must be strictly increasing without repeats"
            )
        object.__setattr__(self, "values", v)

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
        """Parse ``"1,2,3,4,5"`` (as given to ``--scale``)."""
        try:
            vals = [float(t) for t in str(text).split(",") if t.strip() != ""]
        except ValueError:
            raise InputError(
                f"--scale {text!r} is not a comma-separated list of numbers; "
                "write it like --scale 1,2,3,4,5"
            ) from None
        return cls(np.array(vals))


def fmt_scale(values: Sequence[float]) -> str:
    return ",".join(f"{x:g}" for x in values)


def map_aliases(columns: Sequence[object], aliases: dict[str, str], source: str) -> dict:
    """Column name -> canonical name for the columns that are aliases (case-insensitive).

    Two columns meaning the same thing (say ``worker`` and ``annotator``) are an InputError.
    """
    mapping: dict = {}
    for c in columns:
        canon = aliases.get(str(c).strip().lower())
        if canon is None:
            continue
        if canon in mapping.values():
            other = next(k for k, v in mapping.items() if v == canon)
            raise InputError(
                f"columns {other!r} and {c!r} both mean {canon!r}; keep one of them",
                source=source,
            )
        mapping[c] = canon
    return mapping


def normalize_columns(df: pd.DataFrame, source: str = "ratings") -> pd.DataFrame:
    """Rename aliases to ``annotator, instance, rating[, query]`` and check what is there.

    IDs become strings (leading zeros kept); ratings become float. Raises InputError.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError("ratings must be a pandas DataFrame", source=source)
    cols = [str(c).strip() for c in df.columns]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise InputError(
            f"column name(s) {', '.join(dup)} appear more than once; rename or drop the extra "
            "column(s)",
            source=source,
        )
    mapping = map_aliases(cols, COLUMN_ALIASES, source)
    out = df.copy()
    out.columns = cols
    out = out.rename(columns=mapping)
    missing = [c for c in REQUIRED if c not in out.columns]
    if missing:
        raise InputError(
            f"required column(s) {', '.join(missing)} missing "
            f"(found: {', '.join(cols) or 'none'}); "
            "the file needs columns annotator, instance, rating (or worker, task, label), "
            "optionally query",
            source=source,
        )
    keep = [c for c in ("annotator", "instance", "rating", "query") if c in out.columns]
    out = out[keep]
    if len(out) == 0:
        raise InputError("no ratings (the table has a header but no rows)", source=source)
    for c in ("annotator", "instance", "query"):
        if c not in out.columns:
            continue
        col = out[c]
        bad = col.isna() | (col.astype(str).str.strip() == "")
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(
                f"row {row + 2} (counting the header as row 1): empty {c!r} cell; "
                f"fill it in or delete the row ({int(bad.sum())} such row(s))",
                source=source,
            )
        out[c] = col.astype(str)
    out["rating"] = _numeric_ratings(out["rating"], source)
    return out.reset_index(drop=True)


def _numeric_ratings(col: pd.Series, source: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(col):
        col = col.astype(int)
    num = pd.to_numeric(col, errors="coerce")
    bad = num.isna() | ~np.isfinite(num.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raw = col.iloc[row]
        where = f"row {row + 2} (counting the header as row 1)"
        if pd.isna(raw) or str(raw).strip() == "":
            msg = f"{where}: empty rating cell; fill it in or delete the row"
        else:
            text = str(raw)[:40]
            hint = (
                " (decimal comma? write it with a point, e.g. 3.5)"
                if re.fullmatch(r"-?\d+,\d+", text.strip())
                else ""
            )
            msg = f"{where}: rating {text!r} is not a number{hint}; ratings must be numbers"
        raise InputError(f"{msg} ({int(bad.sum())} such row(s))", source=source)
    return num.astype(float)


@dataclass
class CrowdData:
    """Integer-coded ratings. ``L`` ratings, ``M`` instances, ``N`` annotators, ``C`` categories."""

    scale: Scale
    ann: np.ndarray  # (L,) int32 annotator code
    inst: np.ndarray  # (L,) int32 instance code
    level: np.ndarray  # (L,) int32 level index 0..K-1
    annotators: np.ndarray  # (N,) object: annotator IDs
    instances: np.ndarray  # (M,) object: instance IDs
    inst_query: np.ndarray | None = None  # (M,) object: query ID of each instance, if known
    cat_of_inst: np.ndarray = field(default=None)  # (M,) int32 category of each instance
    categories: np.ndarray = field(default=None)  # (C,) object: category names
    granularity: str = "instance"

    @property
    def n_ratings(self) -> int:
        return int(self.ann.size)

    @property
    def n_annotators(self) -> int:
        return int(self.annotators.size)

    @property
    def n_instances(self) -> int:
        return int(self.instances.size)

    @property
    def n_categories(self) -> int:
        return int(self.categories.size)

    @property
    def values(self) -> np.ndarray:
        """(L,) rating values on the scale."""
        return self.scale.values[self.level]

    @property
    def cat(self) -> np.ndarray:
        """(L,) category code of each rating."""
        return self.cat_of_inst[self.inst]

    def per_instance_mean(self) -> np.ndarray:
        """(M,) mean rating value per instance."""
        s = np.bincount(self.inst, weights=self.values, minlength=self.n_instances)
        return s / np.bincount(self.inst, minlength=self.n_instances)

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Ratings per instance (M,) and per annotator (N,)."""
        return (
            np.bincount(self.inst, minlength=self.n_instances),
            np.bincount(self.ann, minlength=self.n_annotators),
        )

    def with_granularity(self, granularity: str) -> CrowdData:
        """The same ratings with categories at ``instance``, ``query`` or ``global`` level."""
        if granularity not in GRANULARITIES:
            raise InputError(
                f"granularity {granularity!r} is not one of {', '.join(GRANULARITIES)}"
            )
        m = self.n_instances
        if granularity == "instance":
            cat, names = np.arange(m, dtype=np.int32), self.instances
        elif granularity == "global":
            cat, names = np.zeros(m, dtype=np.int32), np.array(["all"], dtype=object)
        else:
            if self.inst_query is None:
                raise InputError(
                    "granularity 'query' needs a 'query' column in the ratings; add one, "
                    "or choose granularity 'instance' or 'global'"
                )
            codes, names = pd.factorize(self.inst_query, sort=False)
            cat, names = codes.astype(np.int32), np.asarray(names, dtype=object)
        return replace(self, cat_of_inst=cat, categories=names, granularity=granularity)


def as_scale(scale: Scale | Sequence[float] | str | None, ratings: np.ndarray) -> Scale:
    """Resolve a scale argument; ``None`` means the distinct values seen."""
    if scale is None:
        return Scale(np.unique(ratings))
    if isinstance(scale, Scale):
        return scale
    if isinstance(scale, str):
        return Scale.parse(scale)
    return Scale(np.asarray(list(scale), dtype=float))


def prepare(
    ratings: pd.DataFrame | CrowdData,
    scale: Scale | Sequence[float] | str | None = None,
    granularity: str = "instance",
    source: str = "ratings",
) -> CrowdData:
    """Validate and factorise a long ratings table into :class:`CrowdData`.

    Repeated (annotator, instance) pairs are kept as separate ratings (as TREC RF10 releases
    them). Raises InputError for anything unusable.
    """
    if isinstance(ratings, CrowdData):
        if scale is not None and not np.array_equal(
            as_scale(scale, []).values, ratings.scale.values
        ):
            raise InputError("a prepared CrowdData already has its scale; do not pass another")
        return ratings.with_granularity(granularity)
    df = normalize_columns(ratings, source)
    r = df["rating"].to_numpy(dtype=float)
    sc = as_scale(scale, r)
    level = sc.index_of(r)
    off = level < 0
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise InputError(
            f"row {row + 2} (counting the header as row 1): rating {r[row]:g} is not on the scale "
            f"{fmt_scale(sc.values)} ({int(off.sum())} such row(s)); fix the rating or give the "
            "scale that includes it (--scale)",
            source=source,
        )
    # IDs sorted so that codes, and so every random start, do not depend on row order
    ann, annotators = pd.factorize(df["annotator"], sort=True)
    inst, instances = pd.factorize(df["instance"], sort=True)
    inst_query = None
    if "query" in df.columns:
        q = df["query"].to_numpy(dtype=object)
        first = np.zeros(len(instances), dtype=np.int64)
        first[inst[::-1]] = np.arange(len(inst))[::-1]
        inst_query = q[first]
        clash = q != inst_query[inst]
        if clash.any():
            row = int(np.flatnonzero(clash)[0])
            raise InputError(
                f"row {row + 2} (counting the header as row 1): instance {df['instance'][row]!r} "
                f"has query {q[row]!r} here but {inst_query[inst[row]]!r} earlier; "
                "an instance belongs to one query",
                source=source,
            )
    data = CrowdData(
        scale=sc,
        ann=ann.astype(np.int32),
        inst=inst.astype(np.int32),
        level=level,
        annotators=np.asarray(annotators, dtype=object),
        instances=np.asarray(instances, dtype=object),
        inst_query=inst_query,
    )
    return data.with_granularity(granularity)
