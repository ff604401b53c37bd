"""Per-instance median of the rating values."""

from __future__ import annotations

import numpy as np

from ...data.crowd import CrowdData
from ..base import CrowdEstimator


class MedianRating(CrowdEstimator):
    """Estimate each instance by the median of its ratings' scale values.

    With an even number of ratings the estimate is the mean of the two middle values
    (so ``{1, 2}`` gives 1.5, which may lie between scale levels).
    """

    name = "median"

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) medians."""
        m = data.n_instances
        order = np.lexsort((data.level, data.inst))  # by instance, then level
        vals = data.scale.values[data.level[order]]  # (L,) sorted values
        n = np.bincount(data.inst, minlength=m)  # (M,) every instance has >= 1 rating
        start = np.concatenate([[0], np.cumsum(n)[:-1]])
        return 0.5 * (vals[start + (n - 1) // 2] + vals[start + n // 2])
