"""The VB sweep: the fused kernel equals the numpy reference, the bound is monotone, extremes."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from ordmix_core.data.crowd import CrowdData, prepare
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import race, restarts
from ordmix_core.vb import kernels
from ordmix_core.vb import sweep as vb

GRANULARITIES = ("instance", "query", "global")
VARIANTS = [  # (ordinal, spam)
    (True, True),
    (True, False),
    (False, True),
    (False, False),
]
STATE_FIELDS = ("mu_m", "lam_m", "tau_shape", "tau_rate", "delta_shape", "delta_rate", "eps")

needs_jit = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba not installed")


def make_problem(
    data: CrowdData, ordinal: bool = True, spam: bool = True, exact: bool = True, **kw
) -> vb.Problem:
    k = data.scale.k
    args = dict(mu=data.scale.center, lam=0.1, phi=10.0, eta=5.0, pi=np.full(k, 1.0 / k))
    args.update(kw)
    return vb.Problem.from_data(data, ordinal=ordinal, spam=spam, exact=exact, **args)


def initial_state(data: CrowdData, p: vb.Problem, seed: int | None = None) -> vb.State:
    """The model's data-driven start (per-item means), randomised when ``seed`` is given."""
    n_m, n_n = data.counts()
    n_c = np.bincount(data.cat, minlength=data.n_categories)
    tau0 = 1.0 / data.scale.step**2
    mu_m = (p.mu * p.lam + n_m * data.per_instance_mean()) / (p.lam + n_m)
    tau_e = np.full(data.n_annotators, tau0)
    eps = np.full(data.n_annotators, 0.9)
    if seed is not None:
        rng = np.random.default_rng(seed)
        mu_m = mu_m + rng.normal(0.0, 0.5 * data.scale.step, mu_m.size)
        tau_e = tau0 * np.exp(rng.normal(0.0, 1.0, data.n_annotators))
        eps = rng.uniform(0.5, 0.99, data.n_annotators)
    tau_shape = 1.0 + 0.5 * n_n
    delta_shape = p.phi + 0.5 * n_c
    return vb.State(
        mu_m=mu_m,
        lam_m=p.lam + n_m * tau0,
        tau_shape=tau_shape,
        tau_rate=tau_shape / tau_e,
        delta_shape=delta_shape,
        delta_rate=delta_shape * p.eta / p.phi,
        eps=eps if p.spam else np.ones(data.n_annotators),
        alpha=1.0,
        beta=1.0 / tau0,
    )


@pytest.fixture(scope="module")
def crowds() -> list[pd.DataFrame]:
    return [
        simulate_crowd(n_items=300, n_annotators=25, spammer_share=0.3, random_state=1).ratings,
        simulate_crowd(n_items=200, n_annotators=8, ratings_per_item=3, n_queries=5,
                       spammer_share=0.5, difficulty_spread=1.0, random_state=2).ratings,
    ]  # fmt: skip


def assert_states_close(a: vb.State, b: vb.State, rtol: float) -> None:
    for f in STATE_FIELDS + ("omega",):
        x, y = getattr(a, f), getattr(b, f)
        np.testing.assert_allclose(y, x, rtol=rtol, atol=0, err_msg=f)
    assert b.alpha == pytest.approx(a.alpha, rel=rtol)
    assert b.beta == pytest.approx(a.beta, rel=rtol)


