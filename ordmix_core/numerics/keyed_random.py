"""Random draws keyed on IDs: the same instance gets the same draw however data is split.

A restart's random start must not depend on row order or on how ratings are partitioned
(the Dask engine draws per partition), so noise for an entity is a hash of its ID and a key
drawn from the fit's one ``numpy.random.Generator``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import libm

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijective mix of uint64 values; shape kept."""
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def id_hash(ids: np.ndarray | pd.Index) -> np.ndarray:
    """Stable 64-bit hash of each ID (pandas' fixed-key SipHash of its string form); (n,)."""
    strs = np.array([str(x) for x in np.asarray(ids, dtype=object)], dtype=object)
    return pd.util.hash_array(strs, categorize=False)


def keyed_normal(hashes: np.ndarray, key: int, stream: int = 0) -> np.ndarray:
    """Standard normal draws, one per ID hash, determined by ``(hash, key, stream)``; (n,)."""
    k = _splitmix64(np.array([key, stream], dtype=np.uint64)).astype(np.uint64)
    with np.errstate(over="ignore"):
        a = _splitmix64(hashes ^ k[0])
        b = _splitmix64(a ^ k[1])
    # 53-bit uniforms in (0, 1], then Box-Muller
    u1 = ((a >> np.uint64(11)).astype(np.float64) + 1.0) / 2.0**53
    u2 = (b >> np.uint64(11)).astype(np.float64) / 2.0**53
    return np.sqrt(-2.0 * libm.log(u1)) * libm.cos(2.0 * np.pi * u2)


def keyed_uniform(hashes: np.ndarray, key: int, stream: int = 0) -> np.ndarray:
    """Uniform [0, 1) draws, one per ID hash, determined by ``(hash, key, stream)``; (n,)."""
    k = _splitmix64(np.array([key, stream], dtype=np.uint64))
    return (_splitmix64(hashes ^ k[0]) >> np.uint64(11)).astype(np.float64) / 2.0**53
