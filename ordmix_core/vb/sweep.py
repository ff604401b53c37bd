"""One variational-Bayes sweep of the ordinal-discrete-mixture, and one run of sweeps.

The facade the estimators use: ``Problem`` and ``State`` (``problem.py``), ``sweep`` (every
coordinate update once: x, y, z, tau, delta, then eps, alpha, beta; returns the new state and
its lower bound) and ``run`` (sweeps until the stopping rule of ``restarts.converged``). Two
implementations of the sweep give the same results (to ~1e-12 relative): ``sweep_numpy``
(``reference.py``), the array-at-a-time reference built from ``tn``, ``updates`` and
``bound``, and ``sweep_fused`` (``phases.py``), three fused passes over the ratings compiled
with numba (``kernels.py``; about 5x faster on one core, and it uses every core). ``sweep``
picks the fused one when numba is available (``kernels.USE_JIT``; ``ORDMIX_NO_JIT=1``
switches it off).

The restart schedule (warm-up, successive halving, the choice of the winner) is
``restarts.py``'s, SQUAREM ``accel.py``'s; the Dask engine runs ``phases.py``'s functions per
partition.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..fit import restarts
from ..fit.restarts import Stop
from . import kernels
from .phases import sweep_fused
from .problem import Problem, State
from .reference import sweep_numpy

__all__ = ["Problem", "State", "Stop", "run", "sweep", "sweep_fused", "sweep_numpy"]


def sweep(p: Problem, s: State) -> tuple[State, float]:
    """One pass of coordinate ascent over every factor; returns the new state and F.

    Order (it keeps F monotone with exact updates): q(x) and q(y) from the old q(z), tau,
    delta, eps; q(z); q(tau) with the new q(z) and the old E[delta]; q(delta) with the new
    E[tau]; eps; (alpha, beta). Uses ``sweep_fused`` if ``kernels.USE_JIT``, else
    ``sweep_numpy``.
    """
    if kernels.USE_JIT:
        return sweep_fused(p, s)
    return sweep_numpy(p, s)


def run(
    p: Problem,
    s: State,
    max_iter: int,
    tol: float,
    callback: Callable[[int, float], bool | None] | None = None,
    tol_estimate: float = 0.0,
) -> tuple[State, list[float], bool]:
    """Iterate ``sweep`` from ``s`` until ``|F_t - F_{t-1}| < tol |F_t|`` and (``tol_estimate
    > 0``) the items' means are within ``tol_estimate`` of their fixed point, or ``max_iter``
    sweeps.

    One restart alone, without the schedule (no warm-up, pruning or SQUAREM), for tests,
    benchmarks and exploring one start; the stopping rule is the fit's own
    (``restarts.advance``). Returns the final state, the bound after each sweep and whether
    it converged. ``callback(iteration, F)`` returning ``False`` raises :class:`Stop` with the
    state and trace so far attached (``err.state``, ``err.trace``).
    """
    one = restarts.RestartRun(0, "data", s)

    def step(run: restarts.RestartRun, spam: bool) -> float:
        before = run.state
        run.state, f = sweep(p, before)
        d = np.abs(run.state.mu_m - before.mu_m)
        run.estimate_change = float(d.max()) if d.size else 0.0
        return f

    report = None if callback is None else (lambda restart, it, f: callback(it, f))
    try:
        with np.errstate(over="ignore", under="ignore"):
            restarts.advance(
                one, step, p.spam, max_iter, max_iter, tol, report, 0, None, tol_estimate
            )
    except Stop as err:
        err.state, err.trace = one.state, one.trace
        raise
    return one.state, one.trace, one.converged
