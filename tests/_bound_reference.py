"""An independent computation of the variational lower bound F, term by term.

Shares no code with the engine: it imports nothing from ``ordmix_core`` and evaluates every
expectation by adaptive quadrature (``scipy.integrate.quad``) of ``scipy.stats`` densities, and
every entropy as ``-E_q[log q]`` the same way. A second, cruder estimate (``monte_carlo_bound``)
samples all latents from q jointly and averages ``log p(data, latents) - log q(latents)``
written as plain log densities, with no algebra at all: it checks that the terms below add up
to the bound the model defines (docs/model.md), not only that they equal the engine's.

Model (docs/model.md, paper eq. 1-3), per rating l = (n, m), c = c(m), level r:
    z_m ~ N(mu, 1/lam); tau_n ~ Gamma(alpha, beta); delta_c ~ Gamma(phi, eta) (shape, rate);
    y_l ~ Bernoulli(eps_n); y_l = 1: x_l ~ N(z_m, 1/(tau_n delta_c)), r_l = the level whose
    interval [b_{r-1}, b_r) holds x_l (real-valued variant: x_l = v_r is observed);
    y_l = 0: r_l ~ pi. No-spam variant: y_l = 1, eps_n = 1.
Variational family: q(z_m) = N(mu_m, 1/lam_m), q(tau_n), q(delta_c) Gamma, q(y_l = 1) = omega_l,
q(x_l | y_l = 1) = N(x_mean_l, 1/x_prec_l) truncated to the rating's interval.

Extension point: ``TERMS`` maps a name to a function ``(crowd, q, hyper) -> per-entity array``;
F is the sum of all of them. A new model part (annotator bias, Dirichlet spam distributions;
docs/extensions.md) adds its q parameters to ``Q.extra`` / ``Hyper.extra``, its own term function
(e.g. ``"annotator_bias"``: E[log N(b_n | 0, 1/lambda_b)] + H[q(b_n)] per annotator), edits
the rating term where the likelihood changes, and adds the same pieces to
``monte_carlo_bound``'s sampler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import integrate, stats

#: quantiles that split an integral over a distribution into segments (keeps the nodes on
#: the mass, however narrow or far from 0 the distribution is)
_SPLITS = (1e-12, 1e-8, 1e-5, 1e-3, 0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)
_TAIL = 1e-17  # mass left out at each end of an unbounded support
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(48)


#: fractions of a bounded support where it is split: dense near both ends, where a truncated
#: normal far in a tail keeps its mass
_FRACTIONS = np.array([1e-9, 1e-7, 1e-5, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.2, 0.35, 0.5])
_FRACTIONS = np.unique(np.concatenate([_FRACTIONS, 1.0 - _FRACTIONS]))


def _segments(dist) -> np.ndarray:
    """Segment ends. Bounded support: its ends and ``_FRACTIONS`` of it. Unbounded: the
    ``_TAIL`` quantiles and ``_SPLITS`` from both sides."""
    lo_s, hi_s = (float(v) for v in dist.support())
    if np.isfinite(lo_s) and np.isfinite(hi_s):
        return np.unique(np.concatenate([[lo_s, hi_s], lo_s + (hi_s - lo_s) * _FRACTIONS]))
    lo = lo_s if np.isfinite(lo_s) else float(dist.ppf(_TAIL))
    hi = hi_s if np.isfinite(hi_s) else float(dist.isf(_TAIL))
    inner = np.concatenate([dist.ppf(_SPLITS), dist.isf(_SPLITS)])
    return np.unique(np.concatenate([[lo, hi], inner[(inner > lo) & (inner < hi)]]))


def expect(dist, f: Callable[[np.ndarray], np.ndarray]) -> float:
    """``E[f(X)]`` for a frozen scipy distribution: 48-point Gauss-Legendre on each segment
    between quantiles (``_segments``); ``f`` takes an array. On ``(0, inf)`` (the Gammas) it
    integrates over ``u = log x`` (density ``pdf(e^u) e^u``, smooth even for shape < 1).
    Agrees with adaptive quadrature and closed forms to ~1e-12 (``test_bound_independent``).
    """
    pts = getattr(dist, "_ref_segments", None)
    if pts is None:  # computed once per frozen distribution (the ppf calls are the cost)
        pts = dist._ref_segments = _segments(dist)
    positive = dist.support()[0] == 0 and np.isinf(dist.support()[1])
    if positive:
        pts = np.log(pts[pts > 0])
    a, b = pts[:-1, None], pts[1:, None]
    t = 0.5 * (b - a) * _NODES[None, :] + 0.5 * (a + b)
    w = 0.5 * (b - a) * _WEIGHTS[None, :]
    if positive:
        x = np.exp(t)
        return float(np.sum(w * dist.pdf(x) * x * f(x)))
    return float(np.sum(w * dist.pdf(t) * f(t)))


def expect_quad(dist, f: Callable[[float], float]) -> float:
    """The same by adaptive ``scipy.integrate.quad`` per segment (slow; to validate ``expect``)."""
    pts = _segments(dist)
    total = 0.0
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        val, _ = integrate.quad(
            lambda t: float(dist.pdf(t) * f(t)), a, b, epsabs=1e-15, epsrel=1e-13, limit=200
        )
        total += val
    return total


def entropy(dist) -> float:
    """``-E[log q(X)]`` by the same quadrature (not scipy's closed forms)."""
    return -expect(dist, dist.logpdf)


# ---------------------------------------------------------------------- inputs


@dataclass
class Crowd:
    """Ratings coded from a long table, without the engine: IDs sorted, row order kept.

    ``ann, inst, cat, level`` (L,) codes; ``lo, hi`` (L,) the level's interval; ``value`` (L,)
    the rating; names of annotators (N,), instances (M,), categories (C,).
    """

    ann: np.ndarray
    inst: np.ndarray
    cat: np.ndarray
    level: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    value: np.ndarray
    annotators: np.ndarray
    instances: np.ndarray
    categories: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_frame(cls, df: pd.DataFrame, scale: list[float], granularity: str) -> Crowd:
        """Thresholds by the paper's rule, written out here: inner ones at the midpoints of
        neighbouring levels, the outer ones half a level step outside (0.5 ... 5.5 for 1..5)."""
        v = np.asarray(scale, dtype=float)
        b = np.empty(v.size + 1)
        b[1:-1] = (v[1:] + v[:-1]) / 2
        b[0] = v[0] - (v[1] - v[0]) / 2
        b[-1] = v[-1] + (v[-1] - v[-2]) / 2
        rating = df["rating"].to_numpy(dtype=float)
        level = np.array([int(np.flatnonzero(v == r)[0]) for r in rating])
        annotators = np.array(sorted(set(df["annotator"].astype(str))), dtype=object)
        instances = np.array(sorted(set(df["instance"].astype(str))), dtype=object)
        a_code = {a: i for i, a in enumerate(annotators)}
        i_code = {a: i for i, a in enumerate(instances)}
        ann = np.array([a_code[a] for a in df["annotator"].astype(str)])
        inst = np.array([i_code[a] for a in df["instance"].astype(str)])
        if granularity == "instance":
            categories, cat = instances, inst.copy()
        elif granularity == "global":
            categories, cat = np.array(["all"], dtype=object), np.zeros_like(inst)
        else:
            categories = np.array(sorted(set(df["query"].astype(str))), dtype=object)
            q_code = {q: i for i, q in enumerate(categories)}
            cat = np.array([q_code[q] for q in df["query"].astype(str)])
        return cls(ann, inst, cat, level, b[level], b[level + 1], rating, annotators,
                   instances, categories, v)  # fmt: skip

    @property
    def n_ratings(self) -> int:
        return int(self.ann.size)


@dataclass
class Q:
    """The variational distribution's parameters, in the reference's own ordering."""

    mu_m: np.ndarray  # (M,)
    lam_m: np.ndarray  # (M,)
    tau_shape: np.ndarray  # (N,)
    tau_rate: np.ndarray  # (N,)
    delta_shape: np.ndarray  # (C,)
    delta_rate: np.ndarray  # (C,)
    omega: np.ndarray  # (L,) q(y_l = 1)
    x_mean: np.ndarray  # (L,) q(x_l | y_l = 1): N(x_mean, 1/x_prec) on the rating's interval
    x_prec: np.ndarray  # (L,)
    extra: dict = field(default_factory=dict)


@dataclass
class Hyper:
    """Point-estimated and fixed hyperparameters, and the model variant."""

    eps: np.ndarray  # (N,)
    alpha: float
    beta: float
    phi: float
    eta: float
    mu: float
    lam: float
    pi: np.ndarray  # (K,)
    ordinal: bool
    spam: bool
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------- distributions


class Frozen:
    """``gen(*args, **kwds)``, a scipy distribution with its parameters bound, without the
    copy of the distribution object scipy's freezing makes each time (most of this reference's
    time): ``pdf``, ``logpdf``, ``ppf``, ``support``, ``entropy``, ... are ``gen``'s own,
    called with these parameters, as a frozen distribution calls them."""

    def __init__(self, gen, *args, **kwds) -> None:
        self.gen, self.args, self.kwds = gen, args, kwds

    def __getattr__(self, name: str):
        method = getattr(self.gen, name)
        return lambda *a, **k: method(*a, *self.args, **self.kwds, **k)


def q_z(q: Q, m: int) -> Frozen:
    return Frozen(stats.norm, q.mu_m[m], 1.0 / np.sqrt(q.lam_m[m]))


def q_tau(q: Q, n: int) -> Frozen:
    return Frozen(stats.gamma, q.tau_shape[n], scale=1.0 / q.tau_rate[n])


def q_delta(q: Q, c: int) -> Frozen:
    return Frozen(stats.gamma, q.delta_shape[c], scale=1.0 / q.delta_rate[c])


def q_x(crowd: Crowd, q: Q, l_: int) -> Frozen:
    sd = 1.0 / np.sqrt(q.x_prec[l_])
    a = (crowd.lo[l_] - q.x_mean[l_]) / sd
    b = (crowd.hi[l_] - q.x_mean[l_]) / sd
    return Frozen(stats.truncnorm, a, b, loc=q.x_mean[l_], scale=sd)


# ---------------------------------------------------------------------- the terms


def rating_terms(crowd: Crowd, q: Q, h: Hyper) -> np.ndarray:
    """(L,): E_q[log p(r_l, x_l, y_l | z, tau, delta)] - E_q[log q(x_l, y_l)].

    y = 1: log eps_n + E[log N(x_l | z_m, 1/(tau_n delta_c))] (+ H[q(x_l|y=1)] if ordinal);
    y = 0: log(1 - eps_n) + log pi_r; plus the entropy of q(y_l). Without spam: y = 1 only.
    Under q, x, z, tau and delta are independent, so with
    ``log N(x | z, 1/(t d)) = 0.5 log(t d / 2 pi) - 0.5 t d (x - z)^2`` the expectation is
    ``0.5 (E log t + E log d - log 2 pi) - 0.5 E[t] E[d] E[(x - z)^2]``, each factor by quadrature.
    """
    n_ann, n_cat, n_inst = crowd.annotators.size, crowd.categories.size, crowd.instances.size
    dists_t = [q_tau(q, n) for n in range(n_ann)]
    dists_d = [q_delta(q, c) for c in range(n_cat)]
    dists_z = [q_z(q, m) for m in range(n_inst)]
    tau = [(expect(d, np.log), expect(d, _ident)) for d in dists_t]
    dlt = [(expect(d, np.log), expect(d, _ident)) for d in dists_d]
    z_mean = [expect(d, _ident) for d in dists_z]
    out = np.empty(crowd.n_ratings)
    for l_ in range(crowd.n_ratings):
        n, m, c = crowd.ann[l_], crowd.inst[l_], crowd.cat[l_]
        (e_log_tau, e_tau), (e_log_delta, e_delta) = tau[n], dlt[c]
        # E[(x - z)^2] = E[(x - k)^2] - 2 E[x - k] E[z - k] + E[(z - k)^2], k = E z (precision)
        k = z_mean[m]
        dz = dists_z[m]
        z1, z2 = expect(dz, lambda t, k=k: t - k), expect(dz, lambda t, k=k: (t - k) ** 2)
        if h.ordinal:
            dx = q_x(crowd, q, l_)
            x1, x2 = expect(dx, lambda t, k=k: t - k), expect(dx, lambda t, k=k: (t - k) ** 2)
            h_x = entropy(dx)
        else:
            x1, x2, h_x = crowd.value[l_] - k, (crowd.value[l_] - k) ** 2, 0.0
        e_sq = x2 - 2.0 * x1 * z1 + z2
        e_log_lik = 0.5 * (e_log_tau + e_log_delta - np.log(2 * np.pi)) - 0.5 * (
            e_tau * e_delta * e_sq
        )
        truth = e_log_lik + h_x
        if not h.spam:
            out[l_] = truth
            continue
        w = q.omega[l_]
        eps = h.eps[n]
        spam = np.log1p(-eps) + np.log(h.pi[crowd.level[l_]])
        h_y = float(stats.bernoulli(w).entropy()) if 0.0 < w < 1.0 else 0.0
        out[l_] = w * (np.log(eps) + truth) + (1.0 - w) * spam + h_y
    return out


def _ident(t: np.ndarray) -> np.ndarray:
    return t


def _prior_and_entropy(dist, prior) -> float:
    """E_dist[log prior] + H[dist] (one ``dist``: its segments are found once)."""
    return expect(dist, prior.logpdf) + entropy(dist)


def instance_terms(crowd: Crowd, q: Q, h: Hyper) -> np.ndarray:
    """(M,): E_q[log N(z_m | mu, 1/lam)] + H[q(z_m)]."""
    prior = stats.norm(h.mu, 1.0 / np.sqrt(h.lam))
    return np.array([_prior_and_entropy(q_z(q, m), prior) for m in range(crowd.instances.size)])


def annotator_terms(crowd: Crowd, q: Q, h: Hyper) -> np.ndarray:
    """(N,): E_q[log Gamma(tau_n | alpha, beta)] + H[q(tau_n)]."""
    prior = stats.gamma(h.alpha, scale=1.0 / h.beta)
    return np.array([_prior_and_entropy(q_tau(q, n), prior) for n in range(crowd.annotators.size)])


def category_terms(crowd: Crowd, q: Q, h: Hyper) -> np.ndarray:
    """(C,): E_q[log Gamma(delta_c | phi, eta)] + H[q(delta_c)]."""
    prior = stats.gamma(h.phi, scale=1.0 / h.eta)
    return np.array(
        [_prior_and_entropy(q_delta(q, c), prior) for c in range(crowd.categories.size)]
    )


#: every term of F; an extension registers its own here (see the module docstring)
TERMS: dict[str, Callable[[Crowd, Q, Hyper], np.ndarray]] = {
    "rating": rating_terms,
    "instance": instance_terms,
    "annotator": annotator_terms,
    "category": category_terms,
}


def bound_terms(crowd: Crowd, q: Q, h: Hyper) -> dict[str, np.ndarray]:
    """Each term family's per-entity values."""
    return {name: fn(crowd, q, h) for name, fn in TERMS.items()}


def lower_bound(crowd: Crowd, q: Q, h: Hyper) -> float:
    return float(sum(np.sum(v) for v in bound_terms(crowd, q, h).values()))


# ---------------------------------------------------------------------- Monte Carlo


def monte_carlo_bound(
    crowd: Crowd, q: Q, h: Hyper, n_samples: int, seed: int = 0, chunk: int = 50_000
) -> tuple[float, float]:
    """``(estimate, standard error)`` of ``E_q[log p(data, latents) - log q(latents)]``.

    Draws (z, tau, delta, y, x) from q and evaluates the joint and q with ``scipy.stats`` log
    densities directly; x_l is drawn (and enters p and q) only where y_l = 1.
    """
    rng = np.random.default_rng(seed)
    L = crowd.n_ratings
    vals = []
    left = n_samples
    while left > 0:
        s = min(chunk, left)
        left -= s
        qz = stats.norm(q.mu_m, 1.0 / np.sqrt(q.lam_m))
        qt = stats.gamma(q.tau_shape, scale=1.0 / q.tau_rate)
        qd = stats.gamma(q.delta_shape, scale=1.0 / q.delta_rate)
        z = qz.rvs((s, q.mu_m.size), random_state=rng)
        tau = qt.rvs((s, q.tau_shape.size), random_state=rng)
        delta = qd.rvs((s, q.delta_shape.size), random_state=rng)
        log_q = qz.logpdf(z).sum(1) + qt.logpdf(tau).sum(1) + qd.logpdf(delta).sum(1)
        log_p = (
            stats.norm(h.mu, 1.0 / np.sqrt(h.lam)).logpdf(z).sum(1)
            + stats.gamma(h.alpha, scale=1.0 / h.beta).logpdf(tau).sum(1)
            + stats.gamma(h.phi, scale=1.0 / h.eta).logpdf(delta).sum(1)
        )
        if h.spam:
            y = rng.random((s, L)) < q.omega
            log_q += np.where(y, np.log(q.omega), np.log1p(-q.omega)).sum(1)
            eps = h.eps[crowd.ann]
            log_p += np.where(y, np.log(eps), np.log1p(-eps) + np.log(h.pi[crowd.level])).sum(1)
        else:
            y = np.ones((s, L), dtype=bool)
        sd_lik = 1.0 / np.sqrt(tau[:, crowd.ann] * delta[:, crowd.cat])
        if h.ordinal:
            sd = 1.0 / np.sqrt(q.x_prec)
            a, b = (crowd.lo - q.x_mean) / sd, (crowd.hi - q.x_mean) / sd
            qx = stats.truncnorm(a, b, loc=q.x_mean, scale=sd)
            x = qx.rvs((s, L), random_state=rng)
            log_q += np.where(y, qx.logpdf(x), 0.0).sum(1)
        else:
            x = np.broadcast_to(crowd.value, (s, L))
        # p(r | x) = 1 on the interval x was drawn in, so the ordinal likelihood is the density
        lik = stats.norm.logpdf(x, z[:, crowd.inst], sd_lik)
        log_p += np.where(y, lik, 0.0).sum(1)
        vals.append(log_p - log_q)
    v = np.concatenate(vals)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))
