"""The lower bound's VALUE, checked against an independent computation (``_bound_reference``).

The engine's F is compared with quadrature of ``scipy.stats`` densities, term by term, for every
model variant (ordinal / real-valued x spam / no spam x granularity, exact and paper updates);
a Monte Carlo estimate of E_q[log p - log q] checks that the terms add up to the model's bound.

Which q the reported F belongs to (``vb.sweep_numpy``; ``sweep_fused`` and the Dask engine
follow it): a sweep from state ``s`` to ``s'`` first sets q(x_l | y=1) to
N(mu_m, 1/(E[tau_n] E[delta_c])) truncated to the rating's interval with ``mu_m``, E[tau],
E[delta] from ``s`` (the state BEFORE the sweep), then q(y), q(z), q(tau), q(delta), eps,
alpha, beta. The F it returns is the bound of q(x) from ``s`` together with everything else
from ``s'``: omega, q(z), q(tau), q(delta), eps, alpha, beta. ``test_q_x_is_the_one_before``
shows that the other reading (q(x) from ``s'``) does not give the engine's value.

Tolerance: TOL nats absolute, far below 1 nat: adding 1 nat to any single term (one rating,
instance, annotator or category, or a scalar) fails these tests (docs/testing.md).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest
from _bound_reference import Crowd, Hyper, Q, bound_terms, lower_bound, monte_carlo_bound
from _sweeps import Sweep, record_sweeps, to_reference
from scipy import stats
from scipy.special import digamma

from ordmix_core import OrdinalMixture
from ordmix_core.vb import sweep as vb

#: uneven on purpose: thresholds -0.5, 0.5, 2, 3.5, 4.5 (midpoints, half a step outside)
SCALE = [0.0, 1.0, 3.0, 4.0]
#: non-default hyperparameters, so that the check also shows the engine uses the user's values
PARAMS = dict(mu=1.5, lam=0.5, phi=4.0, eta=3.0, pi=[0.1, 0.2, 0.3, 0.4])
DEFAULTS = dict(mu=float(np.mean(SCALE)), lam=0.1, phi=10.0, eta=5.0, pi=[0.25] * 4)
#: the reference's quadrature agrees with closed forms to ~1e-10; F is about -30 here
TOL = 1e-6

# a small crowd: 4 annotators (d is erratic), 6 items in 2 queries, one repeated pair, rows
# in no particular order (codes are by sorted ID, so row order must not matter)
RATINGS = pd.DataFrame(
    [
        ("a", "i0", 0.0, "q1"), ("d", "i0", 3.0, "q1"), ("c", "i0", 1.0, "q1"),
        ("c", "i1", 1.0, "q0"), ("a", "i1", 1.0, "q0"), ("b", "i1", 1.0, "q0"),
        ("a", "i2", 3.0, "q0"), ("d", "i2", 4.0, "q0"), ("b", "i2", 4.0, "q0"),
        ("a", "i3", 3.0, "q0"), ("c", "i3", 3.0, "q0"), ("d", "i3", 0.0, "q0"),
        ("a", "i4", 0.0, "q1"), ("d", "i4", 4.0, "q1"), ("b", "i4", 1.0, "q1"),
        ("c", "i5", 3.0, "q1"), ("a", "i5", 1.0, "q1"), ("b", "i5", 1.0, "q1"),
        ("b", "i1", 0.0, "q0"),
    ],
    columns=["annotator", "instance", "rating", "query"],
)  # fmt: skip


class Variant(NamedTuple):
    ordinal: bool
    spam: bool
    granularity: str
    updates: str = "exact"
    defaults: bool = False

    @property
    def id(self) -> str:
        parts = ["ordinal" if self.ordinal else "real", "spam" if self.spam else "nospam"]
        parts += [self.granularity, self.updates] + (["defaults"] if self.defaults else [])
        return "-".join(parts)


VARIANTS = [
    Variant(o, s, g, u)
    for o in (True, False)
    for s in (True, False)
    for g in ("instance", "query", "global")
    for u in (("exact", "paper") if s else ("exact",))
] + [Variant(True, True, "query", defaults=True)]
IDS = [v.id for v in VARIANTS]


def record_fit(monkeypatch, variant: Variant, **kw) -> tuple[OrdinalMixture, list[Sweep]]:
    """Fit with every call of ``vb.sweep`` recorded (states copied as they were)."""
    calls = record_sweeps(monkeypatch)
    params = {} if variant.defaults else PARAMS
    model = OrdinalMixture(  # the paper's model: the extensions' terms are in test_extensions.py
        variant.granularity,
        model="paper",
        scale=SCALE,
        ordinal=variant.ordinal,
        spam=variant.spam,
        updates=variant.updates,
        n_restarts=2,
        max_iter=40,
        random_state=0,
        n_jobs=1,
        **params,
        **kw,
    ).fit(RATINGS)
    monkeypatch.undo()
    assert calls, (
        "the fit did not call ordmix_core.vb.sweep.sweep: point record_fit at the new sweep"
    )
    return model, calls


_FITS: dict[Variant, tuple[OrdinalMixture, list[Sweep]]] = {}


def recorded_fit(variant: Variant) -> tuple[OrdinalMixture, list[Sweep]]:
    """``record_fit``'s model and sweeps, fitted once per variant for the tests below, which
    only read them (a sweep from a recorded state starts from a copy of it)."""
    if variant not in _FITS:
        with pytest.MonkeyPatch.context() as mp:
            _FITS[variant] = record_fit(mp, variant)
    return _FITS[variant]


def reference_inputs(
    model: OrdinalMixture, variant: Variant, sweep: Sweep, x_from: str = "before"
) -> tuple[Crowd, Q, Hyper]:
    """The reference's inputs for ``sweep`` with the fixed hyperparameters the test asked for."""
    fixed = DEFAULTS if variant.defaults else PARAMS
    crowd = Crowd.from_frame(RATINGS, SCALE, variant.granularity)
    return (crowd, *to_reference(crowd, model.data_, sweep, fixed, variant.ordinal, x_from))


