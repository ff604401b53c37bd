"""The restart schedule shared by the in-memory and the Dask engine (``race``).

Warm starts (``init == 'warm'``) begin with a fit without the spam component. Only the first
warm restart runs that warm-up and every other one branches from its result (``branch``: the
engine adds the restart's own keyed noise), so ten restarts pay for one warm-up. Then mixture
sweeps in rounds of doubling length; with pruning the worse half of the unfinished restarts is
dropped after each round (successive halving), down to ``KEEP`` restarts that run to the end,
in rounds of ``FINAL_ROUND`` sweeps after which one out of reach of the leader stops (its bound
plus the gain projected for it more than ``selection.OUTRUN_GAPS`` near-tie gaps below: it
could neither win nor join the ensemble); then the winner is selected. The engine supplies
``step(run, spam)``, one sweep of a restart, which also sets ``run.truth_share`` and
``run.estimate_change``; the schedule never looks inside ``run.state``. Restarts of one round
may run side by side through ``map_runs``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .restarts import Callback, MapRuns, RestartRun, SettleFn, StepFn, Stop, map_sequential
from .selection import out_of_reach
from .stopping import advance

#: the stopping rule of the shared warm-up and of a pre-stage, fixed: they are
#: the mixture's start, which must not move when a user tightens ``tol`` for a more precise
#: answer
WARMUP_TOL = 1e-6
WARMUP_TOL_ESTIMATE = 0.0  # the bound alone: a start need not be polished
#: successive halving stops dropping restarts when this many are left: they run
#: to the end, so the fit sees whether near-tied optima disagree (``ensemble``)
KEEP = 2
#: once halving is down to ``KEEP``, the last stage runs in rounds of this many sweeps, after
#: each of which a kept restart out of reach of the leader stops (``selection.out_of_reach``)
FINAL_ROUND = 5
#: sweeps per window of the projected gain (``projected_gain``)
GAIN_WINDOW = 20


def projected_gain(trace: Sequence[float], window: int = GAIN_WINDOW) -> float:
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


#: ``branch(source, run)``: the state ``run`` starts its mixture from, made from the shared
#: warm-up's final state ``source`` (the engine adds ``run``'s own keyed noise)
BranchFn = Callable[[object, RestartRun], object]


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
    settle: SettleFn | None = None,
) -> bool:
    """Every restart: its warm-up (``init == 'warm'``), then mixture rounds of doubling length.

    A warm restart first runs the no-spam model (its trace goes to ``warmup_trace``) to
    convergence or half of ``max_iter``, then ``start_mixture(run)`` (the engine resets eps).
    With ``branch`` only the first warm restart does (without, each warm restart its own);
    the warm-up and a ``pre_stage`` stop by the fixed ``WARMUP_TOL`` / ``WARMUP_TOL_ESTIMATE``,
    only the last stage by ``tol`` and ``tol_estimate``; the others start from ``branch(its
    final state, run)`` (``shared_iter`` records the warm-up's sweeps). ``pre_stage``: a
    stage key passed to ``step`` instead of ``spam``, run in rounds as the mixture is (so
    pruned the same way) after ``start_mixture``; the restarts it did not drop then continue
    with the mixture rounds (the extended model: the mixture with the spam distribution held
    uniform, then learned); its trace goes to ``stage_trace``. With ``prune``, after each
    round the worse half of the unfinished restarts (collapsed first, then by bound) is
    dropped (successive halving), never below ``KEEP``, and the last stage then runs in rounds
    of ``FINAL_ROUND`` sweeps after which a restart out of reach of the leader stops
    (``stop_outrun``: marked ``dropped`` and ``outrun``); there, if every restart that
    finished then collapsed, the dropped ones are resumed where they stopped and run to the
    end too (so halving never returns a collapsed fit where running every restart would
    not).
    ``max_iter`` caps each restart's sweeps of all stages together.
    ``map_runs(fn, runs)`` applies ``fn`` to each run, in turn or side by side: each
    restart's arithmetic is its own, so the result does not depend on it. Returns True if
    the fit was stopped (the restarts still running are marked ``stopped``). ``settle``:
    passed to ``advance`` for the mixture's rounds.
    """
    race = _Race(
        step, start_mixture, spam, max_iter, (tol, tol_estimate),
        (WARMUP_TOL, WARMUP_TOL_ESTIMATE), KEEP, collapse_threshold if spam else -np.inf,
        callback, map_runs, pre_stage, settle,
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
    """What ``race``'s steps share: the engine's sweep and the schedule's settings."""

    step: StepFn
    start_mixture: Callable[[RestartRun], None]
    spam: bool
    max_iter: int
    tols: tuple[float, float]  # the mixture's (tol, tol_estimate)
    warm_tols: tuple[float, float]  # the warm-up's and a pre-stage's
    keep: int  # halving stops at this many restarts
    collapse: float  # truth share below which a restart counts as collapsed
    callback: Callback | None
    map_runs: MapRuns
    pre_stage: str | None
    settle: SettleFn | None
    stop: threading.Event = field(default_factory=threading.Event)

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
        try:
            advance(
                warm, self.step, False, self.max_iter, self.max_iter // 2, self.warm_tols[0],
                self.callback, 0, self.stop, self.warm_tols[1],
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
        tol, tol_estimate = self.warm_tols if key == self.pre_stage else self.tols
        while True:
            active = [run for run in todo if not run.done]
            if not active:
                return
            kept = [run for run in todo if not run.dropped]
            final = halve and key != self.pre_stage and 1 < len(kept) <= self.keep
            self.map_runs(
                lambda run, n=FINAL_ROUND if final else budget: advance(
                    run, self.step, key, n, self.max_iter, tol, self.callback,
                    self.offset(run), self.stop, tol_estimate, self.settle,
                ),
                active,
            )  # fmt: skip
            alive = [run for run in active if not run.done]
            if halve and len(alive) > self.keep:
                healthy_first = lambda r: (r.truth_share >= self.collapse, r.trace[-1])  # noqa: E731
                alive.sort(key=healthy_first, reverse=True)
                for run in alive[max((len(alive) + 1) // 2, self.keep) :]:
                    run.done, run.dropped, run.pruned_at = True, True, len(run.trace)
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
        for run in kept:
            if run is leader or run.done or not run.trace:
                continue
            if out_of_reach(run.trace[-1], projected_gain(run.trace), leader.trace[-1]):
                run.done = run.dropped = run.outrun = True
                run.pruned_at = len(run.trace)

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


def race_results(runs: list[RestartRun]) -> list[RestartRun]:
    """The restarts to choose from: those with mixture iterations (or a pre-mixture stage's),
    else the warm-ups so far."""
    return [run for run in runs if run.trace or run.stage_trace] or [
        r for r in runs if r.warmup_trace
    ]
