"""Blocks solved with the rest held: each item's own (q(z_m), q(delta) at instance
granularity, its ratings' q(x), q(y)) with the annotators held, and that of a few named
annotators (their bias, q(tau), eps) together with the items they rated. After a fit with
gold, the gold items' blocks solved as if they were not gold (``own_ratings``): what their
ratings alone say. The rescues (``rescues``) settle a stop, or a window of plain sweeps, so.

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
once its change per round is below ``settle_floor`` or, shrinking, its remaining change
(Aitken, as ``race.remaining_changes``; after the first round, with the ratio ``max_rate``)
is below ``settle_drop`` (an annotator's: ``settle_drop_annotators``). The first round covers
every item; at a stop most leave after it (on TREC RF10 their change is below 1e-5), and the
rest run on the few at a slow point.

The rounds' q(x | y=1) and q(y) of a few ratings (``q_xy``) are compiled with
``reference.q_xy``'s bits. At 1M ratings a round covers a few annotators' items (13-350k
ratings); through ``reference.q_xy`` it cost ~115 ns a rating, most of it numpy's
temporaries; here ~40 (mostly the gathers of scattered ratings). The Gamma moments are
``updates.gamma_moments``' (per annotator and category, or per rating when there are fewer
ratings than those); the rest is one compiled loop block by block as ``kernels``' first
pass: the gathers, the sweep's truncated-normal statistics (``kernels.tn_mirror``,
``erfcx_pos``, ``tn_vector`` on the vector units, ``tn_scalar`` for the ratings it leaves, as
``kernels.tn_stats``), S and the logit of q(y) in numpy's order of operations; q(y) itself is
scipy's ``expit`` of that logit, as in ``updates.omega_from_logit``. So every array is
``reference.q_xy``'s to the bit (a test), and the settle's rounds end where they did. The
ordinal model with spam only (every model the settle meets at a stop); the rest, and every
model without numba, goes through ``reference.q_xy``.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics import libm
from ..numerics.jit import jit, prange
from ..numerics.truncnorm import tn_stats
from ..vb import kernels, phases, updates
from ..vb.problem import Problem, State
from ..vb.reference import Rated
from ..vb.reference import q_xy as reference_q_xy
from .policy import DEFAULT

__all__ = ["own_ratings", "q_xy", "settle_items"]


def settle_items(
    p: Problem,
    s: State,
    annotators: np.ndarray | None = None,
    max_rounds: int = DEFAULT.settle_max_rounds,
    drop: float = DEFAULT.settle_drop,
    drop_annotators: float = DEFAULT.settle_drop_annotators,
    floor: float = DEFAULT.settle_floor,
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
        before_m = prev_m[idx] if r else change_m / DEFAULT.max_rate
        moving[idx[_leaving(change_m, before_m, drop, floor)]] = False
        prev_m[idx] = change_m
        # the annotators' blocks
        who = np.flatnonzero(busy)
        if who.size:
            change_n = _settle_annotators(p, s, rows_n, who)
            before_n = prev_n[who] if r else change_n / DEFAULT.max_rate
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
    q = q_xy(p, s, rows)
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
    q = q_xy(p, s, rows_n)
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


# --------------------------------------------------------------------------- the rounds' q(x), q(y)

#: ``updates.omega_logit``'s constant, computed as it computes it
_HALF_LOG_2PI_LOGIT = 0.5 * math.log(2.0 * math.pi)


@jit(nogil=True)
def _rows_block(
    s0, rows, codes, moments, item_f, ann_f, spam_f, flags, tnc, out_codes, out
):  # pragma: no cover - compiled
    """The block of ``_rows_driver`` from rating ``rows[s0]`` on (``kernels.XY_BLOCK`` of
    them, fewer at the end)."""
    ann_all, inst_all, cat_all, level_all, thresholds = codes
    e_tau_s, e_logtau_s, e_delta_s, e_logdelta_s = moments
    mu_m, lam_m, gold = item_f
    bias_mean, bias_prec = ann_f
    log_eps, log1m_eps, log_table, n_lev, half_log_2pi = spam_f
    has_gold, bias, per_ann, exact, tau_by_ann, delta_by_cat = flags
    tab, far_tail, narrow = tnc
    nb = kernels.XY_BLOCK
    s1 = min(s0 + nb, rows.size)
    buf = np.empty((9, nb))
    g_a, g_b, g_ea, g_eb, g_sq = buf[0], buf[1], buf[2], buf[3], buf[4]
    g_hl, g_base, g_add, g_centre = buf[5], buf[6], buf[7], buf[8]
    g_flip = np.empty(nb, dtype=np.bool_)
    r_ok = np.empty(nb, dtype=np.bool_)
    for j in range(s0, s1):  # gather
        i = rows[j]
        n, m, c, lv = ann_all[i], inst_all[i], cat_all[i], level_all[i]
        out_codes[0, j], out_codes[1, j], out_codes[2, j] = n, m, c
        t_at = n if tau_by_ann else j
        d_at = c if delta_by_cat else j
        e_tau, e_logtau = e_tau_s[t_at], e_logtau_s[t_at]
        e_delta, e_logdelta = e_delta_s[d_at], e_logdelta_s[d_at]
        rho = e_tau * e_delta
        inv_lam = 0.0 if has_gold and gold[m] else 1.0 / lam_m[m]
        b, inv_bp = (bias_mean[n], 1.0 / bias_prec[n]) if bias else (0.0, 0.0)
        centre = mu_m[m] + b
        sq = math.sqrt(rho)
        k = j - s0
        g_a[k], g_b[k], g_flip[k] = kernels.tn_mirror(
            thresholds[lv], thresholds[lv + 1], centre, sq
        )
        g_sq[k], g_centre[k] = sq, centre
        g_hl[k] = kernels.HALF_LOG_2PI - math.log(sq)
        lpi = log_table[n * n_lev + lv if per_ann else lv]
        g_base[k] = log_eps[n] - log1m_eps[n] - lpi - half_log_2pi
        g_add[k] = 0.5 * (e_logtau + e_logdelta) if exact else 0.5 * libm.log_value(rho)
        out[0, j], out[1, j], out[2, j], out[3, j] = e_tau, e_logtau, e_delta, e_logdelta
        out[4, j], out[5, j], out[6, j], out[7, j] = rho, b, inv_bp, inv_lam
    for k in range(s1 - s0):  # the table lookups, in a loop of their own
        g_ea[k] = kernels.erfcx_pos(-g_a[k] * kernels.INV_SQRT2, tab)
        g_eb[k] = kernels.erfcx_pos(abs(g_b[k]) * kernels.INV_SQRT2, tab)
    ex_b, var_b, ent_b = out[8, s0:s1], out[9, s0:s1], out[10, s0:s1]  # views from 0
    for k in range(s1 - s0):  # no branch, no call: the flags select
        d, v, lz, e2, ok = kernels.tn_vector(
            g_a[k], g_b[k], g_flip[k], g_ea[k], g_eb[k], g_sq[k], narrow, far_tail
        )
        r_ok[k] = ok
        ex_b[k], var_b[k], ent_b[k] = g_centre[k] + d, v, g_hl[k] + lz + 0.5 * e2
    for j in range(s0, s1):  # the rare ratings tn_vector leaves, then S and the logit
        k = j - s0
        centre = g_centre[k]
        if not r_ok[k]:
            lv = level_all[rows[j]]
            lo, hi = thresholds[lv], thresholds[lv + 1]
            d, v, lz, e2 = kernels.tn_scalar(lo, hi, centre, g_sq[k], tnc)
            out[8, j], out[9, j], out[10, j] = centre + d, v, g_hl[k] + lz + 0.5 * e2
        dx = out[8, j] - centre
        s_l = dx * dx + out[9, j] + (out[7, j] + out[6, j])
        logit = g_base[k] - 0.5 * out[4, j] * s_l
        logit = logit + g_add[k]
        out[11, j] = logit + out[10, j] if exact else logit


def _rows_driver(
    rows, codes, moments, item_f, ann_f, spam_f, flags, tnc, out_codes, out
):  # pragma: no cover - compiled
    """Per rating ``rows[j]``: its codes into ``out_codes`` (3, R) and ``Rated``'s float
    fields into ``out`` (12, R: e_tau, e_logtau, e_delta, e_logdelta, rho, b, inv_bp,
    inv_lam, ex, var, ent, logit). ``moments``: E[tau], E[log tau] per annotator (or per
    rating when not ``tau_by_ann``), E[delta], E[log delta] per category (or per rating).
    Block by block as ``kernels``' first pass: a scalar loop gathers, one looks up the erfcx,
    a loop without branches or calls takes ``tn_vector`` (on the vector units), and a last one
    redoes the ratings it leaves to ``tn_scalar``."""
    nb = kernels.XY_BLOCK
    for blk in prange((rows.size + nb - 1) // nb):  # the block body compiled once for both
        _rows_block(
            np.int64(blk) * nb, rows, codes, moments, item_f, ann_f, spam_f, flags, tnc,
            out_codes, out,
        )  # fmt: skip


_rows_parallel, _rows_serial = kernels.parallel_and_serial(_rows_driver)


def q_xy(p: Problem, s: State, rows: np.ndarray) -> Rated:
    """q(x | y=1) and q(y) of the ratings ``rows`` (R,) for the settle's rounds:
    ``reference.q_xy(p, s, rows, kernels.tn_stats)`` to the bit, compiled (see the module);
    without numba ``reference.q_xy`` itself (numpy's truncated-normal statistics; the
    compiled sweep's were written for numba, slow in pure Python)."""
    if not kernels.USE_JIT:
        return reference_q_xy(p, s, rows, tn_stats)
    if not (p.ordinal and p.spam):
        return reference_q_xy(p, s, rows, kernels.tn_stats)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    per_ann = p.spam_dist == "annotator"
    table = updates.spam_log_table(p.spam_dist, p.log_pi, s.pi, s.dir_a)
    gold = p.gold_mask
    empty = np.zeros(0)
    out_codes = np.empty((3, rows.size), dtype=p.ann.dtype)
    out = np.empty((12, rows.size))
    tau_by_ann = p.n_annotators <= rows.size
    delta_by_cat = p.n_categories <= rows.size
    if tau_by_ann:  # per annotator, then read per rating: the same values as gathered first
        e_tau, e_logtau = updates.gamma_moments(s.tau_shape, s.tau_rate)
    else:
        ann_rows = p.ann[rows]
        e_tau, e_logtau = updates.gamma_moments(s.tau_shape[ann_rows], s.tau_rate[ann_rows])
    if delta_by_cat:
        e_delta, e_logdelta = updates.gamma_moments(s.delta_shape, s.delta_rate)
    else:
        cat = p.cat_l[rows]
        e_delta, e_logdelta = updates.gamma_moments(s.delta_shape[cat], s.delta_rate[cat])
    moments = (e_tau, e_logtau, e_delta, e_logdelta)
    drive = _rows_parallel if kernels.use_cores(rows.size) else _rows_serial
    drive(
        rows,
        (p.ann, p.inst, p.cat_l, p.level, np.asarray(p.thresholds, dtype=np.float64)),
        tuple(np.ascontiguousarray(x, dtype=np.float64) for x in moments),
        (s.mu_m, s.lam_m, np.zeros(0, dtype=np.bool_) if gold is None else gold),
        (s.bias_mean, s.bias_prec) if p.bias else (empty, empty),
        (libm.log(s.eps), libm.log1p(-s.eps), np.ascontiguousarray(table).ravel(), p.n_levels,
         _HALF_LOG_2PI_LOGIT),
        (gold is not None, bool(p.bias), per_ann, bool(p.exact), tau_by_ann, delta_by_cat),
        kernels.TN_CONSTS,
        out_codes,
        out,
    )  # fmt: skip
    ann, inst, cat = out_codes
    e_tau, e_logtau, e_delta, e_logdelta, rho, b, inv_bp, inv_lam, ex, var, ent, logit = out
    omega, one_m_omega = updates.omega_from_logit(logit)
    cells = updates.spam_cells(ann, p.level[rows], p.n_levels, per_ann)
    if not p.bias:
        b, inv_bp = 0.0, 0.0
    return Rated(
        ann, inst, cat, e_tau, e_logtau, e_delta, e_logdelta, rho, b, inv_bp, inv_lam, ex, var,
        ent, omega, one_m_omega, cells,
    )  # fmt: skip
