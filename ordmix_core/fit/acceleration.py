"""SQUAREM extrapolation of VB sweeps (Varadhan & Roland 2008), kept monotone by a check.

VB coordinate ascent crawls when annotators' spam probability and expertise are coupled: the
bound creeps up by tenths for hundreds of sweeps. From three consecutive states
``s0 -> s1 -> s2`` SQUAREM proposes ``s0 - 2a r + a^2 v`` (``r = s1 - s0``,
``v = s2 - 2 s1 + s0``, ``a = -|r|/|v|``) in an unconstrained parametrisation (logs of
precisions, shapes and rates, logit of eps). The caller sweeps once from the proposal and keeps
the result only if its bound beats the plain sweep's, so the bound trace never decreases.

The math works per parameter group (``GROUPS``), so a partitioned engine can split it: each
side runs ``group_terms`` and ``sq_norms`` on the groups it holds (the Dask engine's blocks
the per-instance ones, its client the rest), the squared norms are summed per group,
``step_length`` turns the totals into ``a`` and ``extrapolate`` gives each group's proposal.
``squarem_proposal`` is the one-process composition of these pieces.

``make_step`` is the rule both engines follow: every third sweep of a restart (once two swept
states are kept) is tried again from the proposal; the engine supplies its sweeps
(``Sweeps``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from scipy.special import expit, logit

from ..numerics import libm
from ..vb.problem import State
from .stopping import WINDOW, remaining_changes

if TYPE_CHECKING:
    from .restarts import RestartRun, SettleFn, StepFn

#: the parameter groups, in the order their squared norms are summed (a new variational
#: parameter that SQUAREM should extrapolate is added here; ``ab`` is [alpha, beta])
GROUPS = (
    "mu_m", "lam_m", "tau_shape", "tau_rate", "delta_shape", "delta_rate", "eps", "ab",
    "bias_mean", "bias_prec",
)  # fmt: skip
#: groups a state may lack (None: the model has no bias); empty there, so they add nothing
OPTIONAL_GROUPS = ("bias_mean", "bias_prec")
#: the groups per instance (a partitioned engine keeps them with the instances' ratings)
INSTANCE_GROUPS = ("mu_m", "lam_m")
#: the groups per category (per instance too, at instance granularity)
CATEGORY_GROUPS = ("delta_shape", "delta_rate")
#: groups made unconstrained by a log (``ab`` is ``[alpha, beta]``); checked finite and > 0
_POS = ("lam_m", "tau_shape", "tau_rate", "delta_shape", "delta_rate", "ab", "bias_prec")
#: eps is clipped to [EPS_PACK, 1 - EPS_PACK] before its logit: annotators within 1e-8 of
#: certainty (the update floors eps at 1e-10) all pack to the same value, so their last bits,
#: which differ with the summation order, do not enter the step length through a logit of ~23
#: (with 1e-12 the two engines' accelerated fits drifted apart by up to 2.5e-5 relative over
#: the longer fits of the estimate-aware stopping rule; now ~1e-10)
EPS_PACK = 1e-8
#: largest step length tried; beyond it the proposal is mostly extrapolation noise
MAX_STEP = 8.0


def group_value(s: object, group: str) -> np.ndarray:
    """The group's array of a state (any object with ``State``'s attribute names)."""
    if group == "ab":
        return np.array([s.alpha, s.beta], dtype=float)
    x = getattr(s, group, None)
    return np.zeros(0) if x is None else x


def pack(group: str, x: np.ndarray, eps_pack: float = EPS_PACK) -> np.ndarray:
    """One group in the unconstrained parametrisation (mu_m as is, logit of eps clipped to
    ``[eps_pack, 1 - eps_pack]``, else log)."""
    if group in ("mu_m", "bias_mean"):
        return x
    if group == "eps":
        return logit(np.clip(x, eps_pack, 1 - eps_pack))
    return libm.log(x)


def group_terms(
    group: str, x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, eps_pack: float = EPS_PACK
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p0, r, v)`` of one group from its values in ``s0, s1, s2``; each as the input."""
    p0, p1, p2 = (pack(group, x, eps_pack) for x in (x0, x1, x2))
    return p0, p1 - p0, p2 - 2 * p1 + p0


