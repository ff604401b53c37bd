"""Fused per-rating kernels of the VB sweep, compiled with numba (``phases.py`` drives them).

One sweep is three passes over the ratings (the order of the coordinate updates needs them):

1. ``pass_xy``: q(x|y=1) (truncated-normal statistics) and q(y) with the OLD q(z), tau, delta,
   eps; accumulates per instance ``sum omega rho`` and ``sum omega rho E[x]`` (for q(z)), per
   annotator and category ``sum omega``, and the rating terms of the bound that depend on q(x),
   q(y) only (``sum omega H[q(x)]``, ``sum (1-omega) log pi``, ``sum H_Bernoulli(omega)``).
2. ``pass_tau``: ``S_l`` with the NEW q(z); per annotator ``sum omega E[delta] S`` (q(tau));
   keeps ``omega S`` per rating.
3. ``pass_delta``: per category ``sum omega E[tau_new] S`` (q(delta) with the NEW E[tau]).

Every pass splits the ratings into ``T`` fixed contiguous chunks (``T`` = rows of the partial-sum
arrays, ``n_chunks``: a function of the data's sizes only, never of the thread count); each
chunk sums into its own row, rows are added in order afterwards (``phases.add_rows``), so a
given input gives bit-identical results whatever the number of threads. Each pass
is one driver compiled twice (``parallel_and_serial``): over the chunks in numba's threads
(``pass_xy``) and on the calling thread (``pass_xy_serial``, for small inputs and for restarts
run side by side); its arguments come grouped in tuples by what they index (ratings, levels,
instances, annotators, categories, outputs, partial sums), unpacked at no cost in the chunk.

The truncated-normal statistics follow ``truncnorm.py`` branch for branch (mirroring to the lower
tail, the narrow-interval and the far-tail branches, at ``truncnorm.py``'s thresholds, passed in as
``TN_CONSTS``) with closed forms that need one
``erfcx``-type evaluation per interval end: ``Phi(x) = erfcx(-x/sqrt 2) exp(-x^2/2) / 2`` gives
log Z, and ``phi(x)/Z`` follows from the same numbers, so each interval costs two table-driven
``erfcx`` (no exp inside), two exp and one log. ``erfcx`` is evaluated as in Faddeeva/scipy:
degree-6 polynomials on 100 pieces of ``400/(4+x)`` (fitted to scipy's ``erfcx``, relative
error < 3e-15, and stored: ``erfcx_table``), a continued fraction beyond 50.

Pass 1 runs block by block (``XY_BLOCK`` ratings). A scalar loop gathers each rating's
parameters and mirrors its interval; a second looks up its two ``erfcx`` in the table (LLVM
vectorises no loop with a table lookup on this CPU); a loop without branches or calls then
takes the lower-tail and straddling branches (``tn_vector``: nearly every rating), q(y)
(``omega_vector``) and the bound's terms, with ``vector_math``'s exp and log, so that LLVM runs
it on the vector units (4 or 8 ratings an instruction); a last scalar loop redoes the rare
ratings of the other branches with ``tn_scalar`` and adds up in rating order. On TREC RF10 that
is 23 ns a rating on one thread, against 60 with libm's exp and log called rating by rating.
``vector_math`` is within 1 ulp of libm and the same on every CPU, but not libm's last bit.

``USE_JIT`` (False when numba is missing or ``ORDMIX_NO_JIT=1``) tells ``vb.sweep`` whether to
use these kernels or the numpy reference. Without numba the functions below still run, as slow
pure Python (for tests of the formulas only). Compiled kernels are cached on disk where numba
can write (``CACHE``, ``CACHE_WHERE``; see ``jit._choose_cache``), else compiled per process.
"""

from __future__ import annotations

import math
import threading
import types
from collections.abc import Callable

import numpy as np
from numpy.polynomial import chebyshev as _cheb
from scipy.special import erfcx as _erfcx_ref

from ..numerics import truncnorm, vector_math
from ..numerics.erfcx_table import ERFCX_TABLE as ERFCX_TABLE
from ..numerics.jit import CACHE as CACHE  # re-exported: where the compiled kernels are cached
from ..numerics.jit import CACHE_WHERE as CACHE_WHERE
from ..numerics.jit import HAVE_NUMBA as HAVE_NUMBA
from ..numerics.jit import USE_JIT as USE_JIT  # the sweep's switch (``vb.sweep``); tests assign it
from ..numerics.jit import jit as _jit
from ..numerics.jit import numba as numba
from ..numerics.jit import prange
from .updates import EPS_BLOCK_ITERS, EPS_BLOCK_TOL, EPS_FLOOR, eps_block_start

_HALF_LOG_2PI = truncnorm._HALF_LOG_2PI  # a float: numba freezes it as a constant
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_ERF_SMALL = 1.19  # |a| below this and width below 1: Z from erf (no cancellation near 0)
_ERFCX_DEG = 6
#: for compiled loops elsewhere that must give these kernels' bits (``fit.settle``)
HALF_LOG_2PI, INV_SQRT2 = _HALF_LOG_2PI, _INV_SQRT2


