"""Gold given to a fit: known true values of some items, checked and put in the items' order
(both engines)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError
from .crowd import CrowdData
from .scale import Scale

#: gold given for none of the rated items (both engines' message)
NO_GOLD_RATED = (
    "gold: none of the gold instances is among the rated instances; check that the instance "
    "IDs match the ratings file"
)


def checked_gold(gold: pd.Series, scale: Scale | None = None) -> pd.Series:
    """The gold values (float) by instance ID as text, each ID once (its first): the levels'
    values for names of a named ``scale``; an InputError for what is not a Series of numbers
    (or of the scale's names)."""
    if not isinstance(gold, pd.Series):
        raise InputError("gold must be a pandas Series of true values indexed by instance")
    if scale is not None and scale.names is not None and gold.dtype.kind not in "iuf":
        gold = pd.Series(scale.codes(gold, "gold: the truth"), index=gold.index)
    g = pd.to_numeric(gold, errors="coerce")
    if g.isna().any():
        bad = g.index[g.isna()][0]
        raise InputError(f"gold: the truth of instance {bad!r} is not a number")
    g.index = g.index.astype(str)
    return g[~g.index.duplicated(keep="first")]


def gold_vector(gold: pd.Series | None, data: CrowdData) -> np.ndarray | None:
    """(M,) the known truth of each of ``data``'s instances (NaN: unknown) from a Series by
    instance (``checked_gold``); None without gold, an InputError when none is rated."""
    if gold is None:
        return None
    g = checked_gold(gold, data.scale)
    vec = g.reindex(pd.Index(data.instances).astype(str)).to_numpy(dtype=float)
    if not np.isfinite(vec).any():
        raise InputError(NO_GOLD_RATED)
    return vec
