"""One variational-Bayes sweep of the ordinal-discrete-mixture, and one run of sweeps.

The facade the estimators use: ``Problem`` and ``State`` (``problem.py``), ``sweep`` (every
coordinate update once: x, y, z, tau, delta, then eps, alpha, beta; returns the new state and
its lower bound; ``fit.race.run_to_convergence`` runs sweeps to the stopping rule). Two
implementations of the sweep give the same results (to ~1e-12 relative): ``sweep_numpy``
(``reference.py``), the array-at-a-time reference built from ``tn``, ``updates`` and
``bound``, and ``sweep_fused`` (``phases.py``), three fused passes over the ratings compiled
with numba (``kernels.py``; about 5x faster on one core, and it uses every core). ``sweep``
picks the fused one when numba is available (``kernels.USE_JIT``; ``ORDMIX_NO_JIT=1``
switches it off).

The race between restarts (warm-up, successive halving) is ``fit/race.py``'s, the choice of
the winner ``fit/restarts.py``'s, SQUAREM ``fit/step.py``'s; the Dask engine runs
``phases.py``'s functions per partition.
"""

from __future__ import annotations

from . import kernels
from .phases import sweep_fused
from .problem import Problem, State
from .reference import sweep_numpy

__all__ = ["Problem", "State", "sweep", "sweep_fused", "sweep_numpy"]


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