def fit_erfcx_table() -> np.ndarray:
    """(100, 7) monomial coefficients: erfcx(400/(j + (t+1)/2) - 4) on t in [-1, 1], piece j;
    how ``erfcx_table.ERFCX_TABLE`` was made (its last bits depend on the CPU's BLAS kernel,
    so the kernels read the stored table)."""
    nodes = np.cos(np.pi * (np.arange(_ERFCX_DEG + 1) + 0.5) / (_ERFCX_DEG + 1))
    tab = np.zeros((100, _ERFCX_DEG + 1))
    vander = _cheb.chebvander(nodes, _ERFCX_DEG)
    for j in range(100):
        y100 = j + 0.5 * (nodes + 1.0)
        with np.errstate(divide="ignore"):
            vals = _erfcx_ref(np.where(y100 > 0, 400.0 / y100 - 4.0, 1e300))
        coef = np.linalg.solve(vander, vals)
        poly = _cheb.cheb2poly(coef)
        tab[j, : poly.size] = poly
    return tab


#: what ``tn_scalar`` needs besides the interval: the erfcx table and ``truncnorm.py``'s branch
#: thresholds (``FAR_TAIL``, ``NARROW``), passed as an argument: a global read from another
#: module would be frozen into numba's on-disk cache and outlive a change of ``truncnorm.py``
TN_CONSTS: tuple[np.ndarray, float, float] = (
    ERFCX_TABLE,
    float(truncnorm.FAR_TAIL),
    float(truncnorm.NARROW),
)


@_jit(inline="always")
def erfcx_pos(x: float, tab: np.ndarray) -> float:
    """``erfcx(x) = exp(x^2) erfc(x)`` for ``x >= 0`` (table ``ERFCX_TABLE``)."""
    if x > 50.0:
        if x > 5e7:
            return _INV_SQRT_PI / x
        x2 = x * x
        return _INV_SQRT_PI * (x2 * (x2 + 4.5) + 2.0) / (x * (x2 * (x2 + 5.0) + 3.75))
    y = 400.0 / (4.0 + x)
    j = min(int(y), 99)
    t = 2.0 * (y - j) - 1.0
    c = tab[j]
    return c[0] + t * (c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * (c[5] + t * c[6])))))


@_jit(inline="always")
def log1p_fast(x: float) -> float:
    """``log(1 + x)`` to a few ulp for ``x > -1`` (Kahan's trick; faster than libm's log1p)."""
    u = 1.0 + x
    if u == 1.0:
        return x
    return math.log(u) * (x / (u - 1.0))


@_jit(inline="always")
def tn_scalar(
    lo: float, hi: float, mean: float, sq: float, tnc: tuple
) -> tuple[float, float, float, float]:
    """Truncated ``N(mean, 1/sq^2)`` on ``[lo, hi)``: ``(E[x] - mean, Var[x], log Z, E[s^2])``.

    ``s`` is the standardised variable; ``H[q(x)] = log(2 pi)/2 - log sq + log Z + E[s^2]/2``.
    ``tnc``: ``TN_CONSTS``.
    """
    tab, far_tail, narrow = tnc
    sd = 1.0 / sq
    a0 = (lo - mean) * sq
    b0 = (hi - mean) * sq
    flip = a0 + b0 > 0.0
    if flip:
        a, b = -b0, -a0
    else:
        a, b = a0, b0
    w = b - a
    mid = 0.5 * (a + b)
    vmax = min(1.0, w * w / 12.0)
    if w < narrow:  # nearly a point: the density is flat across it
        log_z = math.log(max(w, 1e-300)) - 0.5 * mid * mid - _HALF_LOG_2PI
        m = mid
        v = vmax
    else:
        if b <= 0.0 and -a < _ERF_SMALL and w < 0.1:  # narrow, near 0: Z as a difference of erf
            ga = math.exp(-0.5 * a * a)
            gb = math.exp(-0.5 * b * b)
            z = 0.5 * (math.erf(-a * _INV_SQRT2) - math.erf(-b * _INV_SQRT2))
            log_z = math.log(z)
            pa = ga * _INV_SQRT_2PI / z
            pb = gb * _INV_SQRT_2PI / z
            pa_m_pb = pa - pb
        elif b <= 0.0:  # both ends in the lower tail: Phi(x) = erfcx(-x/sqrt2) exp(-x^2/2) / 2
            ea = erfcx_pos(-a * _INV_SQRT2, tab)
            eb = erfcx_pos(-b * _INV_SQRT2, tab)
            x = w * mid  # log(phi(a)/phi(b)) <= 0
            if x > -1e-3:  # expm1 by its series (error < 1e-17 relative)
                em = x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x / 120.0))))
                e = 1.0 + em
            else:
                e = math.exp(x)
                em = e - 1.0
            dz = (eb - ea) - ea * em  # eb (1 - Phi(a)/Phi(b)) = 2 Z exp(b^2/2)
            log_z = math.log(0.5 * dz) - 0.5 * b * b
            pb = _SQRT_2_OVER_PI / dz  # phi(b)/Z
            pa = pb * e
            pa_m_pb = pb * em
        else:  # a <= -b < 0 < b
            ga = math.exp(-0.5 * a * a)
            gb = math.exp(-0.5 * b * b)
            if -a < _ERF_SMALL and w < 1.0:  # Z small and near 0: erf, no cancellation
                z = 0.5 * (math.erf(b * _INV_SQRT2) + math.erf(-a * _INV_SQRT2))
                log_z = math.log(z)
            else:  # Z = 1 - (tails) >= 0.38, the tails from erfcx
                tails = 0.5 * (
                    erfcx_pos(-a * _INV_SQRT2, tab) * ga + erfcx_pos(b * _INV_SQRT2, tab) * gb
                )
                z = 1.0 - tails
                log_z = log1p_fast(-tails)
            pa = ga * _INV_SQRT_2PI / z
            pb = gb * _INV_SQRT_2PI / z
            pa_m_pb = pa - pb
        m = min(max(pa_m_pb, a), b)
        e2 = 1.0 + (a * pa - b * pb)
        v = min(max(e2 - m * m, 0.0), vmax)
        if b < -far_tail:  # e2 - m^2 cancels; the density is exponential with rate -b
            rate = -b
            q = math.exp(-rate * w)
            v = min(1.0 / (rate * rate) - w * w * q / ((1.0 - q) * (1.0 - q)), vmax)
    e2 = v + m * m
    d = -m * sd if flip else m * sd
    return d, v * sd * sd, log_z, e2


