"""The in-memory engine's side of a fit: its sweeps (the fused or reference sweep of ``vb``,
SQUAREM's proposal, the exact eps block, the settle) and the threads that run restarts side
by side.

``OrdinalMixture`` hands ``MemorySweeps`` to the race (``EngineSteps._schedule``: the step and
the rescues run it); the Dask engine has its own (``dask_engine.client._Sweeps``) with the same
methods."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import numpy as np

from ..fit import restarts
from ..fit.settle import settle_items
from ..fit.step import squarem_proposal
from ..vb import kernels
from ..vb import sweep as vb
from ..vb import updates as vb_updates


class MemorySweeps:
    """The in-memory engine's sweeps (``step.Sweeps``): ``vb.sweep`` over all ratings,
    SQUAREM's proposal from whole states."""

    def __init__(self, p: vb.Problem) -> None:
        self.problems = {key: p.at(key) for key in (True, False, "uniform")}
        self.lo, self.hi = p.thresholds[0], p.thresholds[-1]
        self._ann_groups: tuple[np.ndarray, np.ndarray] | None = None

    def sweep(self, state: vb.State, spam: bool, history: tuple | None) -> tuple:
        new, f = vb.sweep(self.problems[spam], state)
        return new, f, None

    def propose(self, s0: vb.State, s1: vb.State, s2: vb.State, extra: None) -> vb.State | None:
        return squarem_proposal(s0, s1, s2, self.lo, self.hi)

    def sweep_proposal(self, proposal: vb.State, spam: bool, states: tuple) -> tuple:
        return vb.sweep(self.problems[spam], proposal)

    @staticmethod
    def swept(state: vb.State) -> bool:
        return state.omega is not None

    def eps_block(self, state: vb.State) -> vb.State:
        """``state`` with each annotator's eps at the exact optimum of its block given the
        other factors (``updates.eps_block``; compiled: ``kernels.eps_block``), from its
        ratings' q(y), which were computed with ``state.omega_eps``."""
        p = self.problems[True]
        start = np.asarray(state.eps, dtype=float)
        if not kernels.USE_JIT:
            eps = vb_updates.eps_block(p.ann, state.omega, state.omega_eps, start)
            return dataclasses.replace(state, eps=eps)
        if self._ann_groups is None:  # once per fit (restarts in threads may both make it)
            self._ann_groups = kernels.annotator_groups(p.ann, p.n_annotators)
        eps = kernels.eps_block(self._ann_groups, state.omega, state.omega_eps, start)
        return dataclasses.replace(state, eps=eps)

    def eps_slopes(self, state: vb.State) -> np.ndarray | None:
        """(N,) the slope of each annotator's eps block at its eps: the derivative of the bound
        over eps with its ratings' q(y) at their optimum (the exact eps step's first Newton
        round, ``updates.eps_block_sums``' g), from ``state``'s q(y), computed with
        ``state.omega_eps``; None without them."""
        if state.omega is None or getattr(state, "omega_eps", None) is None:
            return None
        p = self.problems[True]
        x = vb_updates.eps_block_start(state.eps)
        if kernels.USE_JIT:
            return kernels.eps_block_sums(p.ann, state.omega, state.omega_eps, x)[0]
        used = np.asarray(state.omega_eps, dtype=float)[p.ann]
        a, b = vb_updates.eps_block_terms(state.omega, used)
        return vb_updates.eps_block_sums(p.ann, a, b, x, x.size)[0]

    def settle_items(self, state: vb.State, annotators: np.ndarray) -> tuple[vb.State, np.ndarray]:
        """``state`` with every item's own block solved, and the blocks of ``annotators``
        ((N,) bool) with their items (``settle.settle_items``), and how far each item's mean
        moved."""
        return settle_items(self.problems[True], state, annotators)

    def raters(self, item: int) -> np.ndarray:
        """(N,) bool: the annotators who rated ``item`` (an instance code)."""
        return self.problems[True].raters(item)

    @staticmethod
    def truth_share(state: vb.State) -> float:
        return float(np.mean(state.omega)) if state.omega.size else 1.0

    @staticmethod
    def estimate_change(before: vb.State, after: vb.State) -> float:
        d = np.abs(after.mu_m - before.mu_m)
        return float(d.max()) if d.size else 0.0


class RestartThreads:
    """How many restarts are sweeping in the race's threads right now, so that a restart that
    runs alone (the last finisher's tail; the shared warm-up, on the calling thread) takes
    every core for its passes (``kernels.run_alone``): the same chunks, the same bits. A
    thread counts itself before its first sweep, so two threads never both see themselves
    alone while both run. The threads take turns at Python (``turn``, ``kernels.take_turns``):
    one thread's bookkeeping between passes runs while the other's passes run, instead of
    the two handing the GIL back and forth at every small numpy call."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()
        self.turn = threading.Lock()

    def alone(self) -> bool:
        return self.n <= 1

    def run(self, fn: Callable[[restarts.RestartRun], None], run: restarts.RestartRun) -> None:
        with self.lock:
            self.n += 1
        kernels.run_alone(self.alone)
        self.turn.acquire()
        kernels.take_turns(self.turn)
        try:
            fn(run)
        finally:
            kernels.take_turns(None)
            self.turn.release()
            kernels.run_alone(None)
            with self.lock:
                self.n -= 1