def assert_bound_matches(model, variant, sweep: Sweep, what: str) -> float:
    crowd, q, h = reference_inputs(model, variant, sweep)
    ref = lower_bound(crowd, q, h)
    if abs(ref - sweep.bound) > TOL:
        terms = {k: np.round(v, 6).tolist() for k, v in bound_terms(crowd, q, h).items()}
        pytest.fail(
            f"{what}: engine F {sweep.bound!r} != reference {ref!r} "
            f"(off by {sweep.bound - ref:.3g}); reference terms {terms}"
        )
    return ref


def _chosen_sweeps(model: OrdinalMixture, calls: list[Sweep]) -> dict[str, Sweep]:
    """The first sweep, the first with the spam component, and the one the fit reported."""
    out = {"first sweep": calls[0]}
    mixture = [c for c in calls if c.problem.spam]
    if mixture:
        out["first mixture sweep"] = mixture[0]
    final = [c for c in calls if c.bound == model.lower_bound_]
    assert len(final) >= 1, "no sweep reported the fit's lower_bound_"
    out["reported"] = final[-1]
    return out


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_fit_reports_the_reference_bound(variant: Variant) -> None:
    model, calls = recorded_fit(variant)
    # lower_bound_ is the chosen restart's last trace value and its final state's bound
    trace = model.trace_[model.trace_["restart"] == model.best_restart_]
    assert model.lower_bound_ == trace["lower_bound"].iloc[-1]
    chosen = _chosen_sweeps(model, calls)
    final = chosen["reported"]
    np.testing.assert_array_equal(final.after.mu_m, model.estimates_.to_numpy())
    for what, sweep in chosen.items():
        assert_bound_matches(model, variant, sweep, what)


def _perturbed(s: vb.State, spam: bool, seed: int) -> vb.State:
    """An arbitrary valid state near ``s``: every factor moved, eps spread over (0.3, 0.95)."""
    rng = np.random.default_rng(seed)
    out = s.copy()
    out.mu_m = s.mu_m + rng.normal(0.0, 1.0, s.mu_m.size)
    for name in ("lam_m", "tau_shape", "tau_rate", "delta_shape", "delta_rate"):
        v = getattr(s, name)
        setattr(out, name, v * np.exp(rng.normal(0.0, 0.5, v.size)))
    if spam:
        out.eps = rng.uniform(0.3, 0.95, s.eps.size)
    out.alpha, out.beta = float(rng.uniform(0.5, 5.0)), float(rng.uniform(0.2, 3.0))
    out.omega = None
    return out


@pytest.mark.parametrize("engine", ["numpy", "fused"])
@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.defaults], ids=IDS[:-1])
def test_sweeps_from_arbitrary_states(variant: Variant, engine: str) -> None:
    """Both sweep implementations, from states no fit would visit (omega well inside (0, 1))."""
    sweep = vb.sweep_numpy if engine == "numpy" else vb.sweep_fused
    model, calls = recorded_fit(variant)
    p = calls[-1].problem  # the fit's own problem (with the spam component if the model has it)
    s = _perturbed(calls[0].before, p.spam, seed=len(variant.id))
    for i in range(2):
        new, f = sweep(p, s)
        assert_bound_matches(model, variant, Sweep(p, s, new, f), f"{engine} sweep {i + 1}")
        s = new


