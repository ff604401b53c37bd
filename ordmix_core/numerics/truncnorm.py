"""Truncated-normal moments, log-normaliser and entropy, stable in both tails.

All functions take arrays of equal shape ``(L,)`` (one entry per rating) and never return
NaN or inf for finite intervals, however far the interval lies in a tail.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import log_ndtr

from . import libm

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)  # libm.log gives these bits too (a test checks)

# The branch thresholds, read by both implementations (this one and ``kernels.tn_scalar``) so
# that the fused sweep follows the reference branch for branch.
#: an interval narrower than this (in sds) is a point: the density is flat across it
NARROW = 1e-6
#: beyond this many sds (the interval's end nearest the mean) Var[x] comes from the
#: exponential tail (relative error ~6/b^2), not from e2 - m^2, which cancels. Measured
#: against mpmath (60 digits): this module's e2 - m^2 loses ~1e-16 b^6 (1e-4 at b = 130,
#: 2e-3 at 160) and crosses the exponential's error near b = 140; the kernel's (erfcx-based)
#: loses only ~1e-16 b^4 and would cross near 600, but one threshold keeps the two sweeps
#: equal; the kernel's worst relative error of Var[x] is then 3.5e-4 (at b = 130) instead
#: of 2.4e-5, on intervals more than 130 sds out, whose Var[x] is below 6e-5 of 1/prec.
FAR_TAIL = 130.0


class TNStats(NamedTuple):
    """Statistics of ``N(mean, 1/prec)`` truncated to ``[lo, hi)``; each ``(L,)``."""

    ex: np.ndarray  # E[x]
    var: np.ndarray  # Var[x]
    log_z: np.ndarray  # log(Phi(b) - Phi(a)), a, b the standardised ends
    entropy: np.ndarray  # H[q(x)]


def log_diff_ndtr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(Phi(b) - Phi(a))`` for ``a < b``, computed in the lower tail; shape of ``a``.

    The caller flips intervals so that ``a + b <= 0``; then ``log_ndtr`` is accurate at both ends
    and ``log(-expm1(la - lb))`` keeps the difference precise.
    """
    la = log_ndtr(a)
    lb = log_ndtr(b)
    with np.errstate(divide="ignore"):
        return lb + libm.log(-libm.expm1(la - lb))


def _standardised(lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, prec: np.ndarray) -> tuple:
    """``tn_stats``' first step: ``sd``, ``flip``, the mirrored ends ``a``, ``b``, ``width``,
    ``mid``, ``narrow`` and ``log_z``; each ``(L,)``."""
    sd = 1.0 / np.sqrt(prec)
    a0 = (lo - mean) / sd
    b0 = (hi - mean) / sd
    flip = (a0 + b0) > 0
    a = np.where(flip, -b0, a0)
    b = np.where(flip, -a0, b0)
    width = b - a
    mid = 0.5 * (a + b)
    narrow = width < NARROW  # nearly a point: the density is flat across it
    log_z = np.where(
        narrow,
        libm.log(np.maximum(width, 1e-300)) - 0.5 * mid * mid - _HALF_LOG_2PI,
        log_diff_ndtr(a, np.where(narrow, a + 1.0, b)),
    )
    return sd, flip, a, b, width, mid, narrow, log_z


def tn_log_z(lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, prec: np.ndarray) -> np.ndarray:
    """``tn_stats(lo, hi, mean, prec).log_z`` (the same bits) without the other statistics."""
    return _standardised(lo, hi, mean, prec)[-1]


def tn_stats(lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, prec: np.ndarray) -> TNStats:
    """Moments, log-normaliser and entropy of a truncated normal; all inputs ``(L,)``.

    Works on the standardised interval ``[a, b] = sqrt(prec) * ([lo, hi] - mean)``, mirrored
    to the lower tail when its centre is above zero (the statistics are mirror-symmetric).
    """
    sd, flip, a, b, width, mid, narrow, log_z = _standardised(lo, hi, mean, prec)
    # standard normal density over Z at the two ends, in log space
    pa = libm.exp(-0.5 * a * a - _HALF_LOG_2PI - log_z)
    pb = libm.exp(-0.5 * b * b - _HALF_LOG_2PI - log_z)
    m = np.clip(np.where(narrow, mid, pa - pb), a, b)  # E[s] in the mirrored frame
    e2 = 1.0 + (a * pa - b * pb)  # E[s^2]
    # a log-concave density on [a, b] has variance at most (b - a)^2 / 12 (uniform's)
    vmax = np.minimum(1.0, width * width / 12.0)
    v = np.where(narrow, vmax, np.clip(e2 - m * m, 0.0, vmax))
    # far in the tail e2 - m^2 cancels; there the density is exponential with rate -b
    far = (b < -FAR_TAIL) & ~narrow
    if np.any(far):
        rate = -b[far]
        w = width[far]
        x = rate * w
        q = libm.exp(-x)
        # variance of an exponential(rate) truncated to [0, w]; its series where x is small
        exact = 1.0 / rate**2 - w * w * q / np.maximum(1.0 - q, 1e-300) ** 2
        series = w * w * (1.0 / 12.0 - x * x / 240.0)
        v[far] = np.clip(np.where(x > 1e-2, exact, series), 0.0, vmax[far])
    e2 = v + m * m
    ex = mean + np.where(flip, -m, m) * sd
    entropy = _HALF_LOG_2PI + libm.log(sd) + log_z + 0.5 * e2
    return TNStats(ex=ex, var=v * sd * sd, log_z=log_z, entropy=entropy)
