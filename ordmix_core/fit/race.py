"""The race between restarts, shared by the in-memory and the Dask engine, and its stopping rule.

Warm starts (``init == 'warm'``) begin with a fit without the spam component. Only the first warm
restart runs that warm-up and every other one branches from its result (``branch``: the engine adds
the restart's own keyed noise), so ten restarts pay for one warm-up. Then mixture sweeps in rounds
of doubling length; with pruning the worse half of the unfinished restarts is dropped after each
round (successive halving), down to ``keep`` restarts that run to the end, in rounds of
``final_round`` sweeps after which one out of reach of the leader stops (its bound plus the gain
projected for it more than ``outrun_gaps`` near-tie gaps below: it could neither win nor join the
ensemble). The engine supplies ``step(run, spam)``, one sweep of a restart (``step.make_step``),
which also sets ``run.truth_share`` and ``run.estimate_change``; the race never looks inside
``run.state``. A round's restarts may run side by side (``map_runs``).

The stopping rule (``converged``): one sweep changes the bound by less than ``tol`` relative AND the
items' means are within ``tol_estimate`` of their fixed point (``remaining_change``: the last
window's largest changes extrapolated with their ratio to the window before, Aitken; on a slow drift
the ratio nears 1 and the fit goes on), held for ``hold_windows`` windows of plain sweeps (no
SQUAREM once the bound has settled: its extrapolations kick items along flat directions), and the
annotators have settled (``reliabilities_settled``, ``ends_settled``). With ``tol_estimate = 0`` the
bound alone decides. ``max_iter`` caps all sweeps of a restart, every stage together (the warm-up at
most half). At a mixture restart's stop the rescues (``Rescues.at_stop``) may undo it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..vb.problem import Problem, State
from ..vb.sweep import sweep
from .policy import DEFAULT, FitPolicy
from .restarts import (
    CALLBACK_LOCK,
    Callback,
    MapRuns,
    RestartRun,
    StepFn,
    Stop,
    map_sequential,
    out_of_reach,
)


class AtStop(Protocol):
    """The rescues' hook at a mixture restart's stop (``rescues.Rescues``)."""

    def at_stop(self, run: RestartRun, tol_estimate: float) -> Any | None:
        """The state the run goes on from, or None: the stop stands."""


#: ``branch(source, run)``: the state ``run`` starts its mixture from, made from the shared
#: warm-up's final state ``source`` (the engine adds ``run``'s own keyed noise)
BranchFn = Callable[[object, RestartRun], object]


def mixture_starter(runs: list[RestartRun]) -> Callable[[RestartRun], None]:
    """``start_mixture`` for ``race``: after its warm-up a restart's mixture starts from its
    own initial eps (kept now, before any sweep), whatever the warm-up did to it."""
    eps0 = {run.restart: run.state.eps.copy() for run in runs}

    def start_mixture(run: RestartRun) -> None:
        run.state.eps = eps0[run.restart].copy()

    return start_mixture


def race(
    runs: list[RestartRun],
    step: StepFn,
    start_mixture: Callable[[RestartRun], None],
    *,
    spam: bool,
    max_iter: int,
    tol: float,
    prune: bool,
    prune_start: int,
    collapse_threshold: float,
    callback: Callback | None = None,
    map_runs: MapRuns = map_sequential,
    pre_stage: str | None = None,
    tol_estimate: float = 0.0,
    branch: BranchFn | None = None,
    rescues: AtStop | None = None,
    policy: FitPolicy = DEFAULT,
    park: Callable[[RestartRun], None] | None = None,
    tol_reliability: float = 0.0,
) -> bool:
    """Every restart: its warm-up (``init == 'warm'``), then mixture rounds of doubling length.

    A warm restart first runs the no-spam model (its trace goes to ``warmup_trace``) to
    convergence or half of ``max_iter``, then ``start_mixture(run)`` (the engine resets eps).
    With ``branch`` only the first warm restart does (without, each warm restart its own); the
    warm-up and a ``pre_stage`` stop by the fixed ``warmup_tol`` / ``warmup_tol_estimate``, only
    the last stage by ``tol``, ``tol_estimate`` and ``tol_reliability``; the others start from
    ``branch(its final state, run)`` (``shared_iter`` records the warm-up's sweeps).
    ``pre_stage``: a stage key passed to ``step`` instead of ``spam``, run in rounds as the
    mixture is (so pruned the same way) after ``start_mixture``; the restarts it did not drop
    then continue with the mixture rounds (the extended model: the mixture with the spam
    distribution held uniform, then learned); its trace goes to ``stage_trace``. With ``prune``,
    after each round the worse half of the unfinished restarts (collapsed first, then by bound)
    is dropped (successive halving), never below ``keep``, and the last stage then runs in
    rounds of ``final_round`` sweeps after which a restart out of reach of the leader stops
    (``stop_outrun``: marked ``dropped`` and ``outrun``); there, if every restart that finished
    then collapsed, the dropped ones are resumed where they stopped and run to the end too (so
    halving never returns a collapsed fit where running every restart would not).
    ``max_iter`` caps each restart's sweeps of all stages together. ``map_runs(fn, runs)``
    applies ``fn`` to each run, in turn or side by side (each restart's arithmetic is its
    own). Returns True if the fit was stopped (the restarts still running are marked
    ``stopped``). ``rescues``: asked at each mixture restart's stop (``advance``).
    ``park(run)``: told of each restart dropped, which may free what only a running restart
    needs (a dropped restart may still win; a revived one goes on from its state).
    """
    race = _Race(
        step, start_mixture, spam, max_iter, (tol, tol_estimate, tol_reliability),
        collapse_threshold if spam else -np.inf, callback, map_runs, pre_stage, rescues, policy,
        park,
    )  # fmt: skip
    try:
        # 1. warm-ups: the first warm restart's, which the others branch from (``branch``),
        #    else each warm restart its own
        warm = [run for run in runs if run.init == "warm"]
        if branch is not None and len(warm) > 1:
            race.warm_up(warm[0])
            for run in warm[1:]:
                race.branch_from(warm[0], run, branch)
            map_runs(race.warm_up, [run for run in runs if run.init != "warm"])
        else:
            map_runs(race.warm_up, runs)
        # 2. the stages in rounds of doubling length, the worse half dropped after each
        race.stages(runs, prune_start if prune else max_iter, prune)
        # 3. every restart that finished collapsed: the dropped ones resume to the end
        if prune and not race.any_healthy(runs):
            race.revive(runs)
        return False
    except Stop:
        for run in runs:
            run.stopped = not run.done
        return True
    finally:
        race.stop.set()  # on Ctrl-C too: threads still running end at their next sweep


@dataclass
class _Race:
    """What ``race``'s steps share: the engine's sweep and the race's settings."""

    step: StepFn
    start_mixture: Callable[[RestartRun], None]
    spam: bool
    max_iter: int
    tols: tuple[float, float, float]  # the mixture's (tol, tol_estimate, tol_reliability)
    collapse: float  # truth share below which a restart counts as collapsed
    callback: Callback | None
    map_runs: MapRuns
    pre_stage: str | None
    rescues: AtStop | None
    policy: FitPolicy
    park: Callable[[RestartRun], None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def drop(self, run: RestartRun, outrun: bool = False) -> None:
        """``run`` is done and dropped where it stands (``outrun``: by the out-of-reach stop);
        the engine is told (``park``)."""
        run.done = run.dropped = True
        run.outrun = run.outrun or outrun
        run.pruned_at = len(run.trace)
        if self.park is not None:
            self.park(run)

    @staticmethod
    def offset(run: RestartRun) -> int:
        """Sweeps the restart ran before its current stage."""
        return run.shared_iter + len(run.warmup_trace) + len(run.stage_trace)

    def warm_up(self, run: RestartRun) -> None:
        """A warm restart's no-spam fit (to convergence or half of ``max_iter``), then its
        mixture's start."""
        if run.init != "warm":
            return
        warm = RestartRun(run.restart, "nospam", run.state)
        p = self.policy
        try:
            advance(
                warm, self.step, False, self.max_iter, self.max_iter // 2, p.warmup_tol,
                self.callback, 0, self.stop, p.warmup_tol_estimate, policy=p,
            )  # fmt: skip
        finally:  # stopped or not, the restart continues from the warm-up's state
            run.state, run.warmup_trace = warm.state, warm.trace
            run.truth_share, run.history = warm.truth_share, None
        self.start_mixture(run)

    def branch_from(self, source: RestartRun, run: RestartRun, branch: BranchFn) -> None:
        """``run`` starts its mixture from the shared warm-up ``source`` with its own noise."""
        run.state = branch(source.state, run)
        run.shared_iter = len(source.warmup_trace)
        run.truth_share, run.history = source.truth_share, None
        self.start_mixture(run)

    def rounds(self, key: object, todo: list[RestartRun], budget: int, halve: bool) -> None:
        """Rounds of ``budget`` sweeps, doubling, of stage ``key``; with ``halve`` the worse
        half of the unfinished restarts (collapsed first, then by bound) dropped after each,
        never below ``keep``."""
        p = self.policy
        pre = key == self.pre_stage
        tol, tol_estimate, tol_reliability = (
            (p.warmup_tol, p.warmup_tol_estimate, 0.0) if pre else self.tols
        )
        while True:
            active = [run for run in todo if not run.done]
            if not active:
                return
            kept = [run for run in todo if not run.dropped]
            final = halve and not pre and 1 < len(kept) <= p.keep
            self.map_runs(
                lambda run, n=p.final_round if final else budget: advance(
                    run, self.step, key, n, self.max_iter, tol, self.callback,
                    self.offset(run), self.stop, tol_estimate, self.rescues, p,
                    tol_reliability,
                ),
                active,
            )  # fmt: skip
            alive = [run for run in active if not run.done]
            if halve and len(alive) > p.keep:
                healthy_first = lambda r: (r.truth_share >= self.collapse, r.trace[-1])  # noqa: E731
                alive.sort(key=healthy_first, reverse=True)
                for run in alive[max((len(alive) + 1) // 2, p.keep) :]:
                    self.drop(run)
            if final:
                self.stop_outrun(kept)
            budget *= 2

    def stop_outrun(self, kept: list[RestartRun]) -> None:
        """Stop each kept restart still running whose bound, with its projected gain, is out
        of reach of the leader's (the healthy restart with the highest bound): it could
        neither win nor be near-tied. The rounds are the same sweeps for every kept restart,
        so both bounds are at the same sweep (or the leader's final one) whatever the
        threads."""
        healthy = [run for run in kept if run.trace and run.truth_share >= self.collapse]
        if not healthy:
            return
        leader = max(healthy, key=lambda run: (run.trace[-1], -run.restart))
        p = self.policy
        for run in kept:
            if run is leader or run.done or not run.trace:
                continue
            gain = projected_gain(run.trace, p.gain_window)
            if out_of_reach(run.trace[-1], gain, leader.trace[-1], p):
                self.drop(run, outrun=True)

    def stages(self, todo: list[RestartRun], budget: int, halve: bool) -> None:
        """The pre-stage (if any) in rounds, then the mixture in rounds for its survivors."""
        if self.pre_stage is not None:
            self.rounds(self.pre_stage, todo, budget, halve)
            for run in todo:  # the survivors go on to the mixture from the stage's end
                run.stage_trace, run.trace, run.changes = run.trace, [], []
                run.polish_from = None
                if not run.dropped:
                    run.done = run.converged = False
                    run.history = None
        self.rounds(self.spam, [run for run in todo if not run.dropped], budget, halve)

    def any_healthy(self, runs: list[RestartRun]) -> bool:
        """Whether a restart that was not dropped kept a truth share above the collapse."""
        return any(run.truth_share >= self.collapse for run in runs if not run.dropped)

    def revive(self, runs: list[RestartRun]) -> None:
        """The dropped restarts resume where they stopped and run to the end."""
        revived = [run for run in runs if run.dropped]
        for run in revived:  # those pruned in a pre-stage resume in the mixture
            run.done, run.dropped, run.pruned_at, run.outrun = False, False, None, False
            if not run.trace:
                run.history = None
        self.rounds(self.spam, revived, self.max_iter, False)


def projected_gain(trace: Sequence[float], window: int = DEFAULT.gain_window) -> float:
    """The gain of the bound still to come, projected from the last two windows of ``window``
    sweeps of ``trace`` as a geometric series (each window gaining the last one's ratio to the
    one before); inf before two windows or while the gain is not shrinking."""
    if len(trace) < 2 * window + 1:
        return np.inf
    gain = trace[-1] - trace[-1 - window]
    before = trace[-1 - window] - trace[-1 - 2 * window]
    if gain <= 0.0:
        return 0.0
    if before <= gain:
        return np.inf
    ratio = gain / before
    return gain * ratio / (1.0 - ratio)


def race_results(runs: list[RestartRun]) -> list[RestartRun]:
    """The restarts to choose from: those with mixture iterations (or a pre-mixture stage's),
    else the warm-ups so far."""
    return [run for run in runs if run.trace or run.stage_trace] or [
        r for r in runs if r.warmup_trace
    ]


# --------------------------------------------------------------------------- the stopping rule


def remaining_change(changes: list[float], policy: FitPolicy = DEFAULT) -> float:
    """Estimated distance of the items' means to the fixed point (Aitken): the last window's
    largest changes summed, ``D``, times ``r / (1 - r)`` with ``r`` the ratio of ``D`` to the
    window before (clipped to [0, ``max_rate``]); inf before two windows (``remaining_changes``)."""
    column = np.asarray(changes, dtype=float)[:, None]
    return float(remaining_changes(column, policy)[0])


def remaining_changes(changes: np.ndarray, policy: FitPolicy = DEFAULT) -> np.ndarray:
    """``remaining_change`` of each column: ``changes`` (S, N), the change of each of N
    quantities at each of S sweeps; returns (N,) (inf before two windows)."""
    c = np.asarray(changes, dtype=float)
    w, cap = policy.window, policy.max_rate
    if len(c) < 2 * w:
        return np.full(c.shape[1:], np.inf)
    now = c[-w:].sum(axis=0)
    before = c[-2 * w : -w].sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(before > 0, np.clip(now / before, 0.0, cap), cap)
        return np.where(now == 0.0, 0.0, now * r / (1.0 - r))


def converged(
    run: RestartRun,
    tol: float,
    tol_estimate: float,
    policy: FitPolicy = DEFAULT,
    tol_reliability: float = 0.0,
) -> bool:
    """The stopping rule after a sweep of ``run`` (the module's), the annotators' halves with
    ``tol_reliability > 0``. With ``tol_estimate > 0`` the plain sweeps start once the bound's
    relative change is below ``max(tol, polish_tol)``, so a tighter ``tol`` follows the
    default's path and goes on from where it stopped, not to another optimum."""
    if len(run.trace) < 2:
        return False
    f, prev = run.trace[-1], run.trace[-2]
    settled = abs(f - prev) < tol * abs(f)
    if tol_estimate <= 0:
        return settled
    if run.polish_from is None:  # once the bound has settled: plain sweeps from now on
        if abs(f - prev) < max(tol, policy.polish_tol) * abs(f):
            run.polish_from = len(run.changes)
        return False
    if not settled:
        return False
    changes = run.changes[run.polish_from :]
    n = len(changes)
    items = all(
        remaining_change(changes[: n - k], policy) < tol_estimate
        for k in range(policy.hold_windows * policy.window)
    )
    watch = run.watch
    return (
        items
        and reliabilities_settled(watch.eps_window, tol_reliability, policy)
        and ends_settled(watch.eps_window, watch.slope_window, tol_reliability, policy)
    )


def reliability_remaining(
    window: Sequence[np.ndarray], n: int, policy: FitPolicy = DEFAULT
) -> np.ndarray:
    """(N,) each annotator's remaining change of eps: ``remaining_changes`` of ``window``'s
    (W,) of eps (N,) changes; zeros with fewer than ``moving_min_sweeps`` sweeps."""
    if len(window) < policy.moving_min_sweeps:
        return np.zeros(n)
    return remaining_changes(np.abs(np.diff(np.asarray(window), axis=0)), policy)


def reliabilities_settled(
    window: Sequence[np.ndarray], tol_reliability: float, policy: FitPolicy = DEFAULT
) -> bool:
    """Every reliability of ``window`` (``Watch.eps_window``) within ``tol_reliability`` of
    where it is heading (``reliability_remaining``): one drifting slowly moves each item too
    little a sweep for the items' half to see. True with ``tol_reliability <= 0`` or a window
    too short to tell (the items' half covers the sweeps right after a flip)."""
    if tol_reliability <= 0 or len(window) < policy.moving_min_sweeps:
        return True
    return bool(reliability_remaining(window, np.size(window[-1]), policy).max() < tol_reliability)


def ends_settled(
    eps_window: Sequence[np.ndarray],
    slope_window: Sequence[np.ndarray],
    tol_reliability: float,
    policy: FitPolicy = DEFAULT,
) -> bool:
    """The annotators at an end have settled (``eps_window``, ``slope_window``: (W,) of (N,),
    the plain sweeps' eps and the engine's ``eps_slopes`` there, positive towards 1). One
    pinned (within ``pinned_margin`` of 0 or 1) has not while its slope points inwards or
    falls (least squares) to reach 0 within ``plateau_sweeps``: it then leaves, and its items
    with it. One near (within ``end_margin``) has not while leaving, its log distance to the
    end growing by more than ``flip_growth`` a sweep; one converging inside is
    ``reliabilities_settled``'s. True with ``tol_reliability <= 0`` or too few slopes."""
    n = len(slope_window)
    if tol_reliability <= 0 or n < policy.moving_min_sweeps or not eps_window:
        return True
    eps = np.asarray(eps_window[-policy.window - 1 :], dtype=float)
    w = np.asarray(slope_window, dtype=float)
    distance, outwards = np.minimum(eps, 1.0 - eps), np.where(eps[-1] > 0.5, 1.0, -1.0)
    t = np.arange(n) - (n - 1) / 2.0
    falling = -outwards * (t @ w) / (t @ t)  # towards 0 a sweep, least squares
    pinned = distance[-1] <= policy.pinned_margin
    giving_way = (w[-1] * outwards < 0) | (falling * policy.plateau_sweeps >= np.abs(w[-1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.log(distance[-1] / distance[0]) / policy.window
    leaving = (distance[-1] <= policy.end_margin) & (growth > policy.flip_growth)
    return not bool(np.any((pinned & giving_way) | leaving))


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
    rescues: AtStop | None = None,
    policy: FitPolicy = DEFAULT,
    tol_reliability: float = 0.0,
) -> None:
    """Up to ``n_iter`` more sweeps of ``run``; marks it done at convergence (``converged``)
    or when ``offset`` (sweeps of earlier stages) plus its own reach ``max_iter``. In the
    mixture (``spam is True``), ``rescues.at_stop`` may undo a convergence: the run then goes
    on from the state it gives (the estimates' rule starts its windows again).

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
        if converged(run, tol, tol_estimate, policy, tol_reliability):
            settled = None
            if rescues is not None and spam is True:
                settled = rescues.at_stop(run, tol_estimate)
            if settled is None:
                run.converged = run.done = True
                return
            run.state, run.history = settled, None
            run.polish_from = len(run.changes)
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
    """Sweeps of one restart alone from ``s`` (no warm-up, pruning, SQUAREM or rescues), for
    tests, benchmarks and exploring one start, to the fit's stopping rule (``advance``) or
    ``max_iter``: the final state, the bound after each sweep and whether it converged.
    ``callback(iteration, F)`` returning ``False`` raises :class:`Stop` with the state and
    trace so far attached (``err.state``, ``err.trace``)."""
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
