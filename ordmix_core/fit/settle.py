"""Blocks solved at a stop: each item's own (q(z_m), q(delta) at instance granularity, its
ratings' q(x), q(y)) with the annotators held, and that of a few named annotators (their
bias, q(tau), eps) together with the items they rated. After a fit with gold, the gold items'
blocks solved as if they were not gold (``own_ratings``): what their ratings alone say.

Why (``docs/benchmarks.md``): a fit can stop at a slow point of one item or one
annotator. On the Web set at seed 2 an item rated 4, 3, 4, 1, 5, 5 stopped at 3.75 with the
1 called spam; a 100x tighter fit took 137 more sweeps to let the 1 in (3.41), its
difficulty and mean moving together a little each sweep. On TREC RF10 at seed 3 an annotator
with 14 ratings stopped at eps 0.999, leaving it (the fit marks it still moving); the tighter
fit took it to 0.78 over 87 sweeps and moved one of its items by 0.10. With everything else
held such a block is a handful of numbers, and its own coordinate ascent makes the same move
in some tens or hundreds of cheap rounds over its few ratings. Each round is the sweep's own
updates in the sweep's order (q(x), q(y); q(z); q(delta); then q(x), q(y); q(b); q(tau);
eps, its exact optimum given its ratings as in ``updates.eps_block``), so the bound never
falls.

The rounds run on whole arrays over the ratings of the blocks still moving (the first, over
every item, by the sweep's own compiled passes with the annotators held): a block leaves
once its change per round is below ``FLOOR`` or, shrinking, its remaining change (Aitken, as
``stopping.remaining_changes``; after the first round, with the ratio ``stopping.MAX_RATE``)
is below ``DROP`` (an annotator's: ``DROP_ANNOTATORS``). The first round covers every item;
at a stop most leave after it (on TREC RF10 their change is below 1e-5), and the rest run on
the few at a slow point.
"""

from __future__ import annotations

import numpy as np

from ..numerics import libm
from ..vb import kernels, phases, updates
from ..vb.problem import Problem, State
from . import settle_rows
from .stopping import MAX_RATE

__all__ = ["DROP", "DROP_ANNOTATORS", "FLOOR", "MAX_ROUNDS", "own_ratings", "settle_items"]

#: rounds at most (Web seed 2's item took 421)
MAX_ROUNDS = 2000
#: an item leaves the rounds when, shrinking, its remaining change is below this (a thirtieth
#: of the default ``tol_estimate``: the rounds look for moves of that size)
DROP = 1e-3
#: an annotator leaves the rounds when its remaining change is below this: its block is
#: a few numbers over its few ratings, and moves slowly (TREC RF10 at seed 2: w708's eps
#: from 0.706 towards 0.693 by a few 1e-4 a round; at ``DROP`` the rounds left at 0.703)
DROP_ANNOTATORS = 1e-5
#: or when its change in a round is below this (at its fixed point, up to rounding)
FLOOR = 1e-9


