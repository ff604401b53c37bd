"""The rescues: what a fit does when its plain sweeps crawl, and the answer it had not reached.

A restart can stop, or crawl for hundreds of sweeps, at a slow point: an annotator slowly
leaving one end of (0, 1) (a saddle), an item and its raters moving together a little each
sweep. ``Rescues`` is the one optional hook the step and the race call:

- ``after_plain_sweep`` (``step.make_step``, each plain sweep of the stopping rule in the
  mixture): keeps the last ``flip_window`` reliabilities (``Watch.eps_window``); every
  ``flip_window`` of them the annotators ``escaping`` a saddle are mirrored (``flipped``), and
  when no flip is kept the items' blocks are solved as at a stop (the engine's
  ``settle_items``, ``settle.settle_items``), taken again with the raters of an item leaving
  a slow point faster each window (the escape step, ``_escaping_item``); a sweep from there
  replaces the plain one when its bound is higher.
- ``at_stop`` (``race.advance``, a mixture restart's stop): the same settle; if it moves an
  item by ``settle_move * tol_estimate`` the stop was at a slow point and the run goes on.

After the race, ``still_moving`` names the winner's annotators the fit had not settled, and
``alternative`` is the answer with them carried the way they were going: where its estimates
differ from the winner's, the winner's answer rests on those verdicts (the ensemble).
The rescues write only a run's ``Watch``; the state they find is returned for the step or the
race to take.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..numerics import libm
from .policy import DEFAULT, FitPolicy
from .race import reliability_remaining
from .restarts import RestartRun, Watch

if TYPE_CHECKING:
    from .step import Sweeps


class Rescues:
    """The rescues of one fit over ``engine``'s sweeps (see the module).

    ``flips``: the window's tries at all (annotator flips; with acceleration); ``settles``:
    the items' blocks settled at a window without a kept flip and at a stop (with the exact
    eps step, and an engine that has ``settle_items``).
    """

    def __init__(
        self, engine: Sweeps, flips: bool, settles: bool, policy: FitPolicy = DEFAULT
    ) -> None:
        self.engine, self.flips, self.policy = engine, flips, policy
        self.settle = getattr(engine, "settle_items", None) if settles else None
        # the slopes of the exact eps step's blocks, which run with the settles
        self.slopes = getattr(engine, "eps_slopes", None) if settles else None

    def after_plain_sweep(self, run: RestartRun, new: Any, f: float) -> tuple[Any, float]:
        """``_window_step``, then the slopes of the state it returns join ``Watch.slope_window``
        (the engine's ``eps_slopes``; the window starts again with ``eps_window``)."""
        out = self._window_step(run, new, f)
        watch = run.watch
        g = None if self.slopes is None or not watch.eps_window else self.slopes(out[0])
        if g is None:
            watch.slope_window.clear()
        else:
            watch.slope_window.append(np.asarray(g, dtype=float))
            del watch.slope_window[: -self.policy.flip_window]
        return out

    def _window_step(self, run: RestartRun, new: Any, f: float) -> tuple[Any, float]:
        """A plain sweep's state ``new`` (bound ``f``) of the stopping rule: its reliabilities
        join the window; every ``flip_window`` plain sweeps the annotators ``escaping`` a
        saddle are mirrored, and a sweep from there replaces ``new`` if its bound is finite and
        higher (the window then starts again). If no flip is kept, the items' blocks (and
        those of the annotators ``still_moving``, with their items) are solved as at a stop,
        with those of the raters of an item leaving a slow point (``_escaping_item``) when the
        engine names them (``raters``), and a sweep from there replaces ``new`` if it moved an
        item by ``window_settle_move`` or more and its bound is finite and higher."""
        p, engine, watch = self.policy, self.engine, run.watch
        window = watch.eps_window  # the last flip_window plain sweeps since an accepted flip
        window.append(np.array(new.eps, dtype=float, copy=True))
        del window[: -p.flip_window]
        plain = len(run.trace) + 1 - run.polish_from  # plain sweeps so far, this one too
        if not self.flips or plain % p.flip_window:
            return new, f
        idx = escaping(window, p.flip_growth)
        if idx.size:
            cand, fc, _ = engine.sweep(flipped(new, idx), True, None)
            if cand is not None and np.isfinite(fc) and fc > f:
                window.clear()
                watch.settle_top = None
                return cand, fc
        if self.settle is None:
            return new, f
        moving = still_moving(window, np.size(new.eps), p)
        settled, moved = self.settle(new, moving)
        raters, top_of = getattr(engine, "raters", None), getattr(engine, "settle_top", None)
        top = None if top_of is None else top_of(run.restart)
        item = _escaping_item(watch, moved, top, p)
        if item is not None and raters is not None:
            settled, moved = self.settle(new, moving | raters(item))
            if moved.size and moved.max() >= p.window_settle_move:
                watch.settle_top = None  # as after any move the sweep from the settle takes
        if moved.size == 0 or not moved.max() >= p.window_settle_move:
            return new, f
        cand, fc, _ = engine.sweep(settled, True, None)
        if cand is not None and np.isfinite(fc) and fc > f:
            return cand, fc
        return new, f

    def at_stop(self, run: RestartRun, tol_estimate: float) -> Any | None:
        """At a mixture restart's stop, each item's own block solved with the annotators
        held, and the block of each annotator ``still_moving`` over the run's last plain
        sweeps with the items it rated. If that moves an item's mean by ``settle_move *
        tol_estimate`` or more, the stop was at a slow point of that item or annotator (the
        sweeps would have got there over many more): the settled state, from which the run
        goes on (its next sweep's bound is not below the last: every round is a coordinate
        update; the window starts again). Else None. At most ``max_settles`` times a run;
        never without settles or with the bound-only rule (``tol_estimate`` 0)."""
        p, watch = self.policy, run.watch
        if self.settle is None or tol_estimate <= 0 or watch.settles >= p.max_settles:
            return None
        watch.settles += 1
        moving = still_moving(watch.eps_window, np.size(run.state.eps), p)
        new, moved = self.settle(run.state, moving)
        if moved.size == 0 or not moved.max() >= p.settle_move * tol_estimate:
            return None
        watch.eps_window.clear()
        watch.slope_window.clear()
        watch.settle_top = None
        return new


def escaping(window: Sequence[np.ndarray], growth: float = DEFAULT.flip_growth) -> np.ndarray:
    """Annotators whose reliability is slowly leaving its side of 0.5: ``window`` (W,) of eps
    (N,) from consecutive sweeps; returns the indices whose distance from their side's end
    (``1 - eps`` above 0.5, ``eps`` below, from the last sweep) grows by more than ``growth``
    a sweep in log, least squares over the window (an escape from a saddle grows
    geometrically). Annotators at exactly 0 or 1 are left out."""
    e = np.asarray(window, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        side = np.where(e[-1] > 0.5, libm.log1p(-e), libm.log(e))
    ok = np.all(np.isfinite(side), axis=0)
    side = np.where(ok, side, 0.0)
    t = np.arange(len(e)) - 0.5 * (len(e) - 1)
    # sums, not ``@``: BLAS kernels differ by CPU, and a slope at the threshold would flip
    slope = np.sum(t[:, None] * (side - side.mean(axis=0)), axis=0) / np.sum(t * t)
    return np.flatnonzero(ok & (slope > growth))


def still_moving(
    window: Sequence[np.ndarray], n_annotators: int, policy: FitPolicy = DEFAULT
) -> np.ndarray:
    """(N,) bool: the annotators the fit had not settled over its last plain sweeps
    (``window``, a run's ``Watch.eps_window``): their reliability was still leaving its side's
    end (``escaping`` at ``moving_growth``), or is estimated to move by more than
    ``moving_drift`` still (``race.reliability_remaining``). Their verdict, and their items'
    estimates, may change with a longer fit. All False with fewer than
    ``moving_min_sweeps`` sweeps (a fit stopped before its plain sweeps, or just after an
    accepted flip)."""
    leaving, drifting, _ = still_moving_parts(window, n_annotators, policy)
    return leaving | drifting


def still_moving_parts(
    window: Sequence[np.ndarray], n: int, policy: FitPolicy = DEFAULT
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``still_moving``'s two halves, (N,) bool each: leaving their end, and otherwise
    drifting; with the estimated remaining change (N,) (zeros below ``moving_min_sweeps``)."""
    leaving, remaining = np.zeros(n, dtype=bool), reliability_remaining(window, n, policy)
    if len(window) >= policy.moving_min_sweeps:
        leaving[escaping(window, policy.moving_growth)] = True
    return leaving, (remaining > policy.moving_drift) & ~leaving, remaining


def flipped(state: Any, idx: np.ndarray) -> Any:
    """``state`` with the reliability of annotators ``idx`` mirrored (``eps -> 1 - eps``): the
    other side of the saddle they are leaving; the next sweep moves their ratings' q(y) and
    their items' q(z) with it."""
    eps = np.array(state.eps, dtype=float, copy=True)
    eps[idx] = 1.0 - eps[idx]
    return dataclasses.replace(state, eps=eps)


def _escaping_item(
    watch: Watch,
    moved: np.ndarray,
    top: tuple[Any, float] | None = None,
    policy: FitPolicy = DEFAULT,
) -> Any | None:
    """The item a window's settle moved most, if no item moved by ``window_settle_move`` and
    it is the item the last window's settle moved most, by more than then and by
    ``escape_floor`` at least; else None. ``moved``: each item's move (M,), or the largest
    only, with ``top`` = ``(item, move)`` from the engine (``settle_top``; any key its
    ``raters`` takes). Keeps the item and its move in ``watch.settle_top`` for the next
    window (None after a larger move)."""
    last, watch.settle_top = watch.settle_top, None
    if moved.size == 0 or not moved.max() < policy.window_settle_move:
        return None  # a move the sweep from the settle takes
    if top is None:
        top = (int(np.argmax(moved)), float(moved.max()))
    watch.settle_top = top
    if last is None or last[0] != top[0] or not top[1] > max(last[1], policy.escape_floor):
        return None
    return top[0]


def alternative_start(state: Any, window: Sequence[np.ndarray], policy: FitPolicy = DEFAULT) -> Any:
    """Where the verdicts the fit had not settled (``still_moving`` over ``window``, the
    winner's ``Watch.eps_window``) could go: ``state`` with the reliability of the annotators
    leaving their end mirrored (``flipped``: the other side of the saddle) and that of those
    drifting carried by their estimated remaining change (``race.reliability_remaining``) in
    the direction they moved over its last two windows, within ``[eps_pack, 1 - eps_pack]``
    (mirroring a drift, 0.27 to 0.73, would only send it back)."""
    e = np.asarray(window, dtype=float)
    leaving, drifting, remaining = still_moving_parts(window, e.shape[1], policy)
    s = flipped(state, np.flatnonzero(leaving))
    if drifting.any():
        toward = np.sign(e[-1] - e[-1 - 2 * policy.window])
        eps = np.asarray(s.eps, dtype=float).copy()
        eps[drifting] += toward[drifting] * remaining[drifting]
        eps[drifting] = np.clip(eps[drifting], policy.eps_pack, 1.0 - policy.eps_pack)
        s = dataclasses.replace(s, eps=eps)
    return s


def alternative(
    engine: Sweeps, state: Any, window: Sequence[np.ndarray], policy: FitPolicy = DEFAULT
) -> tuple[Any, float, int]:
    """The answer with the still-moving annotators' verdicts as they could go
    (``alternative_start`` from the winner's ``state`` and ``window``), then plain sweeps of
    the mixture until the bound's relative change is below ``polish_tol`` or after
    ``alternative_max_sweeps``. Returns ``(state, bound, sweeps)``.

    Another optimum near the winner's, past the verdicts the fit had not settled: where its
    estimates differ from the winner's, the winner's answer rests on those verdicts
    (``OrdinalMixture``'s ensemble). The sweeps may carry an annotator back to where it was;
    the result says where they end."""
    s, f, n = alternative_start(state, window, policy), -np.inf, 0
    while n < policy.alternative_max_sweeps:
        s, f_new, _ = engine.sweep(s, True, None)
        n += 1
        done = abs(f_new - f) < policy.polish_tol * abs(f_new)
        f = f_new
        if done or not np.isfinite(f):
            break
    return s, float(f), n
