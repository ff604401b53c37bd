"""Profile one VB sweep of the engine on a simulated crowd (default 1M ratings).

    python benchmarks/profile_sweep.py [--ratings 1000000] [--iters 10] [--engine numpy|fused]

Prints cProfile's top functions over ``--iters`` sweeps and, for the numpy engine, a stage-by-stage
breakdown of one sweep (gathers, truncated-normal statistics and their primitives, q(y), the
bincount reductions, the bound), each in ns per rating.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np
from scipy.special import expit, log_ndtr

sys.path.insert(0, os.path.dirname(__file__))

from synth import synth_crowd  # noqa: E402

from ordmix_core.estimators.ordinal_mixture import OrdinalMixture  # noqa: E402
from ordmix_core.numerics.truncnorm import tn_stats  # noqa: E402
from ordmix_core.vb import bound, updates  # noqa: E402
from ordmix_core.vb import sweep as vb


def setup(n_ratings: int, granularity: str = "query") -> tuple[vb.Problem, vb.State]:
    """A problem and the model's own warm initial state (restart 0) on a simulated crowd."""
    data = synth_crowd(n_ratings, granularity)
    est = OrdinalMixture(granularity)
    pi = np.full(data.scale.k, 1.0 / data.scale.k)
    p = vb.Problem.from_data(
        data,
        mu=data.scale.center,
        lam=0.1,
        phi=10.0,
        eta=5.0,
        pi=pi,
        ordinal=True,
        spam=True,
        exact=True,
    )
    _, s = est._initial_state(data, p, 0, np.random.default_rng(0))
    return p, s


def stages(p: vb.Problem, s: vb.State, reps: int = 5) -> list[tuple[str, float]]:
    """Median seconds of each stage of the numpy sweep (one sweep's work, split up)."""
    out: dict[str, list[float]] = {}

    def tick(name: str, t0: float) -> float:
        t1 = time.perf_counter()
        out.setdefault(name, []).append(t1 - t0)
        return t1

    for _ in range(reps):
        t = time.perf_counter()
        e_tau, e_logtau = updates.gamma_moments(s.tau_shape, s.tau_rate)
        e_delta, e_logdelta = updates.gamma_moments(s.delta_shape, s.delta_rate)
        e_tau_l, e_logtau_l = e_tau[p.ann], e_logtau[p.ann]
        e_delta_l, e_logdelta_l = e_delta[p.cat_l], e_logdelta[p.cat_l]
        mu_l = s.mu_m[p.inst]
        rho_l = e_tau_l * e_delta_l
        t = tick("gathers (E tau, E delta, mu per rating)", t)
        tn = tn_stats(p.lo, p.hi, mu_l, rho_l)
        t = tick("tn_stats (whole)", t)
        sd = 1.0 / np.sqrt(rho_l)
        a = (p.lo - mu_l) / sd
        t = tick("  tn: one standardised end", t)
        log_ndtr(a)
        t = tick("  tn: one log_ndtr", t)
        np.exp(a)
        t = tick("  tn: one exp", t)
        log_eps, log1m_eps = np.log(s.eps), np.log1p(-s.eps)
        s_l = updates.expected_sq(tn.ex, tn.var, mu_l, s.lam_m[p.inst])
        logit = updates.omega_logit(
            log_eps[p.ann],
            log1m_eps[p.ann],
            p.log_pi_l,
            e_logtau_l,
            e_logdelta_l,
            rho_l,
            s_l,
            tn.entropy,
        )
        omega, one_m = updates.omega_from_logit(logit)
        t = tick("q(y): S, logit, expit", t)
        mu_m, lam_m = updates.update_z(p.inst, omega * rho_l, tn.ex, p.mu, p.lam, p.n_instances)
        s_l = updates.expected_sq(tn.ex, tn.var, mu_m[p.inst], lam_m[p.inst])
        t = tick("q(z) (2 bincounts) + new S", t)
        tau_shape, tau_rate = updates.update_gamma_factor(
            p.ann, omega, e_delta_l, s_l, s.alpha, s.beta, p.n_annotators
        )
        e_tau, e_logtau = updates.gamma_moments(tau_shape, tau_rate)
        e_tau_l, e_logtau_l = e_tau[p.ann], e_logtau[p.ann]
        delta_shape, delta_rate = updates.update_gamma_factor(
            p.cat_l, omega, e_tau_l, s_l, p.phi, p.eta, p.n_categories
        )
        e_delta, e_logdelta = updates.gamma_moments(delta_shape, delta_rate)
        e_delta_l, e_logdelta_l = e_delta[p.cat_l], e_logdelta[p.cat_l]
        t = tick("q(tau), q(delta) (4 bincounts) + gathers", t)
        eps = updates.update_eps(p.ann, omega, p.n_per_ann)
        alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)
        t = tick("eps, alpha, beta", t)
        bound.rating_terms(
            omega,
            one_m,
            np.log(eps)[p.ann],
            np.log1p(-eps)[p.ann],
            p.log_pi_l,
            e_logtau_l,
            e_logdelta_l,
            e_tau_l,
            e_delta_l,
            s_l,
            tn.entropy,
            True,
        )
        t = tick("bound: rating terms", t)
        bound.instance_terms(mu_m, lam_m, p.mu, p.lam)
        bound.gamma_terms(tau_shape, tau_rate, alpha, beta)
        bound.gamma_terms(delta_shape, delta_rate, p.phi, p.eta)
        t = tick("bound: instance/annotator/category terms", t)
        expit(a)
        t = tick("  (one expit, for scale)", t)
    return [(k, float(np.median(v))) for k, v in out.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=1_000_000)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--engine", choices=["numpy", "fused"], default="numpy")
    args = ap.parse_args()
    p, s0 = setup(args.ratings)
    n = p.ann.size
    sweep = vb.sweep_numpy if args.engine == "numpy" and hasattr(vb, "sweep_numpy") else vb.sweep
    s, _ = sweep(p, s0)  # warm-up (and JIT compilation, if any)
    t = time.perf_counter()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.iters):
        s, f = sweep(p, s)
    prof.disable()
    sec = (time.perf_counter() - t) / args.iters
    print(
        f"{args.engine} sweep, {n:,} ratings: {sec * 1e3:.1f} ms/iteration, "
        f"{sec / n * 1e9:.0f} ns/rating (under cProfile)"
    )
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    if args.engine == "numpy":
        print("stage breakdown of one sweep (median of 5):")
        total = 0.0
        for name, sec in stages(p, s):
            if not name.startswith(" "):
                total += sec
            print(f"  {name:48s} {sec * 1e3:8.1f} ms {sec / n * 1e9:7.1f} ns/rating")
        name = "sum of top-level stages"
        print(f"  {name:48s} {total * 1e3:8.1f} ms {total / n * 1e9:7.1f} ns/rating")


if __name__ == "__main__":
    main()
