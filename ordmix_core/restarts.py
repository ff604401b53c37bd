"""The restart schedule shared by the in-memory and the Dask engine.

Each restart: a warm-up fit without the spam component (``init == 'warm'``), then mixture
sweeps in rounds of doubling length; with pruning the worse half of the unfinished restarts is
dropped after each round (successive halving); then the winner is selected. The engine
supplies ``step(run, spam)``, one sweep of a restart; the schedule never looks inside
``run.state``. Restarts of one round may run side by side through ``map_runs``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from .errors import CollapseWarning, ConvergenceWarning

__all__ = [
    "FitWarning",
    "RestartRun",
    "Stop",
    "advance",
    "fit_warnings",
    "race",
    "race_results",
    "select",
]


@dataclass
class RestartRun:
    """One restart's progress; ``state`` is whatever the engine keeps for it.

    ``truth_share``: mean omega of the last sweep (the share of ratings the truth explains);
    ``history``: the last two states, kept by ``accel.make_step`` for SQUAREM.
    """

    restart: int
    init: str
    state: object
    warmup_trace: list[float] = field(default_factory=list)
    stage_trace: list[float] = field(default_factory=list)  # the pre-mixture stage (issue 11)
    trace: list[float] = field(default_factory=list)
    converged: bool = False
    done: bool = False
    dropped: bool = False
    truth_share: float = 1.0
    history: object = None

    @property
    def lower_bound(self) -> float:
        last = self.trace or self.stage_trace
        return last[-1] if last else -np.inf


def restart_kind(restart: int, warm_start: bool, spam: bool) -> str:
    """``warm`` (no-spam warm-up first), ``data`` (per-item means) or ``random`` (plus noise)."""
    kind = "warm" if (warm_start and spam) else "data"
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
Callback = Callable[[int, int, float], "bool | None"]
MapRuns = Callable[[Callable[[RestartRun], None], list[RestartRun]], None]

#: restarts run in threads report through this lock, so a callback never runs concurrently
_CALLBACK_LOCK = threading.Lock()


def map_sequential(fn: Callable[[RestartRun], None], runs: list[RestartRun]) -> None:
    for run in runs:
        fn(run)


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
) -> None:
    """Up to ``n_iter`` more sweeps of ``run``; marks it done at convergence or ``max_iter``.

    Raises :class:`Stop` when the callback returns False or ``stop`` is set (by another
    thread); no report is made after a stop.
    """
    for _ in range(n_iter):
        if stop is not None and stop.is_set():
            raise Stop()
        f = step(run, spam)
        run.trace.append(f)
        n = len(run.trace)
        with _CALLBACK_LOCK:
            if stop is not None and stop.is_set():
                raise Stop()
            if callback is not None and callback(run.restart, offset + n, f) is False:
                if stop is not None:
                    stop.set()
                raise Stop()
        if n > 1 and abs(f - run.trace[-2]) < tol:
            run.converged = run.done = True
            return
        if n >= max_iter:
            run.done = True
            return


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
) -> bool:
    """Every restart: its warm-up (``init == 'warm'``), then mixture rounds of doubling length.

    A warm restart first runs the no-spam model to convergence (its trace goes to
    ``warmup_trace``), then ``start_mixture(run)`` (the engine resets eps). ``pre_stage``
    (issue 11): a stage key passed to ``step`` instead of ``spam``, run in rounds as the
    mixture is (so pruned the same way) after ``start_mixture``; the restarts it did not drop
    then continue with the mixture rounds (the extended model: the mixture with the spam
    distribution held uniform, then learned); its trace goes to ``stage_trace``. With ``prune``,
    after each round the worse half of the unfinished restarts (collapsed first, then by
    bound) is dropped (successive halving). ``map_runs(fn, runs)`` applies ``fn`` to each
    run, in turn or side by side: each restart's arithmetic is its own, so the result does not
    depend on it. Returns True if the fit was stopped.
    """
    thr = collapse_threshold if spam else -np.inf
    stop = threading.Event()

    def warm_up(run: RestartRun) -> None:
        if run.init != "warm":
            return
        warm = RestartRun(run.restart, "nospam", run.state)
        try:
            advance(warm, step, False, max_iter, max_iter, tol, callback, 0, stop)
        finally:  # stopped or not, the restart continues from the warm-up's state
            run.state, run.warmup_trace = warm.state, warm.trace
            run.truth_share, run.history = warm.truth_share, None
        start_mixture(run)

    def rounds(key: object, todo: list[RestartRun]) -> None:
        budget = prune_start if prune else max_iter
        while True:
            active = [run for run in todo if not run.done]
            if not active:
                return
            map_runs(
                lambda run, n=budget: advance(
                    run,
                    step,
                    key,
                    n,
                    max_iter,
                    tol,
                    callback,
                    len(run.warmup_trace) + len(run.stage_trace),
                    stop,
                ),  # fmt: skip
                active,
            )
            alive = [run for run in active if not run.done]
            if prune and len(alive) > 1:
                alive.sort(key=lambda r: (r.truth_share >= thr, r.trace[-1]), reverse=True)
                for run in alive[(len(alive) + 1) // 2 :]:
                    run.done, run.dropped = True, True
            budget *= 2

    try:
        map_runs(warm_up, runs)
        if pre_stage is not None:
            rounds(pre_stage, runs)
            for run in runs:  # the survivors go on to the mixture from the stage's end
                run.stage_trace, run.trace = run.trace, []
                if not run.dropped:
                    run.done = run.converged = False
                    run.history = None
        rounds(spam, [run for run in runs if not run.dropped])
        return False
    except Stop:
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
    results: list[RestartRun], spam: bool, collapse_threshold: float
) -> tuple[RestartRun, str, bool]:
    """Highest bound among finished, non-collapsed restarts; says why in plain words.

    Returns ``(best, reason, collapsed)`` with ``collapsed`` True when every restart collapsed.
    """
    thr = collapse_threshold if spam else -np.inf
    finished = [res for res in results if not res.dropped] or results
    ok = [res for res in finished if res.truth_share >= thr]
    collapsed = [res for res in results if res.truth_share < thr]
    dropped = [res for res in results if res.dropped]
    if ok:
        best = max(ok, key=lambda res: res.lower_bound)
        reason = (
            f"restart {best.restart} ({best.init} start) has the highest lower bound "
            f"({best.lower_bound:,.1f}) of the {len(ok)} finished restart(s) that did not "
            "collapse"
        )
    else:
        best = max(finished, key=lambda res: res.lower_bound)
        reason = (
            f"every finished restart collapsed to the all-spam solution; restart "
            f"{best.restart} has the highest bound ({best.lower_bound:,.1f})"
        )
    if dropped:
        reason += (
            f"; {len(dropped)} restart(s) were dropped early because their bound was behind "
            "(successive halving)"
        )
    if collapsed and ok:
        top = max(collapsed, key=lambda res: res.lower_bound)
        higher = " (one with a higher bound)" if top.lower_bound > best.lower_bound else ""
        reason += (
            f"; {len(collapsed)} restart(s) collapsed to the all-spam solution (truth share "
            f"< {collapse_threshold:g}){higher} and were not chosen"
        )
    return best, reason, not ok


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
        last = abs(best.trace[-1] - best.trace[-2]) if len(best.trace) > 1 else float("nan")
        warn.append(
            FitWarning(
                ConvergenceWarning,
                f"the chosen restart did not converge within max_iter={max_iter} "
                f"(last change of the bound {last:.3g}, tol {tol:g})",
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
    """One row per restart: how it started, its bound, iterations and how it ended."""
    return pd.DataFrame(
        {
            "restart": [r.restart for r in results],
            "init": [r.init for r in results],
            "lower_bound": [r.lower_bound for r in results],
            "n_iter": [len(r.trace) for r in results],
            "warmup_iter": [len(r.warmup_trace) for r in results],
            "uniform_iter": [len(r.stage_trace) for r in results],
            "converged": [r.converged for r in results],
            "dropped": [r.dropped for r in results],
            "truth_share": [r.truth_share for r in results],
            "collapsed": [spam and r.truth_share < collapse_threshold for r in results],
        }
    ).set_index("restart")
