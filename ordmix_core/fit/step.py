"""One step of a restart: the engine's sweep, SQUAREM's proposal and the exact eps step.

VB coordinate ascent crawls when annotators' spam probability and expertise are coupled: the
bound creeps up by tenths for hundreds of sweeps. From three consecutive states
``s0 -> s1 -> s2`` SQUAREM (Varadhan & Roland 2008) proposes ``s0 - 2a r + a^2 v``
(``r = s1 - s0``, ``v = s2 - 2 s1 + s0``, ``a = -|r|/|v|``) in an unconstrained
parametrisation (logs of precisions, shapes and rates, logit of eps). The step sweeps once
from the proposal and keeps the result only if its bound beats the plain sweep's, so the
bound trace never decreases.

The math works per parameter group (``GROUPS``), so a partitioned engine can split it: each
side runs ``group_terms`` and ``sq_norms`` on the groups it holds (the Dask engine's blocks
the per-instance ones, its client the rest), the squared norms are summed per group,
``step_length`` turns the totals into ``a`` and ``extrapolate`` gives each group's proposal.
``squarem_proposal`` is the one-process composition of these pieces.

``make_step`` is the step both engines take; the engine supplies its sweeps (``Sweeps``), and
the rescues (``rescues.Rescues``) may replace a plain sweep of the stopping rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from scipy.special import expit, logit

from ..numerics import libm
from ..vb.problem import State
from ..vb.updates import EPS_FLOOR
from .policy import DEFAULT, FitPolicy
from .restarts import RestartRun, StepFn

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
#: State fields SQUAREM does not extrapolate: the proposal takes them from the latest state
#: (lambda_b, a learned spam distribution; the sweep from the proposal updates them as usual)
CARRIED = ("lam_b", "pi", "dir_a", "kappa")


def group_value(s: object, group: str) -> np.ndarray:
    """The group's array of a state (any object with ``State``'s attribute names)."""
    if group == "ab":
        return np.array([s.alpha, s.beta], dtype=float)
    x = getattr(s, group, None)
    return np.zeros(0) if x is None else x


def pack(group: str, x: np.ndarray, eps_pack: float = DEFAULT.eps_pack) -> np.ndarray:
    """One group in the unconstrained parametrisation (mu_m as is, logit of eps clipped to
    ``[eps_pack, 1 - eps_pack]``, else log)."""
    if group in ("mu_m", "bias_mean"):
        return x
    if group == "eps":
        return logit(np.clip(x, eps_pack, 1 - eps_pack))
    return libm.log(x)


def group_terms(
    group: str,
    x0: np.ndarray,
    x1: np.ndarray,
    x2: np.ndarray,
    eps_pack: float = DEFAULT.eps_pack,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p0, r, v)`` of one group from its values in ``s0, s1, s2``; each as the input."""
    p0, p1, p2 = (pack(group, x, eps_pack) for x in (x0, x1, x2))
    return p0, p1 - p0, p2 - 2 * p1 + p0