@_jit(inline="always")
def tn_mirror(lo: float, hi: float, mean: float, sq: float) -> tuple[float, float, bool]:
    """The standardised ends ``(a, b)`` of ``[lo, hi)``, mirrored so that ``a + b <= 0``, and
    whether they were mirrored."""
    a0 = (lo - mean) * sq
    b0 = (hi - mean) * sq
    flip = a0 + b0 > 0.0
    return (-b0 if flip else a0), (-a0 if flip else b0), flip


@_jit(inline="always")
def tn_ends(lo: float, hi: float, mean: float, sq: float, tab: np.ndarray):
    """The scalar half of ``tn_vector``: ``tn_mirror``'s ``(a, b, flip)`` and
    ``erfcx(-a/sqrt2)``, ``erfcx(|b|/sqrt2)`` (a table lookup: a loop with it is not
    vectorised)."""
    a, b, flip = tn_mirror(lo, hi, mean, sq)
    return a, b, flip, erfcx_pos(-a * _INV_SQRT2, tab), erfcx_pos(abs(b) * _INV_SQRT2, tab)


@_jit(inline="always")
def tn_vector(
    a: float, b: float, flip: bool, ea: float, eb: float, sq: float, narrow: float, far_tail: float
) -> tuple[float, float, float, float, bool]:
    """``tn_scalar``'s lower-tail and straddling branches without a branch or a call
    (``vector_math``'s exp and log), from ``tn_ends``: ``(E[x] - mean, Var[x], log Z, E[s^2],
    ok)``; ``ok`` is False where ``tn_scalar`` takes another branch (nearly a point, Z from erf
    near 0, the far tail): there its values are to be used instead."""
    w = b - a
    mid = 0.5 * (a + b)
    vmax = min(1.0, w * w / 12.0)
    lower = b <= 0.0
    ok = (w >= narrow) & (b >= -far_tail) & ((-a >= _ERF_SMALL) | (w >= (0.1 if lower else 1.0)))
    x = w * mid  # lower tail: log(phi(a)/phi(b)) <= 0
    e1 = vector_math.exp(x if lower else -0.5 * a * a)  # phi(a)/phi(b), or sqrt(2 pi) phi(a)
    gb = vector_math.exp(-0.5 * b * b)
    series = x > -1e-3  # expm1 by its series (error < 1e-17 relative)
    em_s = x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x / 120.0))))
    em = em_s if series else e1 - 1.0
    e = 1.0 + em_s if series else e1
    dz = (eb - ea) - ea * em  # lower tail: eb (1 - Phi(a)/Phi(b)) = 2 Z exp(b^2/2)
    tails = 0.5 * (ea * e1 + eb * gb)  # straddling: Z = 1 - tails
    z = 1.0 - tails
    u = 1.0 + -tails
    lg = vector_math.log(0.5 * dz if lower else u)
    log1p_tails = -tails if u == 1.0 else lg * (-tails / (u - 1.0))  # log1p_fast(-tails)
    log_z = lg - 0.5 * b * b if lower else log1p_tails
    pb_lower = _SQRT_2_OVER_PI / dz  # phi(b)/Z
    pa_s = e1 * _INV_SQRT_2PI / z
    pb_s = gb * _INV_SQRT_2PI / z
    pa = pb_lower * e if lower else pa_s
    pb = pb_lower if lower else pb_s
    pa_m_pb = pb_lower * em if lower else pa_s - pb_s
    m = min(max(pa_m_pb, a), b)
    e2 = 1.0 + (a * pa - b * pb)
    v = min(max(e2 - m * m, 0.0), vmax)
    sd = 1.0 / sq
    d = -m * sd if flip else m * sd
    return d, v * sd * sd, log_z, v + m * m, ok


@_jit(inline="always")
def omega_vector(t: float) -> tuple[float, float, float]:
    """``(sigmoid(t), sigmoid(-t), H_Bernoulli)`` of the logit ``t``, without cancellation,
    and without a branch or a call (``vector_math``'s exp and log; ``log1p_fast``'s form)."""
    u = abs(t)
    e = vector_math.exp(-u)
    inv = 1.0 / (1.0 + e)
    small = e * inv
    v = 1.0 + e
    h = (e if v == 1.0 else vector_math.log(v) * (e / (v - 1.0))) + u * small
    pos = t >= 0.0
    return inv if pos else small, small if pos else inv, h