@needs_jit
@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("ordinal,spam", VARIANTS)
@pytest.mark.parametrize("exact", [True, False])
def test_fused_sweep_equals_numpy_reference(crowds, granularity, ordinal, spam, exact) -> None:
    for i, ratings in enumerate(crowds):
        data = prepare(ratings, granularity=granularity)
        p = make_problem(data, ordinal, spam, exact)
        a = b = initial_state(data, p, seed=i)
        for _ in range(6):
            a, fa = vb.sweep_numpy(p, a)
            b, fb = vb.sweep_fused(p, b)
            assert fb == pytest.approx(fa, rel=1e-9)
            assert_states_close(a, b, rtol=1e-9)


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("ordinal,spam", VARIANTS)
@pytest.mark.parametrize("engine", ["fused", "numpy"])
def test_bound_never_decreases_with_exact_updates(crowds, granularity, ordinal, spam, engine):
    if engine == "fused" and not kernels.HAVE_NUMBA:
        pytest.skip("numba not installed")
    sweep = vb.sweep_fused if engine == "fused" else vb.sweep_numpy
    for i, ratings in enumerate(crowds):
        data = prepare(ratings, granularity=granularity)
        p = make_problem(data, ordinal, spam, exact=True)
        for seed in (None, 10 + i):
            s = initial_state(data, p, seed)
            trace = []
            for _ in range(25):
                s, f = sweep(p, s)
                trace.append(f)
            d = np.diff(trace)
            assert np.all(d >= -1e-9 * np.abs(trace[1:])), (d.min(), trace)


@needs_jit
def test_chunks_deterministic_and_thread_count_invariant(crowds, monkeypatch) -> None:
    data = prepare(crowds[0], granularity="query")
    p = make_problem(data)
    s0 = initial_state(data, p, seed=3)
    runs = {}
    for chunks in (1, 2, 3, 7):
        s = s0
        for _ in range(5):
            s, f = vb.sweep_fused(p, s, n_chunks=chunks)
        runs[chunks] = (s, f)
    for chunks in (2, 3, 7):
        assert_states_close(runs[1][0], runs[chunks][0], rtol=1e-12)
        assert runs[chunks][1] == pytest.approx(runs[1][1], rel=1e-12)
    # bit-identical run to run, and the parallel path equals the serial one exactly
    monkeypatch.setattr(kernels, "PARALLEL_MIN_RATINGS", 0)
    for chunks in (2, 3):
        s = s0
        for _ in range(5):
            s, f = vb.sweep_fused(p, s, n_chunks=chunks)
        assert f == runs[chunks][1]
        for name in STATE_FIELDS + ("omega",):
            assert np.array_equal(getattr(s, name), getattr(runs[chunks][0], name)), name


def test_sweep_dispatch_and_problem_views(crowds, monkeypatch) -> None:
    data = prepare(crowds[0], granularity="query")
    p = make_problem(data)
    s = initial_state(data, p)
    b = data.scale.thresholds
    np.testing.assert_array_equal(p.lo, b[data.level])
    np.testing.assert_array_equal(p.hi, b[data.level + 1])
    np.testing.assert_array_equal(p.value, data.values)
    np.testing.assert_allclose(p.log_pi_l, np.log(1.0 / data.scale.k))
    monkeypatch.setattr(kernels, "USE_JIT", False)
    ref = vb.sweep(p, s)
    np.testing.assert_array_equal(ref[0].mu_m, vb.sweep_numpy(p, s)[0].mu_m)
    if kernels.HAVE_NUMBA:
        monkeypatch.setattr(kernels, "USE_JIT", True)
        new = vb.sweep(p, s)
        np.testing.assert_array_equal(new[0].mu_m, vb.sweep_fused(p, s)[0].mu_m)
    # run() iterates sweep and stops on |dF| < tol |F| (and, with tol_estimate, on the means)
    st, trace, converged = race.run_to_convergence(p, s, 1000, 1e-6)
    assert converged and len(trace) < 1000
    assert abs(trace[-1] - trace[-2]) < 1e-6 * abs(trace[-1])
    assert abs(trace[-2] - trace[-3]) >= 1e-6 * abs(trace[-2])  # the first such sweep
    _, longer, converged = race.run_to_convergence(p, s, 1000, 1e-6, tol_estimate=1e-3)
    assert converged and len(longer) > len(trace)


