"""Continuous-ML: ratings as Gaussian observations with a per-annotator precision."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...data.crowd import CrowdData
from ...data.scale import Scale
from ...errors import InputError
from ..base import CrowdEstimator


class ContinuousML(CrowdEstimator):
    """``r_l ~ N(z_m, 1/tau_n)``, fitted by alternating maximisation.

    Each step sets ``z_m`` to the precision-weighted mean of its ratings, then each annotator's
    variance to the mean squared residual of their ratings. Pure ML degenerates (an annotator
    whose ratings fit exactly gets infinite precision, e.g. one with a single rating), so the
    variance is shrunk toward the pooled residual variance ``s0``::

        1/tau_n = max((sum_n resid^2 + shrinkage * s0) / (count_n + shrinkage), var_floor * step^2)

    with ``step`` the mean spacing of the scale. Stops when no ``z_m`` moves more than ``tol``.
    Learned: ``precision_`` (N,) and ``n_iter_``.
    """

    name = "continuous-ml"

    def __init__(
        self,
        scale: Scale | Sequence[float] | str | None = None,
        max_iter: int = 500,
        tol: float = 1e-6,
        shrinkage: float = 1.0,
        var_floor: float = 0.01,
    ) -> None:
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol
        self.shrinkage = shrinkage
        self.var_floor = var_floor

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) precision-weighted means."""
        if self.max_iter < 1 or self.tol < 0 or self.shrinkage < 0 or self.var_floor <= 0:
            raise InputError(
                "ContinuousML needs max_iter >= 1, tol >= 0, shrinkage >= 0 and var_floor > 0"
            )
        v = data.scale.values
        step = float(np.mean(np.diff(v))) if v.size > 1 else 1.0
        floor = self.var_floor * step * step
        r = data.values  # (L,)
        m, n = data.n_instances, data.n_annotators
        cnt_n = np.bincount(data.ann, minlength=n)
        prec = np.ones(n)
        z = data.per_instance_mean()
        self.n_iter_ = 0
        for it in range(1, self.max_iter + 1):
            resid2 = (r - z[data.inst]) ** 2  # (L,)
            s0 = max(float(resid2.mean()), floor)
            ss = np.bincount(data.ann, weights=resid2, minlength=n)
            var = (ss + self.shrinkage * s0) / np.maximum(cnt_n + self.shrinkage, 1e-12)
            prec = 1.0 / np.maximum(var, floor)
            w = prec[data.ann]  # (L,)
            z_new = np.bincount(data.inst, weights=w * r, minlength=m) / np.bincount(
                data.inst, weights=w, minlength=m
            )
            delta = float(np.max(np.abs(z_new - z)))
            z, self.n_iter_ = z_new, it
            if delta < self.tol:
                break
        self.precision_ = prec
        return z