def tn_stats_arrays(
    lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, prec: np.ndarray, tnc: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The sweep's truncated-normal statistics (``tn_vector``, else ``tn_scalar``) with
    ``truncnorm.tn_stats``'s outputs: ex, var, log_z, entropy; (L,)."""
    tab, far_tail, narrow = tnc
    n = lo.size
    ex = np.empty(n)
    var = np.empty(n)
    log_z = np.empty(n)
    ent = np.empty(n)
    for i in prange(n):
        sq = math.sqrt(prec[i])
        a, b, flip, ea, eb = tn_ends(lo[i], hi[i], mean[i], sq, tab)
        d, v, lz, e2, ok = tn_vector(a, b, flip, ea, eb, sq, narrow, far_tail)
        if not ok:
            d, v, lz, e2 = tn_scalar(lo[i], hi[i], mean[i], sq, tnc)
        ex[i] = mean[i] + d
        var[i] = v
        log_z[i] = lz
        ent[i] = _HALF_LOG_2PI - math.log(sq) + lz + 0.5 * e2
    return ex, var, log_z, ent


#: ratings per block of the first pass: its gathers, its vectorised arithmetic and its sums
#: run block by block (the block's buffers stay in the core's first cache)
XY_BLOCK = 256


@_jit()
def _xy_chunk(t, start, stop, codes, levels, inst_f, ann_f, cat_f, flags, tnc, out, acc) -> None:
    """Pass 1 over ratings ``start:stop``, sums into row ``t`` (see ``pass_xy``).

    Block by block: a scalar loop gathers each rating's parameters (its interval mirrored,
    ``tn_mirror``), another looks up the two erfcx, a loop without branches or calls
    computes q(x|y=1), q(y) and the bound's terms (``tn_vector``, ``omega_vector``: LLVM
    vectorises it), and a scalar loop redoes the rare ratings ``tn_vector`` leaves to
    ``tn_scalar`` and adds everything up in rating order."""
    ann, inst, cat, level = codes
    lo_k, hi_k, val_k, logpi_t = levels
    mu_m, inv_lam_m = inst_f
    e_tau, log_e_tau, a_n, bias_n, inv_bp_n = ann_f
    e_delta, log_e_delta, b_c = cat_f
    ordinal, spam, exact, per_ann, count_cells = flags
    tab, far_tail, narrow = tnc
    ex_out, var_out, omega_out = out
    acc_inst, acc_ann, acc_cat, acc_sc, acc_cell = acc
    n_lev = lo_k.size
    half_log_2pi = _HALF_LOG_2PI
    nb = XY_BLOCK
    # per rating of a block: inputs (gathered), then outputs of the vectorised loop
    buf = np.empty((17, nb))
    g_a, g_b, g_ea, g_eb, g_sq, g_rho = buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]
    g_mu, g_bias, g_val, g_rl, g_ent0 = buf[6], buf[7], buf[8], buf[9], buf[10]
    g_base, g_logpi, r_om, r_om1, r_ent, r_hb = buf[11], buf[12], buf[13], buf[14], buf[15], buf[16]
    g_flip = np.empty(nb, dtype=np.bool_)
    r_ok = np.empty(nb, dtype=np.bool_)
    s_h = 0.0
    s_pi = 0.0
    s_hb = 0.0
    for s in range(start, stop, nb):
        e = min(s + nb, stop)
        for i in range(s, e):  # gather
            j = i - s
            n = ann[i]
            m = inst[i]
            c = cat[i]
            k = level[i]
            rho = e_tau[n] * e_delta[c]
            b = bias_n[n]
            mu = mu_m[m] + b
            sq = math.sqrt(rho)
            g_sq[j] = sq
            g_rho[j] = rho
            g_mu[j] = mu
            g_bias[j] = b
            g_rl[j] = rho * (inv_lam_m[m] + inv_bp_n[n])
            if ordinal:
                g_a[j], g_b[j], g_flip[j] = tn_mirror(lo_k[k], hi_k[k], mu, sq)
                g_ent0[j] = half_log_2pi - 0.5 * (log_e_tau[n] + log_e_delta[c])
            else:
                g_val[j] = val_k[k]
            if spam:
                cell = n * n_lev + k if per_ann else k
                logpi = logpi_t[cell]
                g_logpi[j] = logpi
                g_base[j] = a_n[n] + b_c[c] - logpi
        if ordinal:  # the table lookups, in a loop of their own
            for j in range(e - s):
                g_ea[j] = erfcx_pos(-g_a[j] * _INV_SQRT2, tab)
                g_eb[j] = erfcx_pos(abs(g_b[j]) * _INV_SQRT2, tab)
        ex_blk = ex_out[s:e]  # views indexed from 0: a loop over them is vectorised
        var_blk = var_out[s:e]
        for j in range(e - s):  # the arithmetic: no branch, no call (the flags select)
            d, var, log_z, e2, ok = tn_vector(
                g_a[j], g_b[j], g_flip[j], g_ea[j], g_eb[j], g_sq[j], narrow, far_tail
            )
            ex = g_mu[j] + d if ordinal else g_val[j]
            dd = ex - g_mu[j]
            rho_s = e2 if ordinal else g_rho[j] * dd * dd
            exact_logit = g_base[j] + log_z - 0.5 * g_rl[j]
            plain_logit = g_base[j] - half_log_2pi - 0.5 * (rho_s + g_rl[j])
            om, om1, hb = omega_vector(exact_logit if ordinal and exact else plain_logit)
            ex_blk[j] = ex
            var_blk[j] = var if ordinal else 0.0
            r_om[j] = om if spam else 1.0
            r_om1[j] = om1
            r_hb[j] = hb
            r_ent[j] = g_ent0[j] + log_z + 0.5 * e2 if ordinal else 0.0
            r_ok[j] = ok or not ordinal
        for i in range(s, e):  # the rare ratings tn_vector leaves, and the sums in rating order
            j = i - s
            if not r_ok[j]:
                k = level[i]
                sq = g_sq[j]
                mu = g_mu[j]
                d, var, log_z, e2 = tn_scalar(lo_k[k], hi_k[k], mu, sq, tnc)
                ex_out[i] = mu + d
                var_out[i] = var
                r_ent[j] = g_ent0[j] + log_z + 0.5 * e2
                if spam:
                    if exact:
                        logit = g_base[j] + log_z - 0.5 * g_rl[j]
                    else:
                        logit = g_base[j] - half_log_2pi - 0.5 * (e2 + g_rl[j])
                    r_om[j], r_om1[j], r_hb[j] = omega_vector(logit)
            n = ann[i]
            m = inst[i]
            om = r_om[j]
            if spam:
                om1 = r_om1[j]
                s_pi += om1 * g_logpi[j]
                s_hb += r_hb[j]
                if count_cells:
                    cell = n * n_lev + level[i] if per_ann else level[i]
                    acc_cell[t, cell] += om1
            omega_out[i] = om
            w = om * g_rho[j]
            acc_inst[t, m, 0] += w
            acc_inst[t, m, 1] += w * (ex_out[i] - g_bias[j])
            acc_ann[t, n] += om
            acc_cat[t, cat[i]] += om
            s_h += om * r_ent[j]
    acc_sc[t, 0] = s_h
    acc_sc[t, 1] = s_pi
    acc_sc[t, 2] = s_hb