def sq_norms(r: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """``(|r|^2, |v|^2)`` of one group (or of a block's share of it)."""
    # plain sums, not np.dot: a BLAS call wakes OpenBLAS threads that then spin beside numba
    return float(np.square(r).sum()), float(np.square(v).sum())


def step_length(
    r2: Sequence[float], v2: Sequence[float], max_step: float = DEFAULT.max_step
) -> float | None:
    """``a`` from the per-group squared norms (in ``GROUPS`` order), or None if unusable."""
    nr = np.sqrt(sum(r2))
    nv = np.sqrt(sum(v2))
    if not (np.isfinite(nr) and np.isfinite(nv)) or nv == 0.0 or nr == 0.0:
        return None
    a = -min(nr / nv, max_step)
    if a > -1.0:  # no longer than a plain double step: nothing to gain
        return None
    return a


def extrapolate(
    group: str, p0: np.ndarray, r: np.ndarray, v: np.ndarray, a: float, lo: float, hi: float
) -> np.ndarray | None:
    """The group's proposal ``s0 - 2a r + a^2 v`` back in its own parametrisation.

    mu_m is clipped to ``[lo, hi]`` (the outer thresholds), eps to the sweep's own floor
    ``[EPS_FLOOR, 1 - EPS_FLOOR]``; None when a positive group is not finite and > 0
    everywhere (logs beyond +-700 are clipped first: exp overflows past 709).
    """
    q = p0 - 2 * a * r + a * a * v
    with np.errstate(over="ignore", under="ignore"):
        if group == "mu_m":
            return np.clip(q, lo, hi)
        if group == "bias_mean":
            return q
        if group == "eps":
            return np.clip(expit(q), EPS_FLOOR, 1 - EPS_FLOOR)
        x = libm.exp(np.clip(q, -700, 700))
    if not np.all(np.isfinite(x) & (x > 0)):
        return None
    return x


def squarem_proposal(
    s0: State, s1: State, s2: State, lo: float, hi: float, policy: FitPolicy = DEFAULT
) -> State | None:
    """The extrapolated state, or None when the last two steps give no usable direction.

    ``lo``, ``hi``: the outer thresholds, where the means of q(z) are clipped.
    """
    terms = {
        g: group_terms(g, *(group_value(s, g) for s in (s0, s1, s2)), policy.eps_pack)
        for g in GROUPS
    }
    norms = [sq_norms(r, v) for _, r, v in terms.values()]
    a = step_length([n[0] for n in norms], [n[1] for n in norms], policy.max_step)
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
        step's new state): the stopping rule's second half (``race.converged``)."""


class PlainSweeps(Protocol):
    """The rescues' hook at each plain sweep of the stopping rule (``rescues.Rescues``)."""

    def after_plain_sweep(self, run: RestartRun, new: Any, f: float) -> tuple[Any, float]:
        """The step's result in place of the plain sweep's ``(new, f)``, or those."""


def for_history(s: Any) -> Any:
    """``s`` as SQUAREM's history keeps it once it is no longer the current state: without
    its per-rating ``omega``, which no group extrapolates (8 bytes a rating that would
    otherwise stay alive for two more sweeps); a state without one is kept as it is."""
    if getattr(s, "omega", None) is None or not dataclasses.is_dataclass(s):
        return s
    return dataclasses.replace(s, omega=None)


def make_step(
    engine: Sweeps,
    accelerate: bool,
    exact_eps: bool = True,
    rescues: PlainSweeps | None = None,
    policy: FitPolicy = DEFAULT,
) -> StepFn:
    """The ``step(run, spam)`` of ``race.race`` for both engines.

    A plain sweep; with ``accelerate``, every ``squarem_every``-th sweep (once the history
    holds two swept states) a sweep from SQUAREM's proposal follows and replaces the plain one
    if its bound is finite and higher, so the trace never decreases; none once the stopping
    rule asks for plain sweeps (``run.polish_from``, ``race.converged``). Sets
    ``run.truth_share`` and ``run.estimate_change`` (from the state before the step). Once
    swept from, the state before the step is kept (as the history's older state) without its
    per-rating omega (``for_history``), so that at most two omegas are alive at once (the
    state's being swept from and the new one's, then the new one's and a proposal
    candidate's).

    With ``accelerate``, ``exact_eps`` and an engine that has ``eps_block``, every sweep
    of the model with spam after the first starts from the state with each annotator's eps
    at the exact optimum of its block (``updates.eps_block``, from the q(y) of the last sweep
    and the eps they were computed with, ``omega_eps``), instead of eq. (5)'s one EM
    step. The sweep is kept if its bound is finite and not below the last; otherwise the
    plain sweep is made (one extra sweep). An annotator slowly leaving 0 or 1 then moves in a
    few sweeps, not hundreds (``docs/benchmarks.md``).

    Each plain sweep of the stopping rule in the mixture goes to ``rescues`` (its annotator
    flips, its window settles), whose answer is the step's.
    """

    block = getattr(engine, "eps_block", None) if accelerate and exact_eps else None
    every = policy.squarem_every

    def eps_start(run: RestartRun, spam: bool, s: Any) -> Any:
        """The state the sweep starts from: ``s``, or ``s`` with the block-optimal eps."""
        # the mixture only: in the extended model's stage with uniform spam it drove TREC RF10
        # towards the all-spam answer (truth share 0.26 against 0.73; docs/benchmarks.md)
        if block is None or spam is not True or not run.trace or not engine.swept(s):
            return s
        return s if getattr(s, "omega_eps", None) is None else block(s)

    def step(run: RestartRun, spam: bool) -> float:
        s = run.state
        due = accelerate and run.history is not None and len(run.trace) % every == every - 1
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
        if rescues is not None and spam is True and run.polish_from is not None:
            new, f = rescues.after_plain_sweep(run, new, f)
        run.history = (s, new) if swept else None
        run.state = new
        run.truth_share = engine.truth_share(new)
        run.estimate_change = engine.estimate_change(s, new)
        return f

    return step
