"""Record every call of the engine's sweep during a fit, and map its states to the
independent bound reference (``_bound_reference``) for the F it reported."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from _bound_reference import Crowd, Hyper, Q
from scipy import stats

from ordmix_core.vb import sweep as vb


class Sweep(NamedTuple):
    """One call of ``vb.sweep``: problem, state before, state after, the F it reported."""

    problem: vb.Problem
    before: vb.State
    after: vb.State
    bound: float


def record_sweeps(monkeypatch) -> list[Sweep]:
    """Wrap ``ordmix_core.vb.sweep.sweep`` (the estimator calls it through the module) so that every
    call appends a :class:`Sweep` with copies of the states as they were; returns the list."""
    calls: list[Sweep] = []
    inner = vb.sweep

    def recording(p, s):
        before = s.copy()
        new, f = inner(p, s)
        calls.append(Sweep(p, before, new.copy(), f))
        return new, f

    monkeypatch.setattr(vb, "sweep", recording)
    return calls


def _positions(engine_names, ref_names) -> np.ndarray:
    where = {name: i for i, name in enumerate(engine_names)}
    return np.array([where[name] for name in ref_names])


def _gamma_mean(shape: np.ndarray, rate: np.ndarray) -> np.ndarray:
    return np.array(
        [stats.gamma(a, scale=1.0 / b).mean() for a, b in zip(shape, rate, strict=True)]
    )


def to_reference(
    crowd: Crowd, data, sweep: Sweep, fixed: dict, ordinal: bool, x_from: str = "before"
) -> tuple[Q, Hyper]:
    """``_bound_reference``'s q and hyperparameters for the F that ``sweep`` reported.

    ``crowd``: the reference's own coding of the ratings; ``data``: the engine's CrowdData
    (``model.data_``), whose codes are checked to name the same entities on every row.
    q(x_l|y=1) = N(mu_m, 1/(E tau_n E delta_c)) on the rating's interval with mu_m, E tau,
    E delta from the state BEFORE the sweep (``x_from='after'``: the wrong reading, for the
    test that tells them apart); omega, q(z), q(tau), q(delta), eps, alpha, beta AFTER it;
    mu, lam, phi, eta, pi from ``fixed`` (what the test asked for, not what the engine used).
    """
    p = sweep.problem
    assert list(data.annotators[p.ann]) == list(crowd.annotators[crowd.ann])
    assert list(data.instances[p.inst]) == list(crowd.instances[crowd.inst])
    assert list(data.categories[p.cat_l]) == list(crowd.categories[crowd.cat])
    pa = _positions(data.annotators, crowd.annotators)
    pm = _positions(data.instances, crowd.instances)
    pc = _positions(data.categories, crowd.categories)
    a, x = sweep.after, getattr(sweep, x_from)
    rho = (_gamma_mean(x.tau_shape, x.tau_rate)[p.ann]
           * _gamma_mean(x.delta_shape, x.delta_rate)[p.cat_l])  # fmt: skip
    q = Q(
        mu_m=a.mu_m[pm],
        lam_m=a.lam_m[pm],
        tau_shape=a.tau_shape[pa],
        tau_rate=a.tau_rate[pa],
        delta_shape=a.delta_shape[pc],
        delta_rate=a.delta_rate[pc],
        omega=np.asarray(a.omega, dtype=float),
        x_mean=x.mu_m[p.inst],
        x_prec=rho,
    )
    pi = np.asarray(fixed["pi"], dtype=float)
    h = Hyper(
        eps=a.eps[pa],
        alpha=float(a.alpha),
        beta=float(a.beta),
        phi=fixed["phi"],
        eta=fixed["eta"],
        mu=fixed["mu"],
        lam=fixed["lam"],
        pi=pi / pi.sum(),
        ordinal=ordinal,
        spam=bool(p.spam),  # the no-spam warm-up of a spam fit is the no-spam model
    )
    return q, h