def _pass_xy(codes, levels, inst_f, ann_f, cat_f, flags, tnc, out, acc) -> None:
    """Pass 1: q(x|y=1), q(y) and the sums for q(z), eps, the shapes, and the bound.

    ``codes`` (L,) x4: ann, inst, cat, level of each rating. ``levels``: lo_k, hi_k
    (thresholds, (K,)), val_k (values, (K,)), logpi_t: E[log pi] flat, (K,) shared by all
    annotators or (N*K,) per annotator (cell ``n*K + k``). ``inst_f`` (M,) x2: mu_m, inv_lam_m
    = 1/lambda_m (0 for gold instances). ``ann_f`` (N,) x5: e_tau, log_e_tau = log E[tau],
    a_n, bias_n (the bias mean; 0 without bias) and inv_bp_n (1/bias precision; 0 without);
    ``cat_f`` (C,) x3: e_delta, log_e_delta, b_c, where the logit of omega is ``a_n + b_c -
    E log pi + (log Z - rho (1/lambda_m + 1/bias_prec_n)/2)`` for the exact ordinal update,
    else ``a_n + b_c - log pi - log(2pi)/2 - rho S/2``; q(x|y=1) is centred at ``mu_m +
    bias_n``. ``flags``: (ordinal, spam, exact, per_ann, count_cells). ``tnc``: ``TN_CONSTS``.
    ``out`` (L,) x3: E[x], Var[x], omega. ``acc``: partial sums, one row per chunk: acc_inst
    ``(T, M, 2)`` [sum omega rho, sum omega rho (E x - bias_n)], acc_ann ``(T, N)`` and
    acc_cat ``(T, C)`` sum omega, acc_sc ``(T, 3)`` [sum omega H[q(x)], sum (1-omega) E log
    pi, sum H_Bernoulli(omega)], acc_cell ``(T, size of logpi_t)`` sum (1 - omega) per cell
    (only with ``count_cells``: a learned spam distribution).
    """
    n_chunks = acc[0].shape[0]
    n_rat = codes[0].size
    for t in prange(n_chunks):
        c = np.int64(t)  # signed, as range's index: one compiled chunk for both copies
        start, stop = c * n_rat // n_chunks, (c + 1) * n_rat // n_chunks
        _xy_chunk(c, start, stop, codes, levels, inst_f, ann_f, cat_f, flags, tnc, out, acc)


@_jit()
def _tau_chunk(t, start, stop, codes, ex, var_ws, omega, inst_f, e_delta, acc_ann, acc_b) -> None:
    """Pass 2 over ratings ``start:stop`` into row ``t`` (see ``pass_tau``)."""
    ann, inst, cat, _ = codes
    mu_m, inv_lam_m = inst_f
    bias = acc_b.shape[1] > 0
    for i in range(start, stop):
        m = inst[i]
        n = ann[i]
        d = ex[i] - mu_m[m]
        om = omega[i]
        ws = om * (d * d + var_ws[i] + inv_lam_m[m])
        var_ws[i] = ws
        ed = e_delta[cat[i]]
        acc_ann[t, n] += ws * ed
        if bias:
            ex[i] = d
            w = om * ed
            acc_b[t, n, 0] += w
            acc_b[t, n, 1] += w * d


def _pass_tau(codes, ex, var_ws, omega, inst_f, e_delta, acc_ann, acc_b) -> None:
    """Pass 2: with the new q(z) ``inst_f`` (M,) x2 (mu_m, 1/lambda_m, 0 for gold);
    ``var_ws`` (L,) goes in as Var[x], out as omega (d^2 + Var x + 1/lambda_m) with ``d = E x -
    mu_m``: omega S without the bias, or omega S itself. acc_ann ``(T, N)``: per chunk ``sum
    omega E[delta] (d^2 + Var x + 1/lambda_m)`` (e_delta (C,) the OLD E[delta]). With the bias
    (acc_b ``(T, N, 2)``, else ``(T, 0, 2)``): ``ex`` goes out as ``d`` and acc_b holds ``sum
    omega E[delta]`` and ``sum omega E[delta] d``, from which ``phases.bias_step`` gets q(b)
    and the tau sums with S's bias terms, without another pass."""
    n_chunks = acc_ann.shape[0]
    n_rat = codes[0].size
    for t in prange(n_chunks):
        c = np.int64(t)  # signed, as range's index: one compiled chunk for both copies
        start, stop = c * n_rat // n_chunks, (c + 1) * n_rat // n_chunks
        _tau_chunk(c, start, stop, codes, ex, var_ws, omega, inst_f, e_delta, acc_ann, acc_b)