def test_q_x_is_the_one_before_the_sweep() -> None:
    """The reported F uses q(x) from the state before the sweep; q(x) rebuilt from the state
    after it (a plausible misreading) is off by far more than TOL."""
    variant = Variant(True, True, "query")
    model, calls = recorded_fit(variant)
    first = calls[0]
    assert_bound_matches(model, variant, first, "first sweep")
    crowd, q, h = reference_inputs(model, variant, first, x_from="after")
    assert abs(lower_bound(crowd, q, h) - first.bound) > 1e-2


@pytest.mark.parametrize("ordinal", [True, False], ids=["ordinal", "real"])
@pytest.mark.parametrize("spam", [True, False], ids=["spam", "nospam"])
def test_terms_add_up_to_the_model_bound_monte_carlo(ordinal, spam) -> None:
    """E_q[log p(data, latents) - log q(latents)] sampled, with no algebra: the reference's
    terms (and the engine's F) are that expectation, within 5 standard errors."""
    variant = Variant(ordinal, spam, "query")
    model, calls = recorded_fit(variant)
    s = _perturbed(calls[0].before, calls[-1].problem.spam, seed=3)
    new, f = vb.sweep_numpy(calls[-1].problem, s)
    sweep = Sweep(calls[-1].problem, s, new, f)
    crowd, q, h = reference_inputs(model, variant, sweep)
    ref = lower_bound(crowd, q, h)
    est, se = monte_carlo_bound(crowd, q, h, n_samples=60_000, seed=1)
    assert se < 0.05, "too few samples to tell a missing 1-nat term"
    assert abs(est - ref) < 5 * se, (est, se, ref)
    assert abs(est - f) < 5 * se, (est, se, f)


def test_reference_quadrature_is_exact_where_closed_forms_exist() -> None:
    """The reference's integrals against textbook closed forms and adaptive quadrature."""
    from _bound_reference import entropy, expect, expect_quad

    for a, b in [(3.5, 2.0), (0.3, 5.0), (1000.0, 0.01), (50.0, 2e4)]:
        d = stats.gamma(a, scale=1.0 / b)
        assert expect(d, np.log) == pytest.approx(digamma(a) - np.log(b), abs=1e-9)
        assert expect(d, lambda t: t) == pytest.approx(a / b, rel=1e-10)
        assert entropy(d) == pytest.approx(float(d.entropy()), abs=1e-9)
    for m, sd in [(3.0, 1e-3), (-2.0, 10.0), (1e4, 1.0)]:
        d = stats.norm(m, sd)
        assert expect(d, lambda t, m=m: (t - m) ** 2) == pytest.approx(sd * sd, rel=1e-10)
        assert entropy(d) == pytest.approx(0.5 * np.log(2 * np.pi * np.e * sd * sd), abs=1e-10)
    for lo, hi, loc, sd in [(-1, 0.5, 2, 0.3), (-40, -39, 0, 1), (3.0, 3.1, 0.0, 0.1)]:
        d = stats.truncnorm((lo - loc) / sd, (hi - loc) / sd, loc=loc, scale=sd)
        ref_m = expect_quad(d, lambda t: t)
        assert expect(d, lambda t: t) == pytest.approx(ref_m, abs=1e-11 * (1 + abs(ref_m)))
        ref_h = -expect_quad(d, lambda t, d=d: float(d.logpdf(t)))
        assert entropy(d) == pytest.approx(ref_h, abs=1e-9)


def test_reference_has_a_term_for_every_part_of_the_model() -> None:
    """Entities and terms line up (a new model part adds its own family to TERMS)."""
    variant = Variant(True, True, "query")
    crowd = Crowd.from_frame(RATINGS, SCALE, variant.granularity)
    n, m, c, l_ = (crowd.annotators.size, crowd.instances.size, crowd.categories.size,
                   crowd.n_ratings)  # fmt: skip
    q = Q(np.ones(m), np.ones(m), np.ones(n), np.ones(n), np.ones(c), np.ones(c),
          np.full(l_, 0.5), np.ones(l_), np.ones(l_))  # fmt: skip
    h = Hyper(np.full(n, 0.5), 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, np.full(4, 0.25), True, True)
    sizes = {k: v.size for k, v in bound_terms(crowd, q, h).items()}
    assert sizes == {"rating": l_, "instance": m, "annotator": n, "category": c}
    assert (l_, m, n, c) == (19, 6, 4, 2)
    assert dataclasses.is_dataclass(q) and "extra" in {f.name for f in dataclasses.fields(q)}