def _extreme_frames() -> dict[str, tuple[pd.DataFrame, dict]]:
    rng = np.random.default_rng(5)
    n = 60
    one_ann = pd.DataFrame(
        {"annotator": "a", "instance": [f"i{j}" for j in range(n)],
         "rating": rng.integers(1, 6, n), "query": "q"}
    )  # fmt: skip
    one_per_item = pd.DataFrame(
        {"annotator": [f"a{j % 7}" for j in range(n)], "instance": [f"i{j}" for j in range(n)],
         "rating": rng.integers(1, 6, n), "query": [f"q{j % 3}" for j in range(n)]}
    )  # fmt: skip
    all_equal = one_per_item.assign(
        rating=3, instance=[f"i{j // 3}" for j in range(n)], query=[f"q{j // 9}" for j in range(n)]
    )
    tail = all_equal.assign(rating=1)
    return {
        "one annotator": (one_ann, {}),
        "one rating per item": (one_per_item, {}),
        "all ratings equal": (all_equal, {}),
        # prior mean far below the scale, strong prior: every interval far in the upper tail
        "far in a tail": (tail, {"mu": -1e4, "lam": 1e3}),
        "far the other way": (tail.assign(rating=5), {"mu": 1e4, "lam": 1e6}),
    }


@pytest.mark.parametrize("case", list(_extreme_frames()))
@pytest.mark.parametrize("engine", ["fused", "numpy"])
def test_extreme_inputs_finite_without_warnings(case: str, engine: str) -> None:
    if engine == "fused" and not kernels.HAVE_NUMBA:
        pytest.skip("numba not installed")
    sweep = vb.sweep_fused if engine == "fused" else vb.sweep_numpy
    frame, kw = _extreme_frames()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for granularity in GRANULARITIES:
            data = prepare(frame, granularity=granularity)
            for ordinal, spam in VARIANTS:
                p = make_problem(data, ordinal, spam, **kw)
                s = initial_state(data, p)
                if kw:  # very precise annotators too: huge rho
                    s.tau_rate = s.tau_rate * 1e-6
                for _ in range(8):
                    s, f = sweep(p, s)
                    assert np.isfinite(f)
                    for name in STATE_FIELDS + ("omega",):
                        assert np.all(np.isfinite(getattr(s, name))), (name, granularity)
                    assert np.isfinite(s.alpha) and np.isfinite(s.beta)


@needs_jit
@pytest.mark.parametrize("case", ["one annotator", "one rating per item", "all ratings equal"])
def test_extreme_inputs_fused_equals_numpy(case: str) -> None:
    """(Far in a tail tn.py itself is off by ~eps * b^2: see test_kernels' tail test.)"""
    frame, kw = _extreme_frames()[case]
    for granularity in GRANULARITIES:
        data = prepare(frame, granularity=granularity)
        for ordinal, spam in VARIANTS:
            p = make_problem(data, ordinal, spam, **kw)
            a = b = initial_state(data, p)
            for _ in range(4):
                with np.errstate(all="ignore"):
                    a, fa = vb.sweep_numpy(p, a)
                b, fb = vb.sweep_fused(p, b)
                assert fb == pytest.approx(fa, rel=1e-9)
                for name in ("mu_m", "lam_m", "tau_rate", "delta_rate", "eps"):
                    np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-9)


def test_run_stops_when_the_callback_says_so(crowds) -> None:
    data = prepare(crowds[1], granularity="global")
    p = make_problem(data)
    s = initial_state(data, p)
    seen = []
    with pytest.raises(restarts.Stop) as err:
        race.run_to_convergence(
            p, s, 1000, 0.0, callback=lambda it, f: seen.append((it, f)) or it < 3
        )
    assert [it for it, _ in seen] == [1, 2, 3]
    assert err.value.trace == [f for _, f in seen]
    # the state after the third sweep: three sweeps by hand give it
    for _ in range(3):
        s, f = vb.sweep(p, s)
    assert f == err.value.trace[-1]
    np.testing.assert_array_equal(err.value.state.mu_m, s.mu_m)
    # without a callback the cap ends it: not converged at tol 0
    _, trace, converged = race.run_to_convergence(p, initial_state(data, p), 4, 0.0)
    assert len(trace) == 4 and not converged
