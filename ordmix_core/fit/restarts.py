"""A restart: its record, its start keyed on IDs, and the choice among finished restarts.

A :class:`RestartRun` is what the race (``race``), the step (``step``) and the rescues
(``rescues``) share: the race writes its traces and how it ended, the step its state, and the
rescues their own record (``Watch``). Its start (``init_instances``, ``init_globals``; the
branches from the shared warm-up, ``branch_instances``, ``branch_annotators``): restart 0
from the per-item means, restart r > 0 with noise keyed on the instance and annotator IDs
(``numerics/keyed_random.py``) and on the restart's key, drawn from the fit's Generator, so
any partition of the data agrees (the Dask engine calls the same functions per block).

After the race: the winner (``select``), the ensemble of near-tied restarts (``ensemble``:
the restarts that finished, not pruned nor collapsed, within ``ensemble_gap`` of the best;
what differs across them is what the data cannot decide), what is out of its reach
(``out_of_reach``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..numerics import libm
from ..numerics.keyed_random import keyed_normal, keyed_uniform
from .policy import DEFAULT, FitPolicy


@dataclass
class Watch:
    """What the rescues keep of a restart's plain sweeps (written by ``rescues`` alone).

    ``eps_window``: the reliabilities of its last plain sweeps (at most ``flip_window``,
    since the last accepted flip or settle), for the flips and ``rescues.still_moving``;
    ``slope_window``: the same sweeps' slopes of each annotator's eps block at its eps (the
    engine's ``eps_slopes``; empty without them), for the stopping rule's annotators at an
    end (``race.ends_settled``); ``settles``: how often its stop was settled;
    ``settle_top``: the item the last window's settle moved most and by how much
    (``rescues._escaping_item``)."""

    eps_window: list = field(default_factory=list)
    slope_window: list = field(default_factory=list)
    settles: int = 0
    settle_top: tuple | None = None


@dataclass
class RestartRun:
    """One restart's progress; ``state`` is whatever the engine keeps for it.

    ``truth_share``: mean omega of the last sweep (the share of ratings the truth explains);
    ``estimate_change``: the largest change of an item's posterior mean in the last sweep
    (both set by the step) and ``changes`` those of the current stage's sweeps;
    ``history``: the last two states, kept by the step for SQUAREM; ``shared_iter``: sweeps of
    the shared warm-up it branched from (counted in ``max_iter``); ``key``: its random key
    (``restart_key``), for the noise of a branch; ``polish_from``: the sweep of the stage from
    which it runs without SQUAREM (``race.converged``); ``pruned_at``: the sweep of its stage
    after which successive halving dropped it, or after which it was stopped out of reach of
    the leader (``outrun``); ``stopped``: it was still running when the fit was stopped.
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
    watch: Watch = field(default_factory=Watch)

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


class Stop(Exception):
    """The fit is to stop: the progress callback said so (or another restart's did)."""


#: ``step(run, spam)``: one sweep of ``run`` (with the spam component or not); updates
#: ``run.state`` and ``run.truth_share`` and returns the new bound
StepFn = Callable[[RestartRun, bool], float]
Callback = Callable[[int, int, float], "bool | None"]
MapRuns = Callable[[Callable[[RestartRun], None], list[RestartRun]], None]

#: restarts run in threads report through this lock, so a callback never runs concurrently
CALLBACK_LOCK = threading.Lock()


def map_sequential(fn: Callable[[RestartRun], None], runs: list[RestartRun]) -> None:
    for run in runs:
        fn(run)


# --------------------------------------------------------------------------- the starts


def init_instances(
    sum_m: np.ndarray,
    n_m: np.ndarray,
    hashes: np.ndarray,
    key: int,
    restart: int,
    mu: float,
    lam: float,
    thresholds: np.ndarray,
    step: float,
    policy: FitPolicy = DEFAULT,
) -> tuple[np.ndarray, np.ndarray]:
    """(mu_m, lam_m) of q(z), each (M,): shrunk per-item means, plus noise for restart > 0.

    ``sum_m``: sum of rating values per instance; ``n_m``: ratings per instance.
    """
    tau0 = 1.0 / step**2
    mu_m = (mu * lam + sum_m) / (lam + n_m)
    if restart > 0:
        mu_m = branch_instances(mu_m, hashes, key, thresholds, step, policy)
    return mu_m, lam + n_m * tau0


def init_annotators(
    n_n: np.ndarray,
    hashes: np.ndarray,
    key: int,
    restart: int,
    step: float,
    spam: bool,
    random_eps: bool,
    policy: FitPolicy = DEFAULT,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau_shape, tau_rate, eps), each (N,): E[tau] = 1/step^2, times noise for restart > 0.

    ``random_eps``: eps ~ U(``random_eps_low``, + ``random_eps_width``) (the paper-style
    random restart) instead of ``eps0``.
    """
    tau_e = np.full(n_n.shape, 1.0 / step**2)
    eps = np.full(n_n.shape, policy.eps0 if spam else 1.0)
    if restart > 0:
        tau_e = tau_e * libm.exp(keyed_normal(hashes, key, stream=1))
        if spam and random_eps:
            u = keyed_uniform(hashes, key, stream=2)
            eps = policy.random_eps_low + policy.random_eps_width * u
    shape = 1.0 + 0.5 * n_n
    return shape, shape / tau_e, eps


def branch_instances(
    mu_m: np.ndarray,
    hashes: np.ndarray,
    key: int,
    thresholds: np.ndarray,
    step: float,
    policy: FitPolicy = DEFAULT,
) -> np.ndarray:
    """(M,) q(z)'s means ``mu_m`` plus the restart's own noise (``start_noise`` steps),
    clipped to the outer thresholds: a random start's, and that of a restart that branches
    from the shared warm-up (the warm-up's means)."""
    noise = policy.start_noise * step * keyed_normal(hashes, key, stream=0)
    return np.clip(mu_m + noise, thresholds[0], thresholds[-1])


def branch_annotators(tau_rate: np.ndarray, hashes: np.ndarray, key: int) -> np.ndarray:
    """(N,) q(tau)'s rates of a branching restart: E[tau] of the warm-up times the restart's
    own log-normal factor, as ``init_annotators`` draws it."""
    return tau_rate * libm.exp(-keyed_normal(hashes, key, stream=1))


def init_categories(n_c: np.ndarray, phi: float, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """(delta_shape, delta_rate), each (C,), with E[delta] at the prior mean phi/eta."""
    shape = phi + 0.5 * n_c
    return shape, shape * eta / phi


class Globals(NamedTuple):
    """A restart's start of the factors that are not per instance (names as ``problem.State``'s):
    q(tau) and eps (N,), q(delta) (C,) and the expertise prior Gamma(alpha, beta)."""

    tau_shape: np.ndarray
    tau_rate: np.ndarray
    eps: np.ndarray
    delta_shape: np.ndarray
    delta_rate: np.ndarray
    alpha: float
    beta: float
    bias_mean: np.ndarray | None = None
    bias_prec: np.ndarray | None = None
    lam_b: float = 0.0
    pi: np.ndarray | None = None
    dir_a: np.ndarray | None = None
    kappa: float = 0.0


def init_extensions(
    n_annotators: int,
    step: float,
    bias: bool,
    spam_dist: str,
    pi: np.ndarray,
    policy: FitPolicy = DEFAULT,
) -> dict:
    """Starts of the extensions' factors: q(b) at 0 (precision ``bias_prec0``) and
    lambda_b = 1/(``bias_sd0`` step)^2 with the bias; the learned spam distribution at the
    fixed one ``pi`` (K,), and q(pi_n) = Dirichlet(``kappa0`` pi) per annotator."""
    out: dict = {}
    if bias:
        out.update(
            bias_mean=np.zeros(n_annotators),
            bias_prec=np.full(n_annotators, policy.bias_prec0),
            lam_b=1.0 / (policy.bias_sd0 * step) ** 2,
        )
    if spam_dist != "uniform":
        out.update(pi=np.asarray(pi, dtype=float).copy(), kappa=policy.kappa0)
        if spam_dist == "annotator":
            out["dir_a"] = np.tile(policy.kappa0 * out["pi"], (n_annotators, 1))
    return out


def init_globals(
    n_n: np.ndarray,
    ann_hashes: np.ndarray,
    n_c: np.ndarray,
    key: int,
    restart: int,
    step: float,
    spam: bool,
    random_eps: bool,
    phi: float,
    eta: float,
    bias: bool = False,
    spam_dist: str = "uniform",
    pi: np.ndarray | None = None,
    policy: FitPolicy = DEFAULT,
) -> Globals:
    """``init_annotators`` and ``init_categories`` (``n_c``: ratings per category, (C,)), the
    prior of tau at ``alpha = 1, beta = step^2`` (both engines start every restart so) and
    ``init_extensions``."""
    ann = init_annotators(n_n, ann_hashes, key, restart, step, spam, random_eps, policy)
    ext = (
        init_extensions(n_n.size, step, bias, spam_dist, pi, policy)
        if (bias or spam_dist != "uniform")
        else {}
    )
    return Globals(*ann, *init_categories(n_c, phi, eta), 1.0, step**2, **ext)


# --------------------------------------------------------------------------- the choice


def select(
    results: list[RestartRun],
    spam: bool,
    collapse_threshold: float,
    interrupted: bool = False,
    policy: FitPolicy = DEFAULT,
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
    halved = [res for res in dropped if not res.outrun]
    if halved:
        at = ", ".join(str(n) for n in sorted({r.pruned_at for r in halved if r.pruned_at}))
        verb = "had been pruned before the stop" if interrupted else "were pruned"
        reason += (
            f"; {len(halved)} restart(s) {verb} by successive halving (the worse half by "
            f"bound, collapsed ones first, after sweep {at} of their stage)"
        )
    for res in (res for res in dropped if res.outrun):
        reason += (
            f"; restart {res.restart} was stopped after mixture sweep {res.pruned_at}, out of "
            f"reach: its bound ({res.lower_bound:,.1f}) with its projected gain was more than "
            f"{policy.outrun_gaps:g} near-tie gaps below the leader's"
        )
    if collapsed and ok:
        top = max(collapsed, key=lambda res: res.lower_bound)
        higher = " (one with a higher bound)" if top.lower_bound > best.lower_bound else ""
        reason += (
            f"; {len(collapsed)} restart(s) collapsed to the all-spam solution (truth share "
            f"< {collapse_threshold:g}){higher} and were not chosen"
        )
    return best, reason, not ok


def ensemble_gap(best_bound: float, policy: FitPolicy = DEFAULT) -> float:
    """How far below the best bound a restart still counts as near-tied: ``ensemble_rtol``
    of the bound, at least ``ensemble_min_nats``."""
    return max(policy.ensemble_min_nats, policy.ensemble_rtol * abs(best_bound))


def out_of_reach(
    bound: float, projected_gain: float, leader_bound: float, policy: FitPolicy = DEFAULT
) -> bool:
    """Whether a restart at ``bound`` with ``projected_gain`` still to come is more than
    ``outrun_gaps`` ensemble gaps below ``leader_bound``."""
    gap = ensemble_gap(leader_bound, policy)
    return leader_bound - (bound + projected_gain) > policy.outrun_gaps * gap


def ensemble(
    results: list[RestartRun],
    best: RestartRun,
    spam: bool,
    collapse_threshold: float,
    policy: FitPolicy = DEFAULT,
) -> list[RestartRun]:
    """The restarts near-tied with ``best``: not pruned, not collapsed, with mixture sweeps
    and a bound within ``ensemble_gap`` of ``best``'s; ``best`` first, then by restart."""
    thr = collapse_threshold if spam else -np.inf
    gap = ensemble_gap(best.lower_bound, policy)
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
