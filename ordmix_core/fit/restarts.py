"""One restart of a fit: its kind, key and state, the trace of its bound, and how it ended.

A :class:`RestartRun` is what the schedule (``schedule``), the stopping rule (``stopping``)
and the choice of the winner (``selection``) share. The engine supplies ``step(run, spam)``,
one sweep of a restart, which also sets ``run.truth_share`` and ``run.estimate_change``; the
schedule never looks inside ``run.state``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class RestartRun:
    """One restart's progress; ``state`` is whatever the engine keeps for it.

    ``truth_share``: mean omega of the last sweep (the share of ratings the truth explains);
    ``estimate_change``: the largest change of an item's posterior mean in the last sweep
    (set by the engine's step) and ``changes`` those of the current stage's sweeps;
    ``history``: the last two states, kept by ``acceleration.make_step`` for SQUAREM;
    ``shared_iter``: sweeps of the shared warm-up it branched from (counted in ``max_iter``);
    ``key``: its random key (``restart_key``), for the noise of a branch; ``polish_from``:
    the sweep of the stage from which it runs without SQUAREM (``converged``);
    ``pruned_at``: the sweep of its stage after which successive halving dropped it, or after
    which it was stopped out of reach of the leader (``outrun``: ``schedule.race``); ``stopped``:
    it was still running when the fit was stopped; ``eps_window``: the reliabilities of its
    last plain sweeps (at most ``acceleration.FLIP_WINDOW``, since the last accepted flip), for
    ``acceleration.make_step``'s annotator flips and ``acceleration.still_moving``; ``settles``: how
    often ``acceleration.make_settle`` was asked at its stop; ``settle_top``: the item the last
    window's settle moved most and by how much (``acceleration._escaping_item``).
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
    outrun: bool = False
    stopped: bool = False
    eps_window: list = field(default_factory=list)  # flips and ``still_moving`` (``accel``)
    settles: int = 0  # times the items' blocks were solved at a stop (``acceleration.make_settle``)
    settle_top: tuple | None = None  # the last window settle's item and move (``acceleration``)

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
#: state on and the run must go on sweeping (``acceleration.make_settle``)
SettleFn = Callable[[RestartRun, float], bool]
Callback = Callable[[int, int, float], "bool | None"]
MapRuns = Callable[[Callable[[RestartRun], None], list[RestartRun]], None]

#: restarts run in threads report through this lock, so a callback never runs concurrently
CALLBACK_LOCK = threading.Lock()


def map_sequential(fn: Callable[[RestartRun], None], runs: list[RestartRun]) -> None:
    for run in runs:
        fn(run)