def settle_items(
    p: Problem,
    s: State,
    annotators: np.ndarray | None = None,
    max_rounds: int = MAX_ROUNDS,
    drop: float = DROP,
    drop_annotators: float = DROP_ANNOTATORS,
    floor: float = FLOOR,
    hold: np.ndarray | None = None,
    own_delta: bool | None = None,
) -> tuple[State, np.ndarray]:
    """``s`` with every item's block solved, and the blocks of ``annotators`` ((N,) bool; None:
    none) with the items they rated, the other annotators and the hyperparameters held; the
    new state (its ``omega`` is the one of ``s``: the next sweep recomputes q(y)) and how far
    each item's mean moved, ``(M,)``.

    An item's block: ``mu_m``, ``lam_m`` and, when each category is one instance (instance
    granularity), its difficulty (at query granularity a category's difficulty spans many
    items and is held), with its ratings' q(x), q(y); gold items are held. An annotator's:
    its bias, q(tau) and eps (the exact optimum given its ratings, ``updates.eps_block``),
    with its ratings' q(x), q(y). Each round updates the items still moving and then the
    annotators still moving; an annotator leaves as an item does, on the largest change of
    its eps, bias and log E[tau], but at ``drop_annotators``; an item stays while an
    annotator that rated it does. ``hold`` ((M,) bool): items held too (a Dask block holds
    the items of annotators it does not see whole; the client settles those with them).
    ``own_delta``: whether each category is one instance (None: when the codes say so).
    """
    s = s.copy()
    if own_delta is None:
        own_delta = p.n_categories == p.n_instances and np.array_equal(p.cat_l, p.inst)
    held = np.zeros(p.n_instances, dtype=bool) if p.gold_mask is None else p.gold_mask.copy()
    if hold is not None:
        held |= hold
    n = p.n_annotators
    moving = ~held  # items moving by themselves
    busy = np.zeros(n, dtype=bool) if annotators is None else np.array(annotators, dtype=bool)
    start = s.mu_m.copy()
    prev_m, prev_n = np.zeros(p.n_instances), np.zeros(n)

    rows_n = np.flatnonzero(busy[p.ann])  # the busy annotators' ratings
    rows_m = np.arange(p.n_ratings)  # the ratings of the items in the rounds (only shrinks)
    for r in range(max_rounds):
        rows_n = rows_n[busy[p.ann[rows_n]]]
        items = moving.copy()  # an item stays while an annotator that rated it is busy
        items[p.inst[rows_n]] = True
        items &= ~held
        if not items.any() and not busy.any():
            break
        # the items' blocks
        idx = np.flatnonzero(items)
        rows_m = rows_m[items[p.inst[rows_m]]]
        if r == 0 and kernels.USE_JIT:  # every item: the compiled passes
            mu_m, lam_m, delta = _items_round_compiled(p, s, own_delta)
        else:
            mu_m, lam_m, delta = _items_round(p, s, rows_m, own_delta)
        change_m = np.abs(mu_m[idx] - s.mu_m[idx])
        s.mu_m[idx], s.lam_m[idx] = mu_m[idx], lam_m[idx]
        if own_delta:
            s.delta_shape[idx], s.delta_rate[idx] = delta[0][idx], delta[1][idx]
        before_m = prev_m[idx] if r else change_m / MAX_RATE
        moving[idx[_leaving(change_m, before_m, drop, floor)]] = False
        prev_m[idx] = change_m
        # the annotators' blocks
        who = np.flatnonzero(busy)
        if who.size:
            change_n = _settle_annotators(p, s, rows_n, who)
            before_n = prev_n[who] if r else change_n / MAX_RATE
            busy[who[_leaving(change_n, before_n, drop_annotators, floor)]] = False
            prev_n[who] = change_n
    return s, np.abs(s.mu_m - start)


