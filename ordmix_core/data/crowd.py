"""Ratings in, integer-coded arrays out: the one place where pandas meets the engine.

Everything downstream (engine, baselines) works on :class:`CrowdData`, built once per fit:
IDs factorised to ``int32`` codes in the sorted order of the IDs (so row order never changes a
fit), ratings mapped to level indices on a known :class:`Scale`. IDs are coded from the column
as it comes, without a Python string per rating: a pandas Categorical (what
``io.read_ratings`` returns: codes plus the distinct IDs) is recoded through its categories,
Arrow-backed text through pyarrow's hash and sort; only the distinct IDs become Python strings.

This module also owns what the ratings must mean, with one message each: the columns, empty
IDs, ratings that are not finite numbers, ratings off a given scale, an inferred scale with
outlying values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..errors import InputError
from .coding import (
    _as_text,
    _bad_codes,
    _blank_rows,
    _category_ids,
    _code_columns,
    _ids_dtype,
    _refuse_empty_ids,
    compact_ids,
    numeric_ratings,
    rating_levels,
)
from .columns import (
    COLUMN_ALIASES,
    REQUIRED,
    _invisible_hint,
    _is_arrow,
    map_aliases,
    visible,
)
from .queries import instance_queries, query_clash
from .scale import Scale, as_scale, scale_names

GRANULARITIES = ("instance", "query", "global")


def _select(df, source: str) -> dict:
    """Canonical name -> column (not copied), after the name, alias and required checks.

    ``df``: a pandas DataFrame (columns as Series) or a ``pyarrow.Table`` (the readers';
    columns as Arrow arrays).
    """
    arrow = _is_arrow(df) and hasattr(df, "column_names")
    if not (arrow or isinstance(df, pd.DataFrame)):
        raise InputError("ratings must be a pandas DataFrame", source=source)
    cols = [str(c).strip() for c in (df.column_names if arrow else df.columns)]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise InputError(
            f"column name(s) {', '.join(map(visible, dup))} appear more than once; rename or "
            "drop the extra column(s)",
            source=source,
        )
    mapping = map_aliases(cols, COLUMN_ALIASES, source)
    missing = [c for c in REQUIRED if c not in mapping.values()]
    if missing:
        raise InputError(
            f"required column(s) {', '.join(missing)} missing "
            f"(found: {', '.join(map(visible, cols)) or 'none'}); "
            "the file needs columns annotator, instance, rating (or worker, task, label), "
            f"optionally query{_invisible_hint(cols)}",
            source=source,
        )
    get = df.column if arrow else (lambda i: df.iloc[:, i])
    out = {canon: get(cols.index(name)) for name, canon in mapping.items()}
    if (df.num_rows if arrow else len(df)) == 0:
        raise InputError("no ratings (the table has a header but no rows)", source=source)
    return {c: out[c] for c in ("annotator", "instance", "rating", "query") if c in out}


def normalize_columns(
    df, source: str = "ratings", *, coded: bool = False, names: Sequence[str] | None = None
) -> pd.DataFrame:
    """Rename aliases to ``annotator, instance, rating[, query]`` and check what is there.

    IDs become text (leading zeros kept): a Categorical keeps its codes with its categories as
    strings, any other column becomes ``str``; with ``coded`` every ID column becomes a
    Categorical whose categories are the sorted distinct IDs (codes + dictionary: what
    :func:`prepare` takes without recoding). Ratings become float: with ``names`` (a scale
    of named levels, lowest first) each rating is one of them, read as its value 1..K.
    The result remembers
    ``source`` (``attrs["source"]``) so that :func:`prepare` names the file. ``df`` may also
    be a ``pyarrow.Table`` of text columns (the readers'), coded without going through pandas.
    Raises InputError.
    """
    if not coded and _is_arrow(df) and hasattr(df, "to_pandas"):
        df = df.to_pandas()
    attrs = getattr(df, "attrs", None) or {}
    given = names
    if names is not None and tuple(attrs.get("levels") or ()) == tuple(names):
        names = None  # a frame this function made with these names: its ratings are values
    cols = _select(df, source)
    spelled: dict[float, str] = {}
    results = _code_columns(cols, source, names, spelled) if coded else {}
    out = {}
    for c, col in cols.items():
        if c == "rating":
            out[c] = results.pop(c)() if coded else numeric_ratings(col, source, names, spelled)
        elif coded:
            codes, uniq, blank, same = results.pop(c)()
            _refuse_empty_ids(_bad_codes(codes, blank), c, source)
            out[c] = (
                col.array
                if same
                else pd.Categorical.from_codes(codes, dtype=_ids_dtype(uniq), validate=False)
            )
        else:
            _refuse_empty_ids(_blank_rows(col), c, source)
            out[c] = _as_text(col)
    frame = pd.DataFrame(out, copy=False)
    frame.attrs["source"] = source
    if spelled:  # the ratings were text: each value's spelling, for crowd-kit's labels
        frame.attrs["rating_text"] = spelled
    if given is not None:
        frame.attrs["levels"] = tuple(given)  # the ratings are the named levels' values
    return frame


# --------------------------------------------------------------------------- coding IDs


# --------------------------------------------------------------------------- ratings


# --------------------------------------------------------------------------- scales


@dataclass
class CrowdData:
    """Integer-coded ratings. ``L`` ratings, ``M`` instances, ``N`` annotators, ``C`` categories.

    ``instances`` (and ``categories`` at instance granularity, the same IDs) is an object
    array, or for ``COMPACT_IDS`` or more instances read from coded IDs an Arrow-backed string
    array (:func:`compact_ids`); :func:`id_array` gives an object array of either.
    """

    scale: Scale
    ann: np.ndarray  # (L,) int32 annotator code
    inst: np.ndarray  # (L,) int32 instance code
    level: np.ndarray  # (L,) int32 level index 0..K-1
    annotators: np.ndarray  # (N,) object: annotator IDs
    instances: np.ndarray  # (M,) object (or compact_ids'): instance IDs
    inst_query: np.ndarray | None = None  # (M,) object: query ID of each instance, if known
    cat_of_inst: np.ndarray = field(default=None)  # (M,) int32 category of each instance
    categories: np.ndarray = field(default=None)  # (C,) object: category names
    granularity: str = "instance"
    #: (K,) each level as the ratings wrote it when they were given as text (``"3"``): the
    #: type crowd-kit's ``labels_`` and ``probas_`` keep; None for numbers or named levels
    level_text: tuple[str, ...] | None = None

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
        check_granularity(granularity, has_query=self.inst_query is not None)
        m = self.n_instances
        if granularity == "instance":
            cat, names = np.arange(m, dtype=np.int32), self.instances
        elif granularity == "global":
            cat, names = np.zeros(m, dtype=np.int32), np.array(["all"], dtype=object)
        else:
            codes, names = pd.factorize(self.inst_query, sort=False)
            cat, names = codes.astype(np.int32), np.asarray(names, dtype=object)
        return replace(self, cat_of_inst=cat, categories=names, granularity=granularity)


def check_granularity(granularity: object, has_query: bool | None = None) -> str:
    """``granularity`` if it is one of ``GRANULARITIES`` (and, ``has_query`` given, ``query``
    only with a query column), else one InputError that says what to choose: the one check
    of the in-memory data, the Dask engine and ``compare``."""
    if granularity not in GRANULARITIES:
        raise InputError(f"granularity {granularity!r} is not one of {', '.join(GRANULARITIES)}")
    if granularity == "query" and has_query is False:
        raise InputError(
            "granularity 'query' needs a 'query' column in the ratings; add one, "
            "or choose granularity 'instance' or 'global'"
        )
    return str(granularity)


def prepare(
    ratings: pd.DataFrame | CrowdData,
    scale: Scale | Sequence[float] | str | None = None,
    granularity: str = "instance",
    source: str | None = None,
) -> CrowdData:
    """Validate and factorise a long ratings table into :class:`CrowdData`.

    Repeated (annotator, instance) pairs are kept as separate ratings (as TREC RF10 releases
    them). IDs are coded in sorted order (:func:`factorize_sorted`), so the row order never
    changes a fit. Messages name ``source``, else the file the frame was read from
    (``attrs["source"]``, set by the readers), else ``ratings``. Raises InputError for
    anything unusable.
    """
    if isinstance(ratings, CrowdData):
        if scale is not None and not as_scale(scale, []).same_as(ratings.scale):
            raise InputError("a prepared CrowdData already has its scale; do not pass another")
        return ratings.with_granularity(granularity)
    if source is None:
        attrs = getattr(ratings, "attrs", None) or {}
        source = str(attrs.get("source") or "ratings")
    names = scale_names(scale)
    frame = normalize_columns(ratings, source, coded=True, names=names)  # the one validation
    data = crowd_from_coded(frame, scale, granularity, source, copy=True)
    spelled = frame.attrs.get("rating_text")
    if spelled is not None and data.scale.names is None:  # text ratings: labels as written
        text = tuple(spelled.get(float(v), f"{v:g}") for v in data.scale.values)
        data = replace(data, level_text=text)
    return data


def crowd_from_coded(
    frame: pd.DataFrame,
    scale: Scale | Sequence[float] | str | None = None,
    granularity: str = "instance",
    source: str = "ratings",
    copy: bool = True,
) -> CrowdData:
    """:class:`CrowdData` from what :func:`normalize_columns` returns with ``coded=True``
    (ID columns as Categoricals of their sorted distinct IDs, ratings as float): the rating
    scale and its checks, each instance's query and its check. ``copy=False`` when the frame
    is the caller's own (``io.read_crowd``'s): ``int32`` codes are then taken without a copy,
    so no per-rating array exists twice.
    """
    coded = {
        c: (
            np.array(frame[c].array.codes, dtype=np.int32, copy=copy or None),
            _category_ids(frame[c].cat.categories, compact=c == "instance"),
        )
        for c in ("annotator", "instance")
    }
    sc, level = rating_levels(frame["rating"].to_numpy(), scale, source)
    ann, annotators = coded["annotator"]
    inst, instances = coded["instance"]
    inst_query = None
    if "query" in frame.columns:
        query = frame["query"].array
        inst_query, clash = instance_queries(inst, query, len(instances))
        if clash is not None:
            raise InputError(
                query_clash(instances[inst[clash]], query[clash], inst_query[inst[clash]], clash),
                source=source,
            )
    data = CrowdData(
        scale=sc,
        ann=ann,
        inst=inst,
        level=level,
        annotators=annotators,
        instances=compact_ids(instances),  # the frame's strings go with the frame
        inst_query=inst_query,
    )
    return data.with_granularity(granularity)
