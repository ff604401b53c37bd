"""SQUAREM extrapolation of VB sweeps (Varadhan & Roland 2008), kept monotone by a check.

VB coordinate ascent crawls when annotators' spam probability and expertise are coupled: the
bound creeps up by tenths for hundreds of sweeps. From three consecutive states
``s0 -> s1 -> s2`` SQUAREM proposes ``s0 - 2a r + a^2 v`` (``r = s1 - s0``,
``v = s2 - 2 s1 + s0``, ``a = -|r|/|v|``) in an unconstrained parametrisation (logs of
precisions, shapes and rates, logit of eps). The caller sweeps once from the proposal and keeps
the result only if its bound beats the plain sweep's, so the bound trace never decreases.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from .vb import State

_POS = ("lam_m", "tau_shape", "tau_rate", "delta_shape", "delta_rate")
#: largest step length tried; beyond it the proposal is mostly extrapolation noise
MAX_STEP = 8.0


def _pack(s: State) -> list[np.ndarray]:
    return [
        s.mu_m,
        *(np.log(getattr(s, k)) for k in _POS),
        logit(np.clip(s.eps, 1e-12, 1 - 1e-12)),
        np.log([s.alpha, s.beta]),
    ]


def squarem_proposal(s0: State, s1: State, s2: State, lo: float, hi: float) -> State | None:
    """The extrapolated state, or None when the last two steps give no usable direction.

    ``lo``, ``hi``: the outer thresholds, where the means of q(z) are clipped.
    """
    p0, p1, p2 = _pack(s0), _pack(s1), _pack(s2)
    r = [b - a for a, b in zip(p0, p1, strict=True)]
    v = [c - 2 * b + a for a, b, c in zip(p0, p1, p2, strict=True)]
    # plain sums, not np.dot: a BLAS call wakes OpenBLAS threads that then spin beside numba
    nr = np.sqrt(sum(float(np.square(x).sum()) for x in r))
    nv = np.sqrt(sum(float(np.square(x).sum()) for x in v))
    if not (np.isfinite(nr) and np.isfinite(nv)) or nv == 0.0 or nr == 0.0:
        return None
    a = -min(nr / nv, MAX_STEP)
    if a > -1.0:  # no longer than a plain double step: nothing to gain
        return None
    q = [x0 - 2 * a * rx + a * a * vx for x0, rx, vx in zip(p0, r, v, strict=True)]
    with np.errstate(over="ignore", under="ignore"):
        pos = [np.exp(np.clip(x, -700, 700)) for x in q[1:6]]
        alpha, beta = np.exp(np.clip(q[7], -700, 700))
        out = State(
            mu_m=np.clip(q[0], lo, hi),
            lam_m=pos[0],
            tau_shape=pos[1],
            tau_rate=pos[2],
            delta_shape=pos[3],
            delta_rate=pos[4],
            eps=np.clip(expit(q[6]), 1e-10, 1 - 1e-10),
            alpha=float(alpha),
            beta=float(beta),
        )
    arrays = [out.lam_m, out.tau_shape, out.tau_rate, out.delta_shape, out.delta_rate]
    if not all(np.all(np.isfinite(x) & (x > 0)) for x in arrays) or not (
        np.isfinite(out.alpha) and np.isfinite(out.beta) and out.alpha > 0 and out.beta > 0
    ):
        return None
    return out
