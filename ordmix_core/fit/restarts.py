"""The restart schedule shared by the in-memory and the Dask engine.

Warm starts (``init == 'warm'``) begin with a fit without the spam component. With the
``shared`` schedule (the default) only the first warm restart runs that warm-up and
every other one branches from its result (``branch``: the engine adds the restart's own keyed
noise), so ten restarts pay for one warm-up; with ``per-restart`` (the schedule before issue
15) each runs its own. Then mixture sweeps in rounds of doubling length; with pruning the worse
half of the unfinished restarts is dropped after each round (successive halving), down to
``KEEP`` restarts that run to the end (the ``shared`` schedule; ``per-restart``: down to one);
then the winner is selected. The engine supplies ``step(run, spam)``, one sweep of a restart,
which also sets ``run.truth_share`` and ``run.estimate_change``; the schedule never looks
inside ``run.state``. Restarts of one round may run side by side through ``map_runs``.

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

The ensemble (``ensemble``): the restarts that finished (not pruned, not collapsed) with a
bound within ``ensemble_gap`` of the best; what differs across them is what the data cannot
decide (``OrdinalMixture`` marks such items and annotators unstable).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..errors import CollapseWarning, ConvergenceWarning

__all__ = [
    "FitWarning",
    "RestartRun",
    "Stop",
    "advance",
    "converged",
    "ensemble",
    "ensemble_gap",
    "fit_warnings",
    "race",
    "race_results",
    "select",
]


@dataclass
class RestartRun:
    """One restart's progress; ``state`` is whatever the engine keeps for it.

    ``truth_share``: mean omega of the last sweep (the share of ratings the truth explains);
    ``estimate_change``: the largest change of an item's posterior mean in the last sweep
    (set by the engine's step) and ``changes`` those of the current stage's sweeps;
    ``history``: the last two states, kept by ``accel.make_step`` for SQUAREM;
    ``shared_iter``: sweeps of the shared warm-up it branched from (counted in ``max_iter``);
    ``key``: its random key (``restart_key``), for the noise of a branch; ``polish_from``:
    the sweep of the stage from which it runs without SQUAREM (``converged``);
    ``pruned_at``: the mixture sweep after which successive halving dropped it; ``stopped``:
    it was still running when the fit was stopped; ``eps_window``: the reliabilities of its
    last plain sweeps (at most ``accel.FLIP_WINDOW``, since the last accepted flip), for
    ``accel.make_step``'s annotator flips and ``accel.still_moving``; ``settles``: how often
    ``accel.make_settle`` was asked at its stop.
    """

    restart: int
    init: str
    state: object
    warmup_trace: list[float] = field(default_factory=list)
    stage_trace: list[float] = field(default_factory=list)  # the pre-mixture stage
    trace: list[float] = field(default_factory=list)
    converged: bool = False
    done: bool = False
    dropped: bool = False
    truth_share: float = 1.0
    history: object = None
    estimate_change: float = np.inf
    changes: list[float] = field(default_factory=list)
    shared_iter: int = 0
    key: int = 0
    polish_from: int | None = None
    pruned_at: int | None = None
    stopped: bool = False
    eps_window: list = field(default_factory=list)  # flips and ``still_moving`` (``accel``)
    settles: int = 0  # times the items' blocks were solved at a stop (``accel.make_settle``)

    @property
    def lower_bound(self) -> float:
        last = self.trace or self.stage_trace
        return last[-1] if last else -np.inf


def restart_kind(restart: int, nospam_warmup: bool, spam: bool) -> str:
    """``warm`` (no-spam warm-up first), ``data`` (per-item means) or ``random`` (plus noise)."""
    kind = "warm" if (nospam_warmup and spam) else "data"
    return "random" if restart > 0 and kind != "warm" else kind


def restart_key(rng: np.random.Generator) -> int:
    """The key of the next restart's random start (one draw per restart, in restart order)."""
    return int(rng.integers(0, 2**63 - 1))


def mixture_starter(runs: list[RestartRun]) -> Callable[[RestartRun], None]:
    """``start_mixture`` for ``race``: after its warm-up a restart's mixture starts from its
    own initial eps (kept now, before any sweep), whatever the warm-up did to it."""
    eps0 = {run.restart: run.state.eps.copy() for run in runs}

    def start_mixture(run: RestartRun) -> None:
        run.state.eps = eps0[run.restart].copy()

    return start_mixture


class Stop(Exception):
    """The fit is to stop: the progress callback said so (or another restart's did)."""


#: ``step(run, spam)``: one sweep of ``run`` (with the spam component or not); updates
#: ``run.state`` and ``run.truth_share`` and returns the new bound
StepFn = Callable[[RestartRun, bool], float]
#: ``settle(run, tol_estimate)`` at a mixture restart's stop: True when it moved the run's
#: state on and the run must go on sweeping (``accel.make_settle``)
SettleFn = Callable[[RestartRun, float], bool]
Callback = Callable[[int, int, float], "bool | None"]
MapRuns = Callable[[Callable[[RestartRun], None], list[RestartRun]], None]

#: restarts run in threads report through this lock, so a callback never runs concurrently
_CALLBACK_LOCK = threading.Lock()


def map_sequential(fn: Callable[[RestartRun], None], runs: list[RestartRun]) -> None:
    for run in runs:
        fn(run)


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
        with _CALLBACK_LOCK:
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


#: the restart schedules (``OrdinalMixture(schedule=...)``): ``shared``, one no-spam warm-up
#: that the other warm restarts branch from, halving down to ``KEEP``; ``per-restart``, the
#: schedule before issues 14-15 (a warm-up each with the fit's own tolerances, halving down to
#: one, no resuming), kept to reproduce earlier results
SCHEDULES = ("shared", "per-restart")
#: the stopping rule of the shared warm-up and of a pre-stage (``shared``), fixed: they are
#: the mixture's start, which must not move when a user tightens ``tol`` for a more precise
#: answer
WARMUP_TOL = 1e-6
WARMUP_TOL_ESTIMATE = 0.0  # the bound alone: a start need not be polished
#: successive halving stops dropping restarts when this many are left (``shared``): they run
#: to the end, so the fit sees whether near-tied optima disagree (``ensemble``)
KEEP = 2

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
    schedule: str = "per-restart",
    branch: BranchFn | None = None,
    settle: SettleFn | None = None,
) -> bool:
    """Every restart: its warm-up (``init == 'warm'``), then mixture rounds of doubling length.

    A warm restart first runs the no-spam model (its trace goes to ``warmup_trace``) to
    convergence or half of ``max_iter``, then ``start_mixture(run)`` (the engine resets eps).
    With ``schedule='shared'`` (and ``branch``) only the first warm restart does, with the
    fixed ``WARMUP_TOL`` / ``WARMUP_TOL_ESTIMATE`` (a ``pre_stage`` too: only the last stage
    follows ``tol`` and ``tol_estimate``); the others start from ``branch(its final
    state, run)`` (``shared_iter`` records the warm-up's sweeps). ``pre_stage``: a
    stage key passed to ``step`` instead of ``spam``, run in rounds as the mixture is (so
    pruned the same way) after ``start_mixture``; the restarts it did not drop then continue
    with the mixture rounds (the extended model: the mixture with the spam distribution held
    uniform, then learned); its trace goes to ``stage_trace``. With ``prune``, after each
    round the worse half of the unfinished restarts (collapsed first, then by bound) is
    dropped (successive halving), never below ``KEEP`` with the shared schedule; there, if
    every restart that finished then collapsed, the dropped ones are resumed where they
    stopped and run to the end too (so halving never returns a collapsed fit where running
    every restart would not). ``max_iter`` caps each restart's sweeps of all stages together.
    ``map_runs(fn, runs)`` applies ``fn`` to each run, in turn or side by side: each
    restart's arithmetic is its own, so the result does not depend on it. Returns True if
    the fit was stopped (the restarts still running are marked ``stopped``). ``settle``:
    passed to ``advance`` for the mixture's rounds.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    shared = schedule == "shared"
    keep = KEEP if shared else 1
    thr = collapse_threshold if spam else -np.inf
    stop = threading.Event()
    warm_tol = (WARMUP_TOL, WARMUP_TOL_ESTIMATE) if shared else (tol, tol_estimate)

    def offset(run: RestartRun) -> int:
        return run.shared_iter + len(run.warmup_trace) + len(run.stage_trace)

    def warm_up(run: RestartRun) -> None:
        if run.init != "warm":
            return
        warm = RestartRun(run.restart, "nospam", run.state)
        try:
            advance(
                warm, step, False, max_iter, max_iter // 2, warm_tol[0], callback, 0, stop,
                warm_tol[1],
            )  # fmt: skip
        finally:  # stopped or not, the restart continues from the warm-up's state
            run.state, run.warmup_trace = warm.state, warm.trace
            run.truth_share, run.history = warm.truth_share, None
        start_mixture(run)

    def rounds(key: object, todo: list[RestartRun], budget: int, halve: bool) -> None:
        tols = warm_tol if key == pre_stage else (tol, tol_estimate)
        while True:
            active = [run for run in todo if not run.done]
            if not active:
                return
            map_runs(
                lambda run, n=budget: advance(
                    run, step, key, n, max_iter, tols[0], callback, offset(run), stop,
                    tols[1], settle,
                ),
                active,
            )  # fmt: skip
            alive = [run for run in active if not run.done]
            if halve and len(alive) > keep:
                alive.sort(key=lambda r: (r.truth_share >= thr, r.trace[-1]), reverse=True)
                for run in alive[max((len(alive) + 1) // 2, keep) :]:
                    run.done, run.dropped, run.pruned_at = True, True, len(run.trace)
            budget *= 2

    def stages(todo: list[RestartRun], budget: int, halve: bool) -> None:
        if pre_stage is not None:
            rounds(pre_stage, todo, budget, halve)
            for run in todo:  # the survivors go on to the mixture from the stage's end
                run.stage_trace, run.trace, run.changes = run.trace, [], []
                run.polish_from = None
                if not run.dropped:
                    run.done = run.converged = False
                    run.history = None
        rounds(spam, [run for run in todo if not run.dropped], budget, halve)

    try:
        warm = [run for run in runs if run.init == "warm"]
        if shared and branch is not None and len(warm) > 1:
            warm_up(warm[0])
            for run in warm[1:]:
                run.state = branch(warm[0].state, run)
                run.shared_iter = len(warm[0].warmup_trace)
                run.truth_share, run.history = warm[0].truth_share, None
                start_mixture(run)
            map_runs(warm_up, [run for run in runs if run.init != "warm"])
        else:
            map_runs(warm_up, runs)
        stages(runs, prune_start if prune else max_iter, prune)
        finished = [run for run in runs if not run.dropped]
        if shared and prune and not any(run.truth_share >= thr for run in finished):
            revived = [run for run in runs if run.dropped]
            for run in revived:  # those pruned in a pre-stage resume in the mixture
                run.done, run.dropped, run.pruned_at = False, False, None
                if not run.trace:
                    run.history = None
            rounds(spam, revived, max_iter, False)
        return False
    except Stop:
        for run in runs:
            run.stopped = not run.done
        return True
    finally:
        stop.set()  # on Ctrl-C too: threads still running end at their next sweep


def race_results(runs: list[RestartRun]) -> list[RestartRun]:
    """The restarts to choose from: those with mixture iterations (or a pre-mixture stage's),
    else the warm-ups so far."""
    return [run for run in runs if run.trace or run.stage_trace] or [
        r for r in runs if r.warmup_trace
    ]


def select(
    results: list[RestartRun], spam: bool, collapse_threshold: float, interrupted: bool = False
) -> tuple[RestartRun, str, bool]:
    """Highest bound among the restarts not pruned and not collapsed; says why in plain words.

    ``interrupted``: the fit was stopped, so the candidates are the restarts finished or still
    running at the stop (the wording says so, and says which were pruned before it); when
    none had reached the mixture (``results`` are warm-ups) their last bounds are compared.
    Returns ``(best, reason, collapsed)`` with ``collapsed`` True when every candidate
    collapsed.
    """
    thr = collapse_threshold if spam else -np.inf
    finished = [res for res in results if not res.dropped] or results
    ok = [res for res in finished if res.truth_share >= thr]
    collapsed = [res for res in results if res.truth_share < thr]
    dropped = [res for res in results if res.dropped]
    pool = ok or finished
    best = max(pool, key=lambda res: res.lower_bound)
    if not any(res.trace or res.stage_trace for res in results):
        bound = best.warmup_trace[-1] if best.warmup_trace else -np.inf
        reason = (
            "the fit was stopped during the no-spam warm-up, before any mixture iteration: "
            f"restart {best.restart} is kept, the highest last warm-up bound ({bound:,.1f}) "
            f"of the {len(results)} warm-up(s) run"
        )
        return best, reason, False
    if interrupted:
        running = sum(res.stopped for res in finished)
        reason = (
            f"the fit was stopped: restart {best.restart} ({best.init} start) is kept, the "
            f"highest lower bound ({best.lower_bound:,.1f}) among the {len(pool)} restart(s) "
            f"not pruned ({running} still running at the stop, {len(finished) - running} "
            "finished)"
        )
        if not ok:
            reason += "; every one of them had collapsed to the all-spam solution"
    elif ok:
        reason = (
            f"restart {best.restart} ({best.init} start) has the highest lower bound "
            f"({best.lower_bound:,.1f}) of the {len(ok)} finished restart(s) that did not "
            "collapse"
        )
    else:
        reason = (
            f"every finished restart collapsed to the all-spam solution; restart "
            f"{best.restart} has the highest bound ({best.lower_bound:,.1f})"
        )
    if dropped:
        at = ", ".join(str(n) for n in sorted({r.pruned_at for r in dropped if r.pruned_at}))
        verb = "had been pruned before the stop" if interrupted else "were pruned"
        reason += (
            f"; {len(dropped)} restart(s) {verb} by successive halving (the worse half by "
            f"bound, collapsed ones first, after sweep {at} of their stage)"
        )
    if collapsed and ok:
        top = max(collapsed, key=lambda res: res.lower_bound)
        higher = " (one with a higher bound)" if top.lower_bound > best.lower_bound else ""
        reason += (
            f"; {len(collapsed)} restart(s) collapsed to the all-spam solution (truth share "
            f"< {collapse_threshold:g}){higher} and were not chosen"
        )
    return best, reason, not ok


#: near-tied: within this share of the best bound (1e-4: 12 nats on TREC RF10's ~-120,000,
#: well above the bound's change at convergence, tol 1e-6 relative) ...
ENSEMBLE_RTOL = 1e-4
#: ... or within this many nats (posterior odds e^3 ~ 20:1, "strong" evidence) on small data
ENSEMBLE_MIN_NATS = 3.0


def ensemble_gap(best_bound: float) -> float:
    """How far below the best bound a restart still counts as near-tied: ``ENSEMBLE_RTOL`` of
    the bound, at least ``ENSEMBLE_MIN_NATS``."""
    return max(ENSEMBLE_MIN_NATS, ENSEMBLE_RTOL * abs(best_bound))


def ensemble(
    results: list[RestartRun], best: RestartRun, spam: bool, collapse_threshold: float
) -> list[RestartRun]:
    """The restarts near-tied with ``best``: not pruned, not collapsed, with mixture sweeps
    and a bound within ``ensemble_gap`` of ``best``'s; ``best`` first, then by restart."""
    thr = collapse_threshold if spam else -np.inf
    gap = ensemble_gap(best.lower_bound)
    near = [
        res
        for res in results
        if res is not best
        and (res.trace or res.stage_trace)
        and not res.dropped
        and res.truth_share >= thr
        and res.lower_bound >= best.lower_bound - gap
    ]
    return [best, *sorted(near, key=lambda res: res.restart)]


class FitWarning(NamedTuple):
    """A warning about the chosen restart: its class (``errors.py``) and its message."""

    category: type[Warning]
    message: str


def fit_warnings(
    best: RestartRun, collapsed: bool, interrupted: bool, max_iter: int, tol: float
) -> list[FitWarning]:
    """What a user should hear about the chosen restart (collapse, stop, no convergence)."""
    warn = []
    if collapsed:
        warn.append(
            FitWarning(
                CollapseWarning,
                "the fit collapsed: almost every rating is explained as spam, so the estimates "
                "sit at the prior mean. Compare with the no-spam model (spam=False, --spam off) "
                "and check the data.",
            )
        )
    if interrupted:
        warn.append(
            FitWarning(
                ConvergenceWarning,
                "the fit was stopped before every restart finished; best restart so far kept",
            )
        )
    if not best.converged and not interrupted:
        last = float("nan")
        if len(best.trace) > 1:
            last = abs(best.trace[-1] - best.trace[-2]) / max(abs(best.trace[-1]), 1e-300)
        warn.append(
            FitWarning(
                ConvergenceWarning,
                f"the chosen restart did not converge within max_iter={max_iter} sweeps "
                f"(last relative change of the bound {last:.3g}, tol {tol:g}; estimated "
                f"remaining change of an estimate {remaining_change(best.changes):.3g})",
            )
        )
    return warn


def trace_frame(results: list[RestartRun], spam: bool) -> pd.DataFrame:
    """``restart, stage, iteration, lower_bound`` of every sweep (warm-ups as stage nospam, the
    extended model's mixture with the spam distribution held uniform as stage uniform)."""
    rows = []
    for res in results:
        rows.extend((res.restart, "nospam", i, f) for i, f in enumerate(res.warmup_trace, 1))
        rows.extend((res.restart, "uniform", i, f) for i, f in enumerate(res.stage_trace, 1))
        stage = "mixture" if spam else "model"
        rows.extend((res.restart, stage, i, f) for i, f in enumerate(res.trace, 1))
    return pd.DataFrame(rows, columns=["restart", "stage", "iteration", "lower_bound"])


def restarts_frame(
    results: list[RestartRun], spam: bool, collapse_threshold: float
) -> pd.DataFrame:
    """One row per restart: how it started, its bound, sweeps per stage (``shared_iter``: of
    the shared warm-up it branched from) and how it ended (``pruned_at``: the sweep of its
    stage after which successive halving dropped it; ``stopped``: running at a stop)."""
    return pd.DataFrame(
        {
            "restart": [r.restart for r in results],
            "init": [r.init for r in results],
            "lower_bound": [r.lower_bound for r in results],
            "n_iter": [len(r.trace) for r in results],
            "warmup_iter": [len(r.warmup_trace) for r in results],
            "uniform_iter": [len(r.stage_trace) for r in results],
            "shared_iter": [r.shared_iter for r in results],
            "converged": [r.converged for r in results],
            "dropped": [r.dropped for r in results],
            "pruned_at": pd.array([r.pruned_at for r in results], dtype="Int64"),
            "stopped": [r.stopped for r in results],
            "truth_share": [r.truth_share for r in results],
            "collapsed": [spam and r.truth_share < collapse_threshold for r in results],
        }
    ).set_index("restart")
