"""Per-instance mean of the rating values."""

from __future__ import annotations

import numpy as np

from ...data.crowd import CrowdData
from ..base import CrowdEstimator


class MeanRating(CrowdEstimator):
    """Estimate each instance by the mean of its ratings' scale values."""

    name = "mean"

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) means."""
        return data.per_instance_mean()