@_jit()
def _delta_chunk(t, start, stop, codes, ws, e_tau, bias_f, acc_cat) -> None:
    """Pass 3 over ratings ``start:stop`` into row ``t`` (see ``pass_delta``)."""
    ann, _, cat, _ = codes
    d_l, omega, bias_n, inv_bp_n = bias_f
    bias = bias_n.size > 0
    for i in range(start, stop):
        n = ann[i]
        s = ws[i]
        if bias:
            b = bias_n[n]
            s += omega[i] * (inv_bp_n[n] + b * (b - 2.0 * d_l[i]))
        acc_cat[t, cat[i]] += s * e_tau[n]


def _pass_delta(codes, ws, e_tau, bias_f, acc_cat) -> None:
    """Pass 3: acc_cat ``(T, C)`` per chunk ``sum omega E[tau] S`` (e_tau (N,) the NEW E[tau]).

    ``bias_f``: (d (L,), omega (L,), bias_mean (N,), 1/bias_prec (N,)) from pass 2 and
    ``phases.bias_step``: S gets the new bias, ``(d - b)^2 + 1/bias_prec = d^2 + b (b - 2 d) +
    1/bias_prec``; without the bias, empty arrays.
    """
    n_chunks = acc_cat.shape[0]
    n_rat = codes[0].size
    for t in prange(n_chunks):
        c = np.int64(t)  # signed, as range's index: one compiled chunk for both copies
        start, stop = c * n_rat // n_chunks, (c + 1) * n_rat // n_chunks
        _delta_chunk(c, start, stop, codes, ws, e_tau, bias_f, acc_cat)


def parallel_and_serial(driver):
    """One driver compiled twice: over chunks in numba's threads, and on the calling thread
    (``prange`` runs as ``range`` there), both ``nogil``: restarts run side by side, and the
    label fit beside the race (``estimators.label_thread``). The
    chunks are the same, so both give bit-identical results. The serial copy gets its own
    name, so numba caches the two apart. A driver hands its chunk function the chunk's index
    as ``np.int64`` (numba types ``prange``'s index unsigned, ``range``'s signed): both copies
    then call the one compiled chunk instead of compiling it twice."""
    serial = types.FunctionType(
        driver.__code__, driver.__globals__, driver.__name__ + "_serial", driver.__defaults__
    )
    serial.__qualname__ = driver.__qualname__ + "_serial"
    serial.__doc__ = driver.__doc__
    return _jit(parallel=True, nogil=True)(driver), _jit(nogil=True)(serial)


pass_xy, pass_xy_serial = parallel_and_serial(_pass_xy)
pass_tau, pass_tau_serial = parallel_and_serial(_pass_tau)
pass_delta, pass_delta_serial = parallel_and_serial(_pass_delta)
tn_stats_parallel, tn_stats_serial = parallel_and_serial(tn_stats_arrays)


#: below this many ratings the passes run on one thread (a parallel launch costs more)
PARALLEL_MIN_RATINGS = 200_000


#: at least this many ratings per chunk (a chunk's partial sums are zeroed and added per pass)
CHUNK_RATINGS = 32_768
#: at most this many chunks (load balance on up to 64 threads)
MAX_CHUNKS = 64
#: the partial sums hold at most this many floats per rating (memory stays O(L))
CHUNK_FLOATS_PER_RATING = 2


def n_chunks(n_ratings: int, width: int) -> int:
    """Number of chunks (rows of partial sums) of the passes over ``n_ratings`` ratings whose
    partial sums have ``width`` floats per chunk (``2M + N + C + 3`` for pass 1).

    A function of the data's sizes only, never of the thread count or the machine, so the
    summation order, and the fit, are the same on one thread or many:
    ``min(MAX_CHUNKS, L // CHUNK_RATINGS, 2 L // width)``, at least 1. Memory of the partial
    sums: ``T * width <= min(64 * width, 2 L)`` floats (no more than two per rating).
    """
    by_size = n_ratings // CHUNK_RATINGS
    by_memory = CHUNK_FLOATS_PER_RATING * n_ratings // max(int(width), 1)
    return max(1, min(MAX_CHUNKS, by_size, by_memory))


#: per thread, what the race set for its passes: ``check()`` says whether this thread's sweep is
#: the only one running, so that its passes may take every core (``run_alone``; unset, the
#: size alone decides), and ``turn`` is the lock it lets go of while they run (``take_turns``)
_RACE = threading.local()


def run_alone(check: Callable[[], bool] | None) -> None:
    """Set (or, with None, clear) this thread's ``check``: ``passes`` takes the parallel
    passes for a smaller input too while ``check()`` is true. ``OrdinalMixture``'s race sets
    it while restarts run in threads: a restart that runs alone (the shared warm-up, the
    last finisher's tail) then uses both cores. The chunks are the same either way (a function
    of the data's sizes), so the results are too, to the bit."""
    _RACE.check = check


def take_turns(turn: threading.Lock | None) -> None:
    """Set (or, with None, clear) this thread's turn lock: a thread that holds ``turn`` while it
    runs Python hands it over only while its passes run (``passes`` wraps them).

    Restarts side by side in threads otherwise hand the GIL to each other at every small
    numpy call of a sweep's bookkeeping (numpy lets go of the GIL for each), and each such
    handover waits for the other thread; taking turns leaves one thread's bookkeeping to run
    while the other's passes run. It orders nothing that the results depend on."""
    _RACE.turn = turn


