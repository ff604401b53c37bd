"""Majority vote: the most frequent level per instance."""

from __future__ import annotations

import numpy as np

from ...data.crowd import CrowdData
from ..base import CrowdEstimator
from ._common import level_counts, modal_level, posterior_frame


class MajorityVote(CrowdEstimator):
    """Estimate each instance by the value of its modal level.

    Ties are resolved deterministically: among the tied levels, the one closest to the
    instance's mean rating; if two are equally close, the lower level. ``posterior_`` (M, K)
    holds the vote shares (its expected value is the mean rating); ``map_level_`` (M,) the
    chosen level index.
    """

    name = "majority"

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) modal values."""
        counts = level_counts(data)  # (M, K)
        shares = counts / counts.sum(axis=1, keepdims=True)
        center = shares @ data.scale.values  # (M,) mean rating
        self.map_level_ = modal_level(counts, data.scale.values, center)
        self.posterior_ = posterior_frame(shares, data)
        return data.scale.values[self.map_level_]
