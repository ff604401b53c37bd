"""Coordinate-ascent updates of the ordinal-discrete-mixture's variational factors.

Pure array functions. ``L`` ratings, ``M`` instances, ``N`` annotators, ``C`` categories; a
suffix ``_l`` marks a per-rating gather (e.g. ``e_tau_l = e_tau[ann]``). Each update (with
``exact=True`` for q(y)) maximises the lower bound over its factor given all the others, so
the bound never decreases over a sweep (docs/model.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import digamma, expit, polygamma

from ..numerics import gamma_functions, libm

_LOG_2PI = math.log(2.0 * math.pi)  # libm.log gives these bits too (a test checks)
#: eps is kept this far inside (0, 1) so that log eps and log(1 - eps) stay finite
EPS_FLOOR = 1e-10
#: lower limit of the learned rate beta of the expertise prior (see gamma_prior_mle)
TAU_RATE_FLOOR = 1e-3


def gamma_moments(shape: np.ndarray, rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``E[t]`` and ``E[log t]`` of Gamma(shape, rate) (rate parametrisation); shapes as input."""
    e_t, e_logt, _ = gamma_stats(shape, rate)
    return e_t, e_logt


def gamma_stats(shape: np.ndarray, rate: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``E[t]``, ``E[log t]`` and ``digamma(shape)`` of Gamma(shape, rate); each as input
    (digamma on the vector units: ``numerics.gamma_functions``)."""
    dig = gamma_functions.digamma(shape)
    return shape / rate, dig - libm.log(rate), dig


def expected_sq(ex: np.ndarray, var: np.ndarray, mu_l: np.ndarray, lam_l: np.ndarray) -> np.ndarray:
    """``S_l = E[(x_l - z_m)^2] = (E x - mu_m)^2 + Var x + 1/lambda_m``; all ``(L,)``."""
    d = ex - mu_l
    return d * d + var + 1.0 / lam_l


def expected_sq_inv(
    ex: np.ndarray, var: np.ndarray, centre_l: np.ndarray, inv_prec_l: np.ndarray
) -> np.ndarray:
    """``S_l = (E x - centre)^2 + Var x + inv_prec``: ``expected_sq`` with the posterior
    variances given (``1/lambda_m``, plus ``1/bias_prec_n`` and the bias in ``centre`` when
    the annotator bias is modelled; 0 for a gold instance); all ``(L,)``."""
    d = ex - centre_l
    return d * d + var + inv_prec_l


def omega_logit(
    log_eps_l: np.ndarray,
    log1m_eps_l: np.ndarray,
    log_pi_l: np.ndarray,
    e_logtau_l: np.ndarray,
    e_logdelta_l: np.ndarray,
    rho_l: np.ndarray,
    s_l: np.ndarray,
    entropy_l: np.ndarray | None,
    exact: bool = True,
) -> np.ndarray:
    """``logit(omega_l)``, the log-odds that rating l comes from the truth, not spam; ``(L,)``.

    exact: the mean-field optimum (docs/model.md), entropy of q(x|y=1) included
    (``entropy_l=None`` for the real-valued likelihood, where x is observed). Otherwise the
    paper's literal eq. (4): ``E[tau]E[delta]`` plugged into the Gaussian, no entropy.
    """
    base = log_eps_l - log1m_eps_l - log_pi_l - 0.5 * _LOG_2PI - 0.5 * rho_l * s_l
    if exact:
        out = base + 0.5 * (e_logtau_l + e_logdelta_l)
        if entropy_l is not None:
            out = out + entropy_l
        return out
    return base + 0.5 * libm.log(rho_l)


def omega_from_logit(logit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(omega, 1 - omega)``, each computed directly so neither loses precision near 0."""
    return expit(logit), expit(-logit)


def update_z(
    inst: np.ndarray,
    w_l: np.ndarray,
    ex: np.ndarray,
    mu: float,
    lam: float,
    n_instances: int,
) -> tuple[np.ndarray, np.ndarray]:
    """q(z_m) = N(mu_m, 1/lambda_m), ``w_l = omega_l E[tau_n] E[delta_c]``; returns (M,), (M,)."""
    return z_from_sums(
        np.bincount(inst, weights=w_l, minlength=n_instances),
        np.bincount(inst, weights=w_l * ex, minlength=n_instances),
        mu,
        lam,
    )


def z_from_sums(
    sum_w: np.ndarray, sum_wx: np.ndarray, mu: float, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(mu_m, lambda_m)`` of q(z) from per-instance ``sum w`` and ``sum w E[x]``, each (M,)
    (the fused sweep accumulates them in its pass over the ratings)."""
    lam_m = lam + sum_w
    mu_m = (mu * lam + sum_wx) / lam_m
    return mu_m, lam_m


def update_gamma_factor(
    group: np.ndarray,
    omega: np.ndarray,
    other_l: np.ndarray,
    s_l: np.ndarray,
    shape0: float,
    rate0: float,
    size: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Gamma posterior of tau (group = annotator, other = E[delta]) or delta (the reverse).

    ``shape = shape0 + 0.5 sum omega``, ``rate = rate0 + 0.5 sum omega other S``; (size,) each.
    """
    return gamma_from_sums(
        np.bincount(group, weights=omega, minlength=size),
        np.bincount(group, weights=omega * other_l * s_l, minlength=size),
        shape0,
        rate0,
    )


def gamma_from_sums(
    sum_w: np.ndarray, sum_ws: np.ndarray, shape0: float, rate0: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(shape0 + sum_w / 2, rate0 + sum_ws / 2)``: the Gamma posterior from the sums of omega
    and of omega E[other] S per group."""
    return shape0 + 0.5 * sum_w, rate0 + 0.5 * sum_ws


def update_eps(ann: np.ndarray, omega: np.ndarray, n_ratings_n: np.ndarray) -> np.ndarray:
    """Eq. (5): eps_n = mean of omega over n's ratings, kept inside [EPS_FLOOR, 1 - EPS_FLOOR]."""
    return eps_from_sums(np.bincount(ann, weights=omega, minlength=n_ratings_n.size), n_ratings_n)


#: Newton steps at most of ``eps_block`` (it stops when every annotator's has converged: about 5
#: on TREC RF10)
EPS_BLOCK_ITERS = 50
#: ``eps_block`` has converged when a step, or the bracket, is below this share of the
#: distance to the nearer end of (0, 1)
EPS_BLOCK_TOL = 1e-6


def eps_block(
    ann: np.ndarray, omega: np.ndarray, eps_used: np.ndarray, start: np.ndarray
) -> np.ndarray:
    """The exact maximiser of the bound over each annotator's eps together with the q(y) of
    its ratings, the other factors fixed; ``(N,)``.

    ``omega`` (L,) was computed with ``eps_used`` (N,), so each rating's likelihood ratio,
    truth against spam, is ``r_l = odds(omega_l) / odds(eps_used_n)``; with q(y) at its
    optimum the bound's eps terms are ``sum_l log(1 - e + e r_l)``, concave in ``e``, whose
    maximiser on ``[EPS_FLOOR, 1 - EPS_FLOOR]`` this returns (safeguarded Newton from
    ``start``, e.g. eq. (5)'s mean of omega). Eq. (5) is one EM step towards it: near 0 or 1
    an annotator whose ratings favour the other side leaves its end by a few per cent a sweep,
    and this moves it in one. With ``a_l = omega_l - e_n``, ``b_l = (1 - omega_l) e_n`` the
    derivative is ``sum_l a_l / (b_l + e a_l)``: no logs, no overflow. ``kernels.eps_block``
    is the same loop compiled."""
    ann = np.asarray(ann)
    n = start.size
    a, b = eps_block_terms(omega, np.asarray(eps_used, dtype=float)[ann])

    def sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return eps_block_sums(ann, a, b, x, n)

    return eps_block_solve(sums, start, np.bincount(ann, minlength=n) > 0)


def eps_block_terms(omega: np.ndarray, eps_used_l: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``eps_block``'s per-rating ``a_l = omega_l - e_n`` and ``b_l = (1 - omega_l) e_n``,
    ``(L,)`` each (``eps_used_l``: the eps q(y) was computed with, gathered per rating)."""
    w = np.asarray(omega, dtype=float)
    return w - eps_used_l, (1.0 - w) * eps_used_l


def eps_block_sums(
    ann: np.ndarray, a: np.ndarray, b: np.ndarray, x: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(g, h)`` (N,) at ``x`` (N,): the derivative of ``eps_block``'s objective and minus
    its second derivative, ``sum_l t_l`` and ``sum_l t_l^2`` with ``t_l = a_l / (b_l + x
    a_l)``, summed over each annotator's ratings in order (``np.bincount``)."""
    t = a / (b + x[ann] * a)
    return np.bincount(ann, weights=t, minlength=n), np.bincount(ann, weights=t * t, minlength=n)


def eps_block_start(eps: np.ndarray) -> np.ndarray:
    """(N,) where ``eps_block``'s Newton starts from ``eps`` (N,): inside ``[EPS_FLOOR, 1 -
    EPS_FLOOR]``, the point of its first round's sums (and of an engine's ``eps_slopes``)."""
    return np.clip(np.asarray(eps, dtype=float), EPS_FLOOR, 1.0 - EPS_FLOOR)


def eps_block_solve(
    sums: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    start: np.ndarray,
    rated: np.ndarray,
) -> np.ndarray:
    """``eps_block``'s safeguarded Newton iterations (``_eps_newton``) from ``start`` (N,),
    with ``sums(x) -> (g, h)`` over all ratings (one block's, or every block's added: the
    Dask engine); annotators not ``rated`` keep ``start``."""
    n = start.size
    x = eps_block_start(start)
    blo, bhi = np.zeros(n), np.ones(n)  # no end tried yet
    done = ~np.asarray(rated, dtype=bool)
    for _ in range(EPS_BLOCK_ITERS):
        g, h = sums(x)
        x, blo, bhi, done = _eps_newton(x, g, h, blo, bhi, done)
        if done.all():
            break
    return x


def _eps_newton(
    x: np.ndarray, g: np.ndarray, h: np.ndarray, blo: np.ndarray, bhi: np.ndarray, done: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One safeguarded Newton step of ``eps_block`` for every annotator not ``done``.

    Newton on ``x (1 - x) g(x)`` (``h = -g'``), which has the same root and is linear in the
    terms of ratings that are surely truth or surely spam (``1/x``, ``-1/(1 - x)`` in ``g``,
    on which Newton on ``g`` overshoots). The bracket ``[blo, bhi]`` (0 and 1 until an end
    is evaluated) shrinks to x on the side the derivative ``g`` points away from. A step
    that heads more than halfway to an end not yet tried goes to that end (a maximiser at
    the end is then found in one step, not by halving the distance to it); one that leaves
    the bracket, or goes downhill, bisects it in log-odds (``sqrt`` only, so the compiled
    loop gives the same bits). An end reached with ``g`` pointing out is the maximiser."""
    lo, hi = EPS_FLOOR, 1.0 - EPS_FLOOR
    at_end = ((x <= lo) & (g <= 0)) | ((x >= hi) & (g >= 0)) | (g == 0)
    blo = np.where(g > 0, x, blo)
    bhi = np.where(g < 0, x, bhi)
    with np.errstate(divide="ignore", invalid="ignore"):  # Newton on x (1 - x) g(x)
        q = x * (1.0 - x)
        step = -q * g / ((1.0 - 2.0 * x) * g - q * h)
    ok = np.isfinite(step)
    xn = np.where(ok, np.clip(x + step, lo, hi), x)
    to_hi = ok & (g > 0) & (bhi == 1.0) & (xn - x > 0.5 * (hi - x))
    to_lo = ok & (g < 0) & (blo == 0.0) & (x - xn > 0.5 * (x - lo))
    inside = ok & (xn > blo) & (xn < bhi) & ((xn - x) * g > 0)  # uphill only
    a, b = np.clip(blo, lo, hi), np.clip(bhi, lo, hi)
    s, c = np.sqrt(a * b), np.sqrt((1.0 - a) * (1.0 - b))
    mid = s / (s + c)  # the midpoint of [a, b] in log-odds
    tol = EPS_BLOCK_TOL * np.minimum(x, 1.0 - x)
    conv = (ok & (np.abs(step) <= tol)) | (b - a <= tol)  # Newton's own step is tiny
    xn = np.where(to_hi, hi, np.where(to_lo, lo, np.where(inside, xn, mid)))
    xn = np.where(conv & ok & ~to_hi & ~to_lo, x, xn)
    new_done = done | at_end | conv
    x = np.where(done | at_end, x, xn)
    return x, blo, bhi, new_done


def eps_from_sums(sum_omega: np.ndarray, n_ratings_n: np.ndarray) -> np.ndarray:
    """Eq. (5) from the sum of omega per annotator (N,)."""
    return np.clip(sum_omega / np.maximum(n_ratings_n, 1), EPS_FLOOR, 1.0 - EPS_FLOOR)


def gamma_prior_mle(
    e_t: np.ndarray, e_logt: np.ndarray, min_rate: float = 0.0, max_shape: float = 1e8
) -> tuple[float, float]:
    """Type-II ML of a Gamma(alpha, beta) prior from q's ``E[t]``, ``E[log t]`` (each (N,)).

    Maximises ``sum_n E_q[log Gamma(t_n | alpha, beta)]`` subject to ``beta >= min_rate``:
    ``beta = alpha / mean(E t)`` with ``log alpha - digamma(alpha) = log mean(E t) - mean(E log t)``
    (Minka's Newton step); if that beta is below ``min_rate``, beta = min_rate and alpha solves
    ``digamma(alpha) = log beta + mean(E log t)``. The floor keeps the real-valued likelihood,
    whose bound is unbounded as one annotator's precision grows, from running off to infinity.
    """
    mean_t = float(np.mean(e_t))
    mean_logt = float(np.mean(e_logt))
    s = float(libm.log(mean_t) - mean_logt)
    if not np.isfinite(s) or s <= 1.0 / max_shape:
        alpha = max_shape
    else:
        alpha = (3.0 - s + np.sqrt((s - 3.0) ** 2 + 24.0 * s)) / (12.0 * s)
        for _ in range(50):
            g = libm.log(alpha) - digamma(alpha) - s
            h = 1.0 / alpha - polygamma(1, alpha)
            new = 1.0 / (1.0 / alpha + g / (alpha * alpha * h))
            if not np.isfinite(new) or new <= 0:
                break
            done = abs(new - alpha) <= 1e-12 * alpha
            alpha = min(float(new), max_shape)
            if done:
                break
    beta = alpha / mean_t
    if beta < min_rate:
        beta = min_rate
        alpha = min(inverse_digamma(libm.log(beta) + mean_logt), max_shape)
    return alpha, beta


def inverse_digamma_array(y: np.ndarray, iters: int = 8) -> np.ndarray:
    """``inverse_digamma`` elementwise on an array (the same start and Newton steps)."""
    y = np.asarray(y, dtype=float)
    x = np.where(
        y >= -2.22,
        libm.exp(np.minimum(y, 700.0)) + 0.5,
        -1.0 / (np.minimum(y, -2.22) - digamma(1.0)),
    )
    for _ in range(iters):
        x = x - (digamma(x) - y) / polygamma(1, x)
    return x


def inverse_digamma(y: float, iters: int = 8) -> float:
    """x with digamma(x) = y (Minka's initialisation and Newton iterations)."""
    x = libm.exp(y) + 0.5 if y >= -2.22 else -1.0 / (y - digamma(1.0))
    for _ in range(iters):
        x = x - (digamma(x) - y) / polygamma(1, x)
    return float(x)


# --------------------------------------------------------------------------- extensions
# Annotator bias, learned spam distributions and gold items (derivations in
# docs/extensions.md). Names: q(b_n) = N(bias_mean_n, 1/bias_prec_n), b_n ~ N(0, 1/lam_b); the
# per-annotator spam distribution q(pi_n) = Dirichlet(dir_a_n), pi_n ~ Dirichlet(kappa pi).

#: learned spam probabilities are kept at least this large, so log pi stays finite
PI_FLOOR = 1e-12
#: range of the learned Dirichlet concentration kappa (bisection on log kappa)
KAPPA_RANGE = (1e-3, 1e6)


def inv_lam_z(lam_m: np.ndarray, gold_mask: np.ndarray | None) -> np.ndarray:
    """``1/lambda_m`` (M,), 0 for gold instances (their z is observed, no posterior spread)."""
    inv = 1.0 / lam_m
    if gold_mask is not None:
        inv = np.where(gold_mask, 0.0, inv)
    return inv


def apply_gold(mu_m: np.ndarray, gold: np.ndarray | None) -> np.ndarray:
    """q(z)'s means with the known truth of gold instances (``gold`` (M,), NaN: unknown)."""
    if gold is None:
        return mu_m
    return np.where(np.isfinite(gold), gold, mu_m)


def spam_log_table(
    spam_dist: str, log_pi: np.ndarray, pi: np.ndarray | None, dir_a: np.ndarray | None
) -> np.ndarray:
    """``E[log pi_{n,k}]`` as a table: (1, K) for a spam distribution shared by all annotators
    (``uniform``: the fixed ``log_pi``; ``global``: the learned ``pi``), (N, K) per annotator
    (``annotator``: digamma(a_nk) - digamma(sum_k a_nk))."""
    if spam_dist == "global":
        return libm.log(pi)[None, :]
    if spam_dist == "annotator":
        return digamma(dir_a) - digamma(dir_a.sum(axis=1, keepdims=True))
    return np.asarray(log_pi, dtype=float)[None, :]


def spam_cells(ann: np.ndarray, level: np.ndarray, k: int, per_annotator: bool) -> np.ndarray:
    """(L,) flat index of each rating's cell in ``spam_log_table`` (row n or 0, column level)."""
    if per_annotator:
        return ann.astype(np.intp) * k + level
    return level.astype(np.intp)


def update_bias(
    sum_w: np.ndarray, sum_wd: np.ndarray, lam_b: float
) -> tuple[np.ndarray, np.ndarray]:
    """q(b_n): ``bias_prec = lam_b + sum w``, ``bias_mean = sum w (E x - mu_m) / bias_prec``.

    ``sum_w`` (N,): sum over n's ratings of ``omega rho``; ``sum_wd`` (N,): of ``omega rho
    (E x_l - mu_m)`` with the NEW q(z). Returns ``(bias_mean, bias_prec)``.
    """
    bias_prec = lam_b + sum_w
    return sum_wd / bias_prec, bias_prec


def bias_prior_mle(bias_mean: np.ndarray, bias_prec: np.ndarray) -> float:
    """Type-II ML of the bias prior's precision: ``N / sum_n (bias_mean^2 + 1/bias_prec)``."""
    return float(bias_mean.size / np.sum(bias_mean * bias_mean + 1.0 / bias_prec))


def update_global_pi(spam_count_k: np.ndarray) -> np.ndarray:
    """The learned spam distribution (K,) from the spam weight per level
    ``sum_{l: r_l = k} (1 - omega_l)`` (type-II ML), floored at ``PI_FLOOR``."""
    pi = np.maximum(spam_count_k, PI_FLOOR)
    pi = pi / pi.sum()
    pi = np.maximum(pi, PI_FLOOR)
    return pi / pi.sum()


def _dirichlet_pi(meanlog: np.ndarray, kappa: float) -> np.ndarray:
    """argmax over the simplex of ``sum_k (kappa pi_k) m_k - lgamma(kappa pi_k)`` (exact):
    ``digamma(kappa pi_k) = m_k + c`` with ``c`` such that ``sum pi = 1`` (bisection)."""
    lo, hi = -60.0, 60.0
    inv = inverse_digamma_array
    for _ in range(50):
        c = 0.5 * (lo + hi)
        if inv(meanlog + c).sum() > kappa:
            hi = c
        else:
            lo = c
    a = inv(meanlog + 0.5 * (lo + hi))
    pi = np.maximum(a / a.sum(), PI_FLOOR)
    return pi / pi.sum()


def _dirichlet_kappa(sum_el: np.ndarray, n: int, pi: np.ndarray) -> float:
    """argmax over kappa of ``n [lgamma(k) - sum lgamma(k pi)] + k sum_k pi_k sum_el_k``
    (concave in kappa): bisection on log kappa in ``KAPPA_RANGE``."""

    def grad(lk: float) -> float:
        k = libm.exp(lk)
        return n * (digamma(k) - np.sum(pi * digamma(k * pi))) + float(np.sum(pi * sum_el))

    lo, hi = libm.log(KAPPA_RANGE[0]), libm.log(KAPPA_RANGE[1])
    if grad(hi) > 0:
        return KAPPA_RANGE[1]
    if grad(lo) < 0:
        return KAPPA_RANGE[0]
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if grad(mid) > 0:
            lo = mid
        else:
            hi = mid
    return float(libm.exp(0.5 * (lo + hi)))


def update_annotator_pi(
    spam_count_nk: np.ndarray, pi: np.ndarray, kappa: float, n_alternations: int = 3
) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-annotator spam distributions: q(pi_n) = Dirichlet(kappa pi + counts_n), then the
    prior's ``pi`` and ``kappa`` by type-II ML (exact maximisers, alternated).

    ``spam_count_nk`` (N, K): ``sum_{l in n, r_l = k} (1 - omega_l)``. Returns
    ``(dir_a (N, K), pi (K,), kappa)``; each step raises the bound.
    """
    dir_a = kappa * pi[None, :] + spam_count_nk
    el = digamma(dir_a) - digamma(dir_a.sum(axis=1, keepdims=True))
    meanlog, sum_el = el.mean(axis=0), el.sum(axis=0)
    for _ in range(n_alternations):
        pi = _dirichlet_pi(meanlog, kappa)
        kappa = _dirichlet_kappa(sum_el, dir_a.shape[0], pi)
    return dir_a, pi, kappa
