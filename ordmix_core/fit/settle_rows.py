"""The settle's q(x | y=1) and q(y) of a few ratings, compiled with ``reference.q_xy``'s bits.

``settle.settle_items`` runs tens to hundreds of rounds over the ratings of the items and
annotators still moving (at 1M ratings, a few annotators' items: 13-350k ratings a round).
Through ``reference.q_xy`` a round cost ~115 ns a rating, most of it numpy's temporaries;
here ~40 (mostly the gathers of scattered ratings). The Gamma moments are
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
from ..vb import kernels, updates
from ..vb.problem import Problem, State
from ..vb.reference import Rated
from ..vb.reference import q_xy as reference_q_xy

__all__ = ["q_xy"]

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