def _items_round(
    p: Problem, s: State, rows: np.ndarray, own_delta: bool
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """One round of the items' blocks from the ratings ``rows`` (all of the moving items'),
    the annotators held: q(x), q(y); then the new q(z) ``(mu_m, lam_m)`` and, with
    ``own_delta``, q(delta) ``(shape, rate)`` from S with the new q(z); each (M,) / (C,),
    to be taken for the moving items only."""
    q = settle_rows.q_xy(p, s, rows)
    inst, ex, var, omega, b, inv_bp = q.inst, q.ex, q.var, q.omega, q.b, q.inv_bp
    mu_m, lam_m = updates.update_z(inst, omega * q.rho, ex - b, p.mu, p.lam, p.n_instances)
    if not own_delta:
        return mu_m, lam_m, None
    s_l = updates.expected_sq_inv(ex, var, mu_m[inst] + b, 1.0 / lam_m[inst] + inv_bp)
    delta = updates.update_gamma_factor(q.cat, omega, q.e_tau, s_l, p.phi, p.eta, p.n_categories)
    return mu_m, lam_m, delta


def _items_round_compiled(
    p: Problem, s: State, own_delta: bool
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """``_items_round`` over every rating with the sweep's compiled passes (the same
    updates): pass 1 gives q(x), q(y) and the new q(z); passes 2 and 3 with the annotators'
    held E[tau] and q(b) give each category's ``sum omega E[tau] S``. The first round covers
    every item; in numpy it cost about eight sweeps (TREC RF10) to twenty (1M ratings)."""
    t = phases.chunks_of(p)
    work = phases.Work.empty(p.n_ratings)
    ann_f = phases.annotator_factors(p, s.tau_shape, s.tau_rate, s.eps, s.bias_mean, s.bias_prec)
    cat_f = phases.category_factors(p, s.delta_shape, s.delta_rate)
    xy = phases.phase_xy(p, s.mu_m, s.lam_m, ann_f, cat_f, work, t, phases.spam_table(p, s))
    if not own_delta:
        return xy.mu_m, xy.lam_m, None
    phases.phase_tau(p, work, xy.mu_m, xy.lam_m, cat_f[0], t)
    d_cat = phases.phase_delta(p, work, ann_f[0], t, s.bias_mean, s.bias_prec)
    return xy.mu_m, xy.lam_m, updates.gamma_from_sums(xy.w_cat, d_cat, p.phi, p.eta)


def _leaving(change: np.ndarray, before: np.ndarray, drop: float, floor: float) -> np.ndarray:
    """Which blocks leave the rounds: a change below ``floor``, or a remaining change (the
    change extrapolated with its ratio to the round before) below ``drop``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(before > 0, change / before, np.inf)
        remaining = np.where(ratio < 1.0, change * ratio / (1.0 - ratio), np.inf)
    return (change < floor) | (remaining < drop)


def _settle_annotators(p: Problem, s: State, rows_n: np.ndarray, who: np.ndarray) -> np.ndarray:
    """One round of the annotators ``who``'s blocks, in ``s`` (their bias, q(tau) and exact
    eps from their ratings ``rows_n``); returns how far each of them moved (``_annotator_view``)."""
    n = p.n_annotators
    q = settle_rows.q_xy(p, s, rows_n)
    ann, inst, ex, var, omega = q.ann, q.inst, q.ex, q.var, q.omega
    b, inv_bp = q.b, q.inv_bp  # with the bias, replaced by the new q(b) below
    before = _annotator_view(p, s)[:, who]
    if p.bias:
        w_l, mu_l = omega * q.rho, s.mu_m[inst]
        mean, prec = updates.update_bias(
            np.bincount(ann, weights=w_l, minlength=n),
            np.bincount(ann, weights=w_l * (ex - mu_l), minlength=n),
            s.lam_b,
        )
        s.bias_mean[who], s.bias_prec[who] = mean[who], prec[who]
        b, inv_bp = s.bias_mean[ann], 1.0 / s.bias_prec[ann]
    s_l = updates.expected_sq_inv(ex, var, s.mu_m[inst] + b, q.inv_lam + inv_bp)
    shape, rate = updates.update_gamma_factor(ann, omega, q.e_delta, s_l, s.alpha, s.beta, n)
    s.tau_shape[who], s.tau_rate[who] = shape[who], rate[who]
    if p.spam:
        mean_omega = updates.update_eps(ann, omega, p.n_per_ann)
        eps = updates.eps_block(ann, omega, s.eps, mean_omega)
        s.eps[who] = eps[who]
    return np.max(np.abs(_annotator_view(p, s)[:, who] - before), axis=0)


def _annotator_view(p: Problem, s: State) -> np.ndarray:
    """(3, N): each annotator's eps, bias mean (0 without the bias) and log E[tau]."""
    bias = s.bias_mean if p.bias else np.zeros_like(s.eps)
    return np.stack([s.eps, bias, libm.log(s.tau_shape / s.tau_rate)])


def own_ratings(p: Problem, s: State) -> np.ndarray:
    """What the gold items' own ratings say of them, everything else held: the items' means
    (M,), each gold item's from its block solved with its gold not imposed (the
    ``crowd_estimate`` a manager compares with the gold to find disputed honeypots). Without
    gold items: ``s``'s own."""
    if p.gold_mask is None:
        return s.mu_m
    with np.errstate(over="ignore", under="ignore"):  # as in the sweeps
        solved, _ = settle_items(p.with_gold(None), s, hold=~p.gold_mask)
    return solved.mu_m