def _taking_turns(fn: Callable, turn: threading.Lock) -> Callable:
    def call(*args):
        turn.release()
        try:
            return fn(*args)
        finally:
            turn.acquire()

    call.__wrapped__ = fn  # what runs, for a look from outside (tests)
    return call


def passes(n_ratings: int, n_chunks: int) -> tuple:
    """The three pass functions to use: parallel ones for several chunks of a large input, or
    of any input while this thread's sweep runs alone (``run_alone``); each lets go of this
    thread's turn lock while it runs (``take_turns``)."""
    if n_chunks > 1 and (n_ratings >= PARALLEL_MIN_RATINGS or _alone()):
        fns = (pass_xy, pass_tau, pass_delta)
    else:
        fns = (pass_xy_serial, pass_tau_serial, pass_delta_serial)
    return tuple(_in_turn(fn) for fn in fns)


def _in_turn(fn: Callable) -> Callable:
    """``fn``, letting go of this thread's turn lock while it runs when it holds one
    (``take_turns``)."""
    turn = getattr(_RACE, "turn", None)
    return fn if turn is None else _taking_turns(fn, turn)


def use_cores(size: int) -> bool:
    """Whether an elementwise kernel over ``size`` values takes the cores: from
    ``PARALLEL_MIN_RATINGS``, or from ``CHUNK_RATINGS`` while this thread's sweep runs alone
    (``run_alone``); below, waking numba's threads costs more than it saves."""
    return size >= PARALLEL_MIN_RATINGS or (size >= CHUNK_RATINGS and _alone())


def _alone() -> bool:
    check = getattr(_RACE, "check", None)
    return check is not None and bool(check())


@_jit(parallel=True)
def _grid_loglik(order, starts, log_r, clip, log_e_t, log_1me_t, out_t):  # pragma: no cover
    n, g = out_t.shape
    for a in prange(n):
        le = log_e_t[a]
        l1 = log_1me_t[a]
        o = out_t[a]
        for p in range(starts[a], starts[a + 1]):
            r = min(max(log_r[order[p]], -clip), clip)
            for k in range(g):  # no branch, no call: on the vector units
                x = l1[k]
                y = le[k] + r
                hi = x if x >= y else y
                t = vector_math.exp((y if x >= y else x) - hi)
                u = 1.0 + t
                o[k] += hi + (t if u == 1.0 else vector_math.log(u) * (t / (u - 1.0)))


def grid_loglik(
    ann: np.ndarray,
    log_r: np.ndarray,
    clip: float,
    log_e: np.ndarray,
    log_1me: np.ndarray,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """(G, N): for each node k and annotator n, the sum over n's ratings i of
    ``logaddexp(log_1me[k, n], log_e[k, n] + clip(log_r[i]))``, i.e. ``log(1 - eps + eps r)``
    with ``eps = exp(log_e[k, n])`` (``reliability.reliability_posterior``'s grid). ``ann``,
    ``log_r``: (L,); ``log_e``, ``log_1me``: (G, N). The annotators over the cores, each
    annotator's ratings in rating order (each sum taken as ``np.bincount`` takes it) and its
    nodes in one loop on the vector units (``vector_math``'s exp and log: ``log1p`` as
    ``log(1 + t) t / ((1 + t) - 1)``, within a few ulp); each node's sums are the same
    whatever the other nodes of the call. ``order``: ``np.argsort(ann, kind="stable")``, when
    the caller keeps it for several calls (else sorted here)."""
    ann = np.ascontiguousarray(ann)
    n = log_e.shape[1]
    if order is None:
        order = np.argsort(ann, kind="stable")
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ann, minlength=n), out=starts[1:])
    out_t = np.zeros((n, log_e.shape[0]))
    _grid_loglik(
        order, starts, np.ascontiguousarray(log_r, dtype=np.float64), float(clip),
        np.ascontiguousarray(log_e.T), np.ascontiguousarray(log_1me.T), out_t,
    )  # fmt: skip
    return np.ascontiguousarray(out_t.T)


def _eps_block_grouped(
    order, starts, w, e, x, blo, bhi, done, lo, hi, iters, tol_rel
):  # pragma: no cover
    for k in prange(x.size):
        ek = e[k]
        for _ in range(iters):
            if done[k]:
                break
            gk, hk = 0.0, 0.0
            for j in range(starts[k], starts[k + 1]):  # k's ratings in rating order
                i = order[j]
                a = w[i] - ek
                t = a / ((1.0 - w[i]) * ek + x[k] * a)
                gk += t
                hk += t * t
            xk = x[k]
            at_end = (xk <= lo and gk <= 0.0) or (xk >= hi and gk >= 0.0) or gk == 0.0
            if gk > 0.0:
                blo[k] = xk
            if gk < 0.0:
                bhi[k] = xk
            if at_end:
                done[k] = True
                continue
            q = xk * (1.0 - xk)
            step = -q * gk / ((1.0 - 2.0 * xk) * gk - q * hk)
            ok = math.isfinite(step)
            xn = min(max(xk + step, lo), hi) if ok else xk
            to_hi = ok and gk > 0.0 and bhi[k] == 1.0 and xn - xk > 0.5 * (hi - xk)
            to_lo = ok and gk < 0.0 and blo[k] == 0.0 and xk - xn > 0.5 * (xk - lo)
            inside = ok and xn > blo[k] and xn < bhi[k] and (xn - xk) * gk > 0.0
            ca, cb = min(max(blo[k], lo), hi), min(max(bhi[k], lo), hi)
            tol = tol_rel * min(xk, 1.0 - xk)
            conv = (ok and abs(step) <= tol) or cb - ca <= tol  # Newton's own step is tiny
            if to_hi:
                xn = hi
            elif to_lo:
                xn = lo
            elif not inside:
                s, c = math.sqrt(ca * cb), math.sqrt((1.0 - ca) * (1.0 - cb))
                xn = s / (s + c)
            if conv and ok and not to_hi and not to_lo:
                xn = xk
            if conv:
                done[k] = True
            x[k] = xn


