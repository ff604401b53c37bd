"""A block's life before its first sweep, on its worker: a partition's columns normalised, the
block loaded and registered under the fit, the blocks' summaries combined on the client, and
each block switched to the global codes and problem (``Setup``) that the summary gave."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data.coding import numeric_ratings
from ..data.queries import instance_queries, query_clash
from ..errors import InputError
from ..io.readers import release_freed_memory
from ..numerics.keyed_random import id_hash
from ..vb.problem import Problem
from .blocks import _REGISTRY, Block, block

ID_COLUMNS = ("annotator", "instance", "query")


def normalize_block(
    df: pd.DataFrame,
    mapping: dict[str, str],
    label: str,
    names: tuple[str, ...] | None = None,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    """One input partition renamed to ``annotator, instance, rating[, query]`` and checked.

    ``mapping``: input column -> canonical name (from the client's look at the header). IDs
    stay (Arrow) strings, ratings become float (with ``names``, a scale of named levels lowest
    first, each rating is one of them, read as its value 1..K, as in memory); an empty ID cell
    or a rating that is not a number (or not a level's name) raises ``InputError`` naming the
    block and row.
    """
    part = partition_info["number"] if partition_info else 0
    df = df.rename(columns=mapping)
    keep = [c for c in ("annotator", "instance", "rating", "query") if c in df.columns]
    df = df[keep]
    where = "" if part == 0 else f" of input block {part} (rows counted from the block's start)"
    out = {}
    for c in keep:
        col = df[c]
        if c == "rating":
            try:
                out[c] = numeric_ratings(col.reset_index(drop=True), label, names)
            except InputError as e:
                raise InputError(f"{e}{where}") from None
            continue
        if not pd.api.types.is_string_dtype(col) or col.dtype == object:
            col = col.astype(str).where(col.notna(), None).astype("string[pyarrow]")
        bad = col.isna() | (col.str.strip() == "")
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(
                f"row {row + 2} (counting the header as row 1){where}: empty {c!r} cell; "
                f"fill it in or delete the row ({int(bad.sum())} such row(s))",
                source=label,
            )
        out[c] = col.array
    return pd.DataFrame(out, index=pd.RangeIndex(len(df)))


def _worker_address() -> str:
    from distributed import get_worker

    return get_worker().address


def load_block(fit_id: str, index: int, df: pd.DataFrame, label: str) -> dict:
    """Factorise one shuffled partition and keep it in this worker's registry.

    Returns its small summary: ``ann`` (Series annotator -> ratings, sorted), ``values``
    (distinct ratings, sorted) and ``value_counts`` (ratings of each), ``query_min`` (Series
    query -> smallest instance ID, or None), ``n_ratings``, ``n_instances`` and ``worker``
    (the address the block lives on).
    """
    n = len(df)
    ann_local, ann_ids = pd.factorize(df["annotator"], sort=True)
    inst, inst_uniques = pd.factorize(df["instance"], sort=True)
    rating_code, rating_vals = pd.factorize(df["rating"], sort=True)
    ann_ids = np.asarray(ann_ids, dtype=object)
    inst_ids = np.asarray(inst_uniques, dtype=object)  # for the summary, then dropped
    query_of_inst, query_min = None, None
    if "query" in df.columns:
        q = df["query"].array
        query_of_inst, row = instance_queries(inst, q, len(inst_ids))
        if row is not None:  # no row number: the block is a shuffled partition
            m = inst[row]
            raise InputError(query_clash(inst_ids[m], q[row], query_of_inst[m]), source=label)
        qs = pd.Series(inst_ids, index=query_of_inst)
        query_min = qs.groupby(level=0, sort=False).min()
    del df
    b = Block(
        ann_ids=ann_ids,
        ann_local=ann_local.astype(np.int32),
        inst_ids=pd.array(inst_uniques, dtype="string[pyarrow]"),
        inst=inst.astype(np.int32),
        rating_vals=np.asarray(rating_vals, dtype=float),
        rating_code=rating_code.astype(np.int32),
        query_of_inst=query_of_inst,
    )
    _REGISTRY[f"{fit_id}/{index}"] = b
    counts = np.bincount(b.ann_local, minlength=ann_ids.size)
    return {
        "ann": pd.Series(counts, index=pd.Index(ann_ids, dtype=object)),
        "values": b.rating_vals,
        "value_counts": np.bincount(b.rating_code, minlength=b.rating_vals.size),
        "query_min": query_min,
        "n_ratings": n,
        "n_instances": int(inst_ids.size),
        "worker": _worker_address(),
    }


def combine_summaries(*parts: dict) -> dict:
    """Merge ``load_block`` summaries (a step of the tree reduction)."""
    ann = pd.concat([p["ann"] for p in parts]).groupby(level=0, sort=True).sum()
    values = np.unique(np.concatenate([p["values"] for p in parts]))  # -0.0 joins 0.0
    counts = np.zeros(values.size, dtype=np.int64)
    for p in parts:
        np.add.at(counts, np.searchsorted(values, p["values"]), p["value_counts"])
    qm = [p["query_min"] for p in parts if p["query_min"] is not None]
    query_min = pd.concat(qm).groupby(level=0, sort=False).min() if qm else None
    return {
        "ann": ann,
        "values": values,
        "value_counts": counts,
        "query_min": query_min,
        "n_ratings": sum(p["n_ratings"] for p in parts),
        "n_instances": sum(p["n_instances"] for p in parts),
        "worker": None,
    }


@dataclass
class Setup:
    """What every block needs to build its ``Problem`` (broadcast once)."""

    problem: Problem  # the global problem: no ratings, n_per_ann (N,), n_categories
    annotators: np.ndarray  # (N,) object, sorted
    categories: np.ndarray | None  # (C,) object, query granularity; None otherwise
    granularity: str
    step: float
    label: str
    n_threads: int = 1


def finalize_block(fit_id: str, index: int, setup: Setup) -> np.ndarray:
    """Global codes and levels for the block; returns its ratings per global category (C,).
    The last step of the block's loading: the memory the loading freed is handed back."""
    b = block(fit_id, index)
    g = setup.problem
    scale_vals = g.values
    lev_of_val = _levels(b.rating_vals, scale_vals, setup.label)
    level = lev_of_val[b.rating_code]
    ann_code = np.searchsorted(setup.annotators, b.ann_ids).astype(np.int32)
    ann = ann_code[b.ann_local]
    m = len(b.inst_ids)
    if setup.granularity == "instance":
        cat_of_inst, n_cat, local = np.arange(m, dtype=np.int32), m, True
        b.cat_name_of_inst = None  # the instances' own IDs (``Block.instance_ids``)
    elif setup.granularity == "global":
        cat_of_inst, n_cat, local = np.zeros(m, dtype=np.int32), 1, False
        b.cat_name_of_inst = np.full(m, "all", dtype=object)
    else:
        cat_of_inst = pd.Index(setup.categories).get_indexer(b.query_of_inst).astype(np.int32)
        n_cat, local = setup.categories.size, False
        b.cat_name_of_inst = b.query_of_inst
    cat = cat_of_inst[b.inst]
    b.problem = g.with_ratings(ann, b.inst, cat, level, m, n_cat)
    b.local_categories = local
    b.n_threads = setup.n_threads
    b.inst_hash = id_hash(b.instance_ids())
    b.n_m = np.bincount(b.inst, minlength=m)
    b.sum_m = np.bincount(b.inst, weights=g.values[level], minlength=m)
    b.ann_local = b.rating_code = None  # no longer needed
    counts = np.zeros(0) if local else np.bincount(cat, minlength=n_cat).astype(float)
    # the loading's freed memory (the shuffled partition's coding, in glibc's heap and
    # pyarrow's pool) handed back before the sweeps' arrays come
    release_freed_memory()
    return counts


def _levels(vals: np.ndarray, scale: np.ndarray, label: str) -> np.ndarray:
    """Level index of each distinct rating value; InputError for one off the scale."""
    from ..data.scale import Scale, fmt_scale

    lev = Scale(scale).index_of(vals)
    if (lev < 0).any():
        bad = vals[lev < 0][0]
        raise InputError(
            f"rating {bad:g} is not on the scale {fmt_scale(scale)}; fix the rating or give "
            "the scale that includes it (--scale)",
            source=label,
        )
    return lev.astype(np.int32)