def sq_norms(r: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """``(|r|^2, |v|^2)`` of one group (or of a block's share of it)."""
    # plain sums, not np.dot: a BLAS call wakes OpenBLAS threads that then spin beside numba
    return float(np.square(r).sum()), float(np.square(v).sum())


def step_length(r2: Sequence[float], v2: Sequence[float]) -> float | None:
    """``a`` from the per-group squared norms (in ``GROUPS`` order), or None if unusable."""
    nr = np.sqrt(sum(r2))
    nv = np.sqrt(sum(v2))
    if not (np.isfinite(nr) and np.isfinite(nv)) or nv == 0.0 or nr == 0.0:
        return None
    a = -min(nr / nv, MAX_STEP)
    if a > -1.0:  # no longer than a plain double step: nothing to gain
        return None
    return a


def extrapolate(
    group: str, p0: np.ndarray, r: np.ndarray, v: np.ndarray, a: float, lo: float, hi: float
) -> np.ndarray | None:
    """The group's proposal ``s0 - 2a r + a^2 v`` back in its own parametrisation.

    mu_m is clipped to ``[lo, hi]`` (the outer thresholds), eps to ``[1e-10, 1 - 1e-10]``;
    None when a positive group is not finite and > 0 everywhere.
    """
    q = p0 - 2 * a * r + a * a * v
    with np.errstate(over="ignore", under="ignore"):
        if group == "mu_m":
            return np.clip(q, lo, hi)
        if group == "bias_mean":
            return q
        if group == "eps":
            return np.clip(expit(q), 1e-10, 1 - 1e-10)
        x = libm.exp(np.clip(q, -700, 700))
    if not np.all(np.isfinite(x) & (x > 0)):
        return None
    return x


def squarem_proposal(
    s0: State, s1: State, s2: State, lo: float, hi: float, eps_pack: float = EPS_PACK
) -> State | None:
    """The extrapolated state, or None when the last two steps give no usable direction.

    ``lo``, ``hi``: the outer thresholds, where the means of q(z) are clipped; ``eps_pack``:
    ``pack``'s clip of eps.
    """
    terms = {
        g: group_terms(g, *(group_value(s, g) for s in (s0, s1, s2)), eps_pack) for g in GROUPS
    }
    norms = [sq_norms(r, v) for _, r, v in terms.values()]
    a = step_length([n[0] for n in norms], [n[1] for n in norms])
    if a is None:
        return None
    out = {}
    for g in GROUPS:
        x = extrapolate(g, *terms[g], a, lo, hi)
        if x is None:
            return None
        out[g] = x
    alpha, beta = out.pop("ab")
    for g in OPTIONAL_GROUPS:
        if getattr(s2, g, None) is None:
            out[g] = None
    return State(**out, alpha=float(alpha), beta=float(beta), **carried(s2))


#: State fields SQUAREM does not extrapolate: the proposal takes them from the latest state
#: (lambda_b, a learned spam distribution; the sweep from the proposal updates them as usual)
CARRIED = ("lam_b", "pi", "dir_a", "kappa")


def carried(s: object) -> dict:
    """``CARRIED`` fields of ``s`` (copied arrays), for a proposal built from ``s``."""
    out = {}
    for k in CARRIED:
        v = getattr(s, k, None)
        out[k] = v.copy() if isinstance(v, np.ndarray) else v
    return out


class Sweeps(Protocol):
    """An engine's sweeps of one restart's state, as ``make_step`` uses them."""

    def sweep(self, state: Any, spam: bool, history: tuple[Any, Any] | None) -> tuple:
        """One sweep from ``state``: ``(new, F, extra)``. ``history`` ``(s0, s1)`` (``s1`` is
        ``state``) when a proposal will follow, so the engine keeps what it needs for it."""

    def propose(self, s0: Any, s1: Any, s2: Any, extra: Any) -> Any | None:
        """SQUAREM's proposal from three consecutive states (``extra``: the last sweep's), or
        None when there is no usable step."""

    def sweep_proposal(self, proposal: Any, spam: bool, states: tuple) -> tuple:
        """One sweep from the proposal: ``(candidate or None if not valid, F)``."""

    def swept(self, state: Any) -> bool:
        """True if ``state`` came from a sweep (not a start): it may enter the history."""

    def truth_share(self, state: Any) -> float:
        """Share of the ratings the truth component explains in ``state``."""

    def estimate_change(self, before: Any, after: Any) -> float:
        """The largest change of an item's posterior mean from ``before`` to ``after`` (the
        step's new state): the stopping rule's second half (``stopping.converged``)."""


def for_history(s: Any) -> Any:
    """``s`` as SQUAREM's history keeps it once it is no longer the current state: without
    its per-rating ``omega``, which no group extrapolates (8 bytes a rating that would
    otherwise stay alive for two more sweeps); a state without one is kept as it is."""
    if getattr(s, "omega", None) is None or not dataclasses.is_dataclass(s):
        return s
    return dataclasses.replace(s, omega=None)


#: the stopping rule's plain sweeps look, every ``FLIP_WINDOW`` sweeps, for annotators leaving a
#: saddle (``escaping``): over the window, ``log(1 - eps)`` of a reliable annotator (``log eps``
#: of an unreliable one) grows by more than ``FLIP_GROWTH`` a sweep (measured on TREC RF10:
#: 1-3% a sweep for hundreds of sweeps before the crossing itself; chosen while the estimates'
#: rule was held for 2 windows, when a TREC refit took 28% of a fit from scratch's sweeps with
#: a window of 15 and 31% with 20: ``docs/benchmarks.md``)
FLIP_WINDOW = 15
FLIP_GROWTH = 0.005
#: an annotator whose reliability, over the winner's last plain sweeps, still leaves its
#: side's end by more than this a sweep (``escaping``) is reported by ``still_moving``:
#: measured on TREC RF10 at the default's stop, the two annotators that a 300x tighter fit
#: carries across 0.5 grow by 0.2-0.4% a sweep, and they are the only ones it reports
MOVING_GROWTH = 0.001
#: ... or whose reliability is estimated to move by more than this still (the stopping rule's
#: Aitken estimate, ``stopping.remaining_changes``, of its changes per sweep): a steady drift
#: between the ends (TREC RF10 seeds 1 and 3: w420, which a 300x tighter fit moves by 0.27)
MOVING_DRIFT = 0.05
#: the fewest plain sweeps over which ``still_moving`` measures (two windows of changes)
MOVING_MIN_SWEEPS = 2 * WINDOW + 1


def escaping(window: Sequence[np.ndarray], growth: float = FLIP_GROWTH) -> np.ndarray:
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


def still_moving(window: Sequence[np.ndarray], n_annotators: int) -> np.ndarray:
    """(N,) bool: the annotators the fit had not settled over its last plain sweeps
    (``window``, a run's ``eps_window``): their reliability was still leaving its side's end
    (``escaping`` at ``MOVING_GROWTH``), or is estimated to move by more than ``MOVING_DRIFT``
    still (``stopping.remaining_changes``). Their verdict, and their items' estimates, may
    change with a longer fit. All False with fewer than ``MOVING_MIN_SWEEPS`` sweeps (a fit
    stopped before its plain sweeps, or just after an accepted flip)."""
    leaving, drifting, _ = still_moving_parts(window, n_annotators)
    return leaving | drifting


def still_moving_parts(
    window: Sequence[np.ndarray], n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``still_moving``'s two halves, (N,) bool each: leaving their end, and otherwise
    drifting; with the estimated remaining change (N,) (zeros below ``MOVING_MIN_SWEEPS``)."""
    leaving, remaining = np.zeros(n, dtype=bool), np.zeros(n)
    if len(window) >= MOVING_MIN_SWEEPS:
        leaving[escaping(window, MOVING_GROWTH)] = True
        remaining = remaining_changes(np.abs(np.diff(np.asarray(window), axis=0)))
    return leaving, (remaining > MOVING_DRIFT) & ~leaving, remaining


def flipped(state: Any, idx: np.ndarray) -> Any:
    """``state`` with the reliability of annotators ``idx`` mirrored (``eps -> 1 - eps``): the
    other side of the saddle they are leaving; the next sweep moves their ratings' q(y) and
    their items' q(z) with it."""
    eps = np.array(state.eps, dtype=float, copy=True)
    eps[idx] = 1.0 - eps[idx]
    return dataclasses.replace(state, eps=eps)


#: every ``FLIP_WINDOW`` plain sweeps without a kept flip, the items' blocks are solved as at a
#: stop (``settle``), and a sweep from there is tried when that moved an item by this much:
#: the escapes the plain sweeps follow one coordinate group at a time (an item's difficulty
#: and estimate with its raters' reliabilities) are then taken in a step. Measured at seeds
#: 0-3 (TREC RF10, Web) and 1M simulated ratings: the same winners, bounds within a nat,
#: gold to 4 digits, 5-19% fewer sweeps (``docs/benchmarks.md``)
WINDOW_SETTLE_MOVE = 1e-3
#: ... and when it moves no item that much, but moves most the item it moved most at the last
#: window, by more than then and by this at least, that item is leaving a slow point faster
#: and faster (an escape grows geometrically) along with raters its own block holds: the
#: settle is taken again with their blocks too (the engine's ``raters``; an engine whose settle
#: returns its largest move only names its top item with ``settle_top``). Measured on a 1M
#: simulated crowd: an item and one of its raters drifted for 130 plain sweeps until the rater
#: was ``still_moving``, and the settle with its block then moved the item by 0.47 at once;
#: taken when the item's settle moves grew (3e-4, 4e-4, ...), 105 fewer sweeps, the items
#: within 0.007 of before; no change at TREC RF10 and Web seeds 0-15 (``docs/benchmarks.md``)
ESCAPE_FLOOR = 0.1 * WINDOW_SETTLE_MOVE
#: times a restart's stop may be undone by its items' blocks (``make_settle``); each costs the
#: estimates' rule its windows again (``stopping.MIN_PLAIN_SWEEPS`` sweeps at least)
MAX_SETTLES = 3
#: a stop is undone when the settle moves an item's mean by this share of ``tol_estimate`` or
#: more: 0.01 at the default, the move the stopping rule allows against a 100x tighter fit
#: (TREC RF10 at seed 2: the settle moved one item by 0.013, and the tighter fit by as much)
SETTLE_MOVE = 1 / 3


def make_settle(engine: Sweeps, enabled: bool) -> SettleFn | None:
    """The ``settle(run, tol_estimate)`` of ``stopping.advance``, or None (not ``enabled``, or
    an engine without ``settle_items``).

    At a mixture restart's stop, each item's own block is solved with the annotators held,
    and the block of each annotator ``still_moving`` over the run's last plain sweeps with
    the items it rated (``settle.settle_items``). If that moves an item's mean by
    ``SETTLE_MOVE * tol_estimate`` or more, the stop was at a slow point of that item or
    annotator (the sweeps would have got there over many more), so the run goes on from the
    settled state: the next sweep starts there (its bound is not below the last: every
    round is a coordinate update), the estimates' rule measures its windows again, and the
    stopping rule's annotator flips count their window again. At most ``MAX_SETTLES`` times a run;
    never with the bound-only rule (``tol_estimate`` 0)."""
    solve = getattr(engine, "settle_items", None) if enabled else None
    if solve is None:
        return None

    def settle(run: RestartRun, tol_estimate: float) -> bool:
        if tol_estimate <= 0 or run.settles >= MAX_SETTLES:
            return False
        run.settles += 1
        new, moved = solve(run.state, still_moving(run.eps_window, np.size(run.state.eps)))
        if moved.size == 0 or not moved.max() >= SETTLE_MOVE * tol_estimate:
            return False
        run.state, run.history = new, None
        run.polish_from = len(run.changes)
        run.eps_window.clear()
        run.settle_top = None
        return True

    return settle


def _flip(
    engine: Sweeps,
    run: RestartRun,
    spam: bool,
    new: Any,
    f: float,
    accelerate: bool,
    settle_items: Any = None,
) -> tuple[Any, float]:
    """A plain sweep's state ``new`` (bound ``f``) of the stopping rule: its reliabilities join
    ``run.eps_window``; every ``FLIP_WINDOW`` plain sweeps (``accelerate``) the annotators
    ``escaping`` a saddle are mirrored, and a sweep from there replaces ``new`` if its bound
    is finite and higher (the window then starts again). If no flip is kept and the engine's
    ``settle_items`` is given, the items' blocks (and those of the annotators ``still_moving``,
    with their items) are solved as at a stop, with those of the raters of an item leaving a
    slow point (``_escaping_item``) when the engine names them (``raters``), and a sweep from
    there replaces ``new`` if it moved an item by ``WINDOW_SETTLE_MOVE`` or more and its
    bound is finite and higher."""
    window = run.eps_window  # the last FLIP_WINDOW plain sweeps since an accepted flip
    window.append(np.array(new.eps, dtype=float, copy=True))
    del window[:-FLIP_WINDOW]
    plain = len(run.trace) + 1 - run.polish_from  # plain sweeps so far, this one too
    if not accelerate or plain % FLIP_WINDOW:
        return new, f
    idx = escaping(window)
    if idx.size:
        cand, fc, _ = engine.sweep(flipped(new, idx), spam, None)
        if cand is not None and np.isfinite(fc) and fc > f:
            window.clear()
            run.settle_top = None
            return cand, fc
    if settle_items is None:
        return new, f
    moving = still_moving(window, np.size(new.eps))
    settled, moved = settle_items(new, moving)
    raters, top_of = getattr(engine, "raters", None), getattr(engine, "settle_top", None)
    item = _escaping_item(run, moved, None if top_of is None else top_of(run.restart))
    if item is not None and raters is not None:
        settled, moved = settle_items(new, moving | raters(item))
        if moved.size and moved.max() >= WINDOW_SETTLE_MOVE:
            run.settle_top = None  # as after any move the sweep from the settle takes
    if moved.size == 0 or not moved.max() >= WINDOW_SETTLE_MOVE:
        return new, f
    cand, fc, _ = engine.sweep(settled, spam, None)
    if cand is not None and np.isfinite(fc) and fc > f:
        return cand, fc
    return new, f


def _escaping_item(
    run: RestartRun, moved: np.ndarray, top: tuple[Any, float] | None = None
) -> Any | None:
    """The item a window's settle moved most, if no item moved by ``WINDOW_SETTLE_MOVE`` and
    it is the item the last window's settle moved most, by more than then and by
    ``ESCAPE_FLOOR`` at least; else None. ``moved``: each item's move (M,), or the largest
    only, with ``top`` = ``(item, move)`` from the engine (``settle_top``; any key its
    ``raters`` takes). Keeps the item and its move in ``run.settle_top`` for the next window
    (None after a larger move)."""
    last, run.settle_top = run.settle_top, None
    if moved.size == 0 or not moved.max() < WINDOW_SETTLE_MOVE:
        return None  # a move the sweep from the settle takes
    if top is None:
        top = (int(np.argmax(moved)), float(moved.max()))
    run.settle_top = top
    if last is None or last[0] != top[0] or not top[1] > max(last[1], ESCAPE_FLOOR):
        return None
    return top[0]


def make_step(engine: Sweeps, accelerate: bool, exact_eps: bool = True) -> StepFn:
    """The ``step(run, spam)`` of ``schedule.race`` for both engines.

    A plain sweep; with ``accelerate``, every third sweep (``len(trace) % 3 == 2``, once the
    history holds two swept states) a sweep from SQUAREM's proposal follows and replaces the
    plain one if its bound is finite and higher, so the trace never decreases; none once the
    stopping rule asks for plain sweeps (``run.polish_from``, ``stopping.converged``). Sets
    ``run.truth_share`` and ``run.estimate_change`` (from the state before the step). Once
    swept from, the state before the step is kept (as the history's older state) without its
    per-rating omega (``for_history``), so that at most two omegas are alive at once (the
    state's being swept from and the new one's, then the new one's and a proposal
    candidate's).

    The stopping rule's plain sweeps of the model with the spam component keep the
    reliabilities of their last ``FLIP_WINDOW`` sweeps (``run.eps_window``, emptied by an
    accepted flip; the winner's gives ``still_moving``). With ``accelerate`` they also try
    annotator flips: every ``FLIP_WINDOW`` of them, the annotators ``escaping`` a saddle get
    their reliability mirrored (``flipped``) and a sweep from there replaces the plain one if
    its bound is finite and higher (one extra sweep per try). An escape the plain sweeps
    follow over hundreds of sweeps is then made in one. With ``accelerate``, ``exact_eps`` and
    an engine that has ``settle_items``, a window without a kept flip tries the items' blocks
    solved as at a stop the same way (``_flip``, ``WINDOW_SETTLE_MOVE``).

    With ``accelerate``, ``exact_eps`` and an engine that has ``eps_block``, every sweep
    of the model with spam after the first starts from the state with each annotator's eps
    at the exact optimum of its block (``updates.eps_block``, from the q(y) of the last sweep
    and the eps they were computed with, ``omega_eps``), instead of eq. (5)'s one EM
    step. The sweep is kept if its bound is finite and not below the last; otherwise the
    plain sweep is made (one extra sweep). An annotator slowly leaving 0 or 1 then moves in a
    few sweeps, not hundreds (``docs/benchmarks.md``).
    """

    block = getattr(engine, "eps_block", None) if accelerate and exact_eps else None
    settle_items = getattr(engine, "settle_items", None) if accelerate and exact_eps else None

    def eps_start(run: RestartRun, spam: bool, s: Any) -> Any:
        """The state the sweep starts from: ``s``, or ``s`` with the block-optimal eps."""
        # the mixture only: in the extended model's stage with uniform spam it drove TREC RF10
        # towards the all-spam answer (truth share 0.26 against 0.73; docs/benchmarks.md)
        if block is None or spam is not True or not run.trace or not engine.swept(s):
            return s
        return s if getattr(s, "omega_eps", None) is None else block(s)

    def step(run: RestartRun, spam: bool) -> float:
        s = run.state
        due = accelerate and run.history is not None and len(run.trace) % 3 == 2
        due = due and run.polish_from is None  # the stopping rule's plain sweeps
        history = run.history if due else None
        start = eps_start(run, spam, s)
        new, f, extra = engine.sweep(start, spam, history)
        if start is not s and not (np.isfinite(f) and f >= run.trace[-1]):
            start = s
            new, f, extra = engine.sweep(s, spam, history)
        swept = engine.swept(s)
        del start  # it may be s itself or share s's omega (eps_start), which goes next
        if swept:  # s is history from here on: its omega is freed before the proposal's sweep
            s = for_history(s)
            run.state, run.history = s, None  # (no other reference to the old s is kept)
            history = None if history is None else (history[0], s)
        if history is not None:
            prop = engine.propose(*history, new, extra)
            if prop is not None:
                cand, fc = engine.sweep_proposal(prop, spam, (*history, new))
                if cand is not None and np.isfinite(fc) and fc > f:
                    new, f = cand, fc
        if spam is True and run.polish_from is not None:
            new, f = _flip(engine, run, spam, new, f, accelerate, settle_items)
        run.history = (s, new) if swept else None
        run.state = new
        run.truth_share = engine.truth_share(new)
        run.estimate_change = engine.estimate_change(s, new)
        return f

    return step
