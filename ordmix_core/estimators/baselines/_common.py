"""Shared reductions over integer-coded ratings (no pandas in the loops)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...data.coding import id_array
from ...data.crowd import CrowdData
from ...numerics import libm
from ...results import agreement


def level_counts(data: CrowdData) -> np.ndarray:
    """(M, K) ratings per instance and level, as floats (``agreement.level_counts``)."""
    return agreement.level_counts(data).astype(float)


def posterior_frame(post: np.ndarray, data: CrowdData) -> pd.DataFrame:
    """(M, K) class probabilities as a DataFrame: rows instances, columns scale values."""
    return pd.DataFrame(
        post,
        index=pd.Index(id_array(data.instances), name="instance"),
        columns=pd.Index(data.scale.values, name="level"),
    )


def normalize_log(logp: np.ndarray) -> tuple[np.ndarray, float]:
    """Row-normalise (M, K) log-probabilities; returns probabilities and the total log-evidence."""
    mx = logp.max(axis=1, keepdims=True)
    p = libm.exp(logp - mx)
    s = p.sum(axis=1, keepdims=True)
    return p / s, float(np.sum(libm.log(s) + mx))


def modal_level(counts: np.ndarray, values: np.ndarray, center: np.ndarray) -> np.ndarray:
    """(M,) index of the most frequent level per row of ``counts`` (M, K).

    Ties go to the tied level closest to ``center`` (M,) (the item's mean rating), then to the
    lower level.
    """
    top = counts >= counts.max(axis=1, keepdims=True) - 1e-9
    dist = np.where(top, np.abs(values[None, :] - center[:, None]), np.inf)
    tol = 1e-9 * max(1.0, float(np.abs(values).max()))
    near = dist <= dist.min(axis=1, keepdims=True) + tol
    return np.argmax(near, axis=1)  # first True = lowest such level
