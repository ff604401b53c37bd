"""When a restart stops: the bound's relative change and the items' remaining change.

The stopping rule (``converged``): a restart has converged when one sweep changes its
bound by less than ``tol`` relative (``|F_t - F_{t-1}| < tol |F_t|``) AND the estimated
distance of the items' posterior means to the fixed point is below ``tol_estimate``
(``remaining_change``: the last ``WINDOW`` sweeps' largest changes, extrapolated with their
ratio to the ``WINDOW`` before, Aitken-style; on a slow drift the ratio nears 1 and the fit
goes on). Once the bound has settled the restart continues with plain sweeps (no SQUAREM:
its extrapolations, accepted for a tiny gain of the bound, kick items along flat directions,
so the changes would not decay), and the estimate half must hold at each sweep of two
windows of them. ``tol_estimate = 0`` leaves the bound alone to decide (the earlier rule).
``max_iter`` caps all sweeps of a restart, every stage together (the warm-up at most half).

``run_to_convergence`` runs one restart alone to that rule (tests, benchmarks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..vb.problem import Problem, State
from ..vb.sweep import sweep
from .restarts import CALLBACK_LOCK, Callback, RestartRun, SettleFn, StepFn, Stop

#: sweeps per window of the stopping rule's estimate change: one SQUAREM cycle (a proposal is
#: tried every third sweep), so successive windows hold the same mix of plain and extrapolated
#: steps and their ratio is a rate, not the cycle's jitter
WINDOW = 3
#: the ratio of successive windows is clipped below 1: on a plateau the remaining change is
#: still finite, 99 windows' worth, so the fit goes on until that is below ``tol_estimate``
MAX_RATE = 0.99


#: windows for which the estimates' rule must hold before a restart stops (``converged``): a
#: decay that turns into growth (an annotator starting to leave a saddle) shows within them.
#: Measured on TREC RF10 restart 0: the largest change per sweep reached its minimum at the
#: stop of a rule held for 2 windows, then grew fivefold over 30 sweeps, and a 100x tighter
#: tolerance moved items by 0.085; held for 4, it stops after the turn (0.0035).
#: ``docs/benchmarks.md``: seeds 0-3 of TREC and Web, and the cost in sweeps
HOLD_WINDOWS = 4
#: the fewest plain sweeps, after the bound has settled, at which the estimates' rule can pass:
#: two windows to measure a rate, the rule then held for ``HOLD_WINDOWS`` windows
MIN_PLAIN_SWEEPS = (2 + HOLD_WINDOWS) * WINDOW - 1


#: the bound's relative change below which the plain sweeps start when ``tol`` is tighter (the
#: default ``tol``): a tighter tolerance then continues the default's path rather than taking
#: another (the check of the default against a 100x tighter tolerance)
POLISH_TOL = 1e-6


def remaining_change(changes: list[float]) -> float:
    """Estimated distance of the items' means to the fixed point (Aitken): the last
    ``WINDOW`` sweeps' largest changes summed, ``D``, times ``r / (1 - r)`` with ``r`` the
    ratio of ``D`` to the window before (clipped to [0, ``MAX_RATE``]); inf before two
    windows. ``remaining_changes`` of one column."""
    return float(remaining_changes(np.asarray(changes, dtype=float)[:, None])[0])


def remaining_changes(changes: np.ndarray) -> np.ndarray:
    """``remaining_change`` of each column: ``changes`` (S, N), the change of each of N
    quantities at each of S sweeps; returns (N,) (inf before two windows)."""
    c = np.asarray(changes, dtype=float)
    if len(c) < 2 * WINDOW:
        return np.full(c.shape[1:], np.inf)
    now = c[-WINDOW:].sum(axis=0)
    before = c[-2 * WINDOW : -WINDOW].sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(before > 0, np.clip(now / before, 0.0, MAX_RATE), MAX_RATE)
        return np.where(now == 0.0, 0.0, now * r / (1.0 - r))


def converged(run: RestartRun, tol: float, tol_estimate: float) -> bool:
    """The stopping rule after a sweep of ``run``: the bound changed by less than ``tol``
    relative to it AND (``tol_estimate > 0``) the items' means are within ``tol_estimate`` of
    where they are heading (``remaining_change``).

    With ``tol_estimate > 0`` the plain sweeps start once the bound's relative change is below
    ``max(tol, POLISH_TOL)``, so a tighter ``tol`` follows the default's path and goes on from
    where the default stopped, instead of taking another path to another optimum."""
    if len(run.trace) < 2:
        return False
    f, prev = run.trace[-1], run.trace[-2]
    settled = abs(f - prev) < tol * abs(f)
    if tol_estimate <= 0:
        return settled
    if run.polish_from is None:  # once the bound has settled: plain sweeps from now on
        if abs(f - prev) < max(tol, POLISH_TOL) * abs(f):
            run.polish_from = len(run.changes)
        return False
    if not settled:
        return False
    # held for HOLD_WINDOWS windows of plain sweeps, so that neither a transient's fast decay
    # nor a decay about to turn into growth hides a slow mode (measured on TREC RF10)
    changes = run.changes[run.polish_from :]
    n = len(changes)
    return all(
        remaining_change(changes[: n - k]) < tol_estimate for k in range(HOLD_WINDOWS * WINDOW)
    )


def advance(
    run: RestartRun,
    step: StepFn,
    spam: bool,
    n_iter: int,
    max_iter: int,
    tol: float,
    callback: Callback | None,
    offset: int,
    stop: threading.Event | None = None,
    tol_estimate: float = 0.0,
    settle: SettleFn | None = None,
) -> None:
    """Up to ``n_iter`` more sweeps of ``run``; marks it done at convergence (``converged``)
    or when ``offset`` (sweeps of earlier stages) plus its own reach ``max_iter``. In the
    mixture (``spam is True``), ``settle`` may undo a convergence: the run then goes on from
    the state it left (the estimates' rule starts its windows again).

    Raises :class:`Stop` when the callback returns False or ``stop`` is set (by another
    thread); no report is made after a stop.
    """
    if offset + len(run.trace) >= max_iter:
        run.done = True
        return
    for _ in range(n_iter):
        if stop is not None and stop.is_set():
            raise Stop()
        f = step(run, spam)
        run.trace.append(f)
        run.changes.append(run.estimate_change)
        n = len(run.trace)
        with CALLBACK_LOCK:
            if stop is not None and stop.is_set():
                raise Stop()
            if callback is not None and callback(run.restart, offset + n, f) is False:
                if stop is not None:
                    stop.set()
                raise Stop()
        if converged(run, tol, tol_estimate):
            if settle is None or spam is not True or not settle(run, tol_estimate):
                run.converged = run.done = True
                return
        if offset + n >= max_iter:
            run.done = True
            return


def run_to_convergence(
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
    (``stopping.advance``). Returns the final state, the bound after each sweep and whether
    it converged. ``callback(iteration, F)`` returning ``False`` raises :class:`Stop` with the
    state and trace so far attached (``err.state``, ``err.trace``).
    """
    one = RestartRun(0, "data", s)

    def step(run: RestartRun, spam: bool) -> float:
        before = run.state
        run.state, f = sweep(p, before)
        d = np.abs(run.state.mu_m - before.mu_m)
        run.estimate_change = float(d.max()) if d.size else 0.0
        return f

    report = None if callback is None else (lambda restart, it, f: callback(it, f))
    try:
        with np.errstate(over="ignore", under="ignore"):
            advance(one, step, p.spam, max_iter, max_iter, tol, report, 0, None, tol_estimate)
    except Stop as err:
        err.state, err.trace = one.state, one.trace
        raise
    return one.state, one.trace, one.converged