eps_block_parallel, eps_block_serial = parallel_and_serial(_eps_block_grouped)


@_jit(nogil=True)
def _eps_sums_rows(ann, w, e, x, g, h):  # pragma: no cover
    for i in range(ann.size):  # in rating order, each sum as ``np.bincount`` takes it
        k = ann[i]
        ek = e[k]
        a = w[i] - ek
        t = a / ((1.0 - w[i]) * ek + x[k] * a)
        g[k] += t
        h[k] += t * t


def eps_block_sums(
    ann: np.ndarray, omega: np.ndarray, eps_used: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``updates.eps_block_sums`` of ``updates.eps_block_terms(omega, eps_used[ann])`` in one
    pass, to the bit: ``(g, h)`` (N,) at ``x`` (N,), with ``ann``, ``omega`` (L,) and
    ``eps_used`` (N,). No per-rating temporaries: the Dask engine's blocks run it once a
    Newton step of the exact eps step (``dask_engine.blocks.eps_sums``)."""
    n = x.size
    g, h = np.zeros(n), np.zeros(n)
    _eps_sums_rows(
        np.ascontiguousarray(ann), np.ascontiguousarray(omega, dtype=np.float64),
        np.ascontiguousarray(eps_used, dtype=np.float64),
        np.ascontiguousarray(x, dtype=np.float64), g, h,
    )  # fmt: skip
    return g, h


def annotator_groups(ann: np.ndarray, n_annotators: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the ratings ``ann`` (L,) grouped by annotator, each annotator's in
    rating order (a stable sort), annotator ``n``'s at ``order[starts[n]:starts[n + 1]]``;
    computed once per fit for ``eps_block``."""
    ann = np.ascontiguousarray(ann)
    starts = np.zeros(n_annotators + 1, dtype=np.int64)
    np.cumsum(np.bincount(ann, minlength=n_annotators), out=starts[1:])
    # 4 bytes a rating (the ratings' own codes are int32), 8 only past 2**31 ratings
    order = np.empty(ann.size, dtype=np.int32 if ann.size < 2**31 else np.int64)
    _counting_order(ann, starts[:-1].copy(), order)
    return order, starts


@_jit(nogil=True)
def _counting_order(ann, pos, order):  # pragma: no cover
    for i in range(ann.size):  # a counting sort: stable, one pass
        k = ann[i]
        order[pos[k]] = i
        pos[k] += 1


def eps_block(
    groups: tuple[np.ndarray, np.ndarray],
    omega: np.ndarray,
    eps_used: np.ndarray,
    start: np.ndarray,
) -> np.ndarray:
    """``updates.eps_block`` compiled, over the ratings grouped by annotator (``groups``:
    ``annotator_groups(ann, N)``): each annotator's sums over its ratings in rating order and
    its Newton steps, as ``updates.eps_block`` takes them (an annotator's steps depend on its
    own ratings only), so the same bits on any number of threads. Annotators run over the
    cores for a large input or while this thread's sweep runs alone (``passes``' rule), else
    on the calling thread without the GIL (the other restart's thread runs meanwhile); an
    annotator's later steps read only its own ratings, not all of them."""
    order, starts = groups
    n = start.size
    x = eps_block_start(start)
    done = np.zeros(n, dtype=np.bool_)  # an annotator without ratings: g = 0 at once
    blo, bhi = np.zeros(n), np.ones(n)  # no end tried yet
    parallel = order.size >= PARALLEL_MIN_RATINGS or _alone()
    solve = _in_turn(eps_block_parallel if parallel else eps_block_serial)
    solve(
        order, starts, np.ascontiguousarray(omega, dtype=np.float64),
        np.ascontiguousarray(eps_used, dtype=np.float64), x, blo, bhi, done, EPS_FLOOR,
        1.0 - EPS_FLOOR, EPS_BLOCK_ITERS, EPS_BLOCK_TOL,
    )  # fmt: skip
    return x


def tn_stats(lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, prec: np.ndarray):
    """``truncnorm.tn_stats`` computed by the fused kernel's formulas; returns a
    ``truncnorm.TNStats``. Over the cores from ``PARALLEL_MIN_RATINGS`` values, or from
    ``CHUNK_RATINGS`` while this thread's sweep runs alone (``run_alone``: the settle's rounds
    over a few annotators' items at 1M ratings, 13-350k values), else on the calling thread
    (waking numba's threads costs more than a few values); the same values either way."""
    f = [np.ascontiguousarray(x, dtype=np.float64) for x in np.broadcast_arrays(lo, hi, mean, prec)]
    arrays = tn_stats_parallel if use_cores(f[0].size) else tn_stats_serial
    ex, var, log_z, ent = arrays(*[x.ravel() for x in f], TN_CONSTS)
    shape = f[0].shape
    return truncnorm.TNStats(*(x.reshape(shape) for x in (ex, var, log_z, ent)))
