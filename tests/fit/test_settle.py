"""The blocks solved with the rest held (``settle.py``): each item's block at its own slow
point, the next sweep's bound never below the last, gold items held and solved as if they were
not gold; the rounds' compiled q(x), q(y) of a few ratings with ``reference.q_xy``'s bits for
every model the settle meets, on one thread and on the cores."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_extensions import EXTENSIONS, problem_and_state
from test_properties import crowds

from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import settle
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.vb import kernels, reference, sweep

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
needs_jit = pytest.mark.skipif(not kernels.USE_JIT, reason="numba")


def web_item() -> tuple[sweep.Problem, sweep.State]:
    """One item of the Web set (web-zhou2014, seed 2), rated 4, 3, 4, 1, 5, 5, with its six
    raters' factors and the hyperparameters where the default fit stopped (rounded). It
    stopped at 3.75 with the 1 called spam; a 100x tighter fit ended at 3.41, the 1 let in."""
    p = sweep.Problem.create(
        Scale(np.arange(1.0, 6.0)), pi=np.full(5, 0.2), mu=3.0, lam=0.1,
        phi=2.0, eta=1.0, ordinal=True, spam=True, exact=True, n_per_ann=np.full(6, 100),
        n_categories=1, bias=True, spam_dist="global",
    )  # fmt: skip
    p = p.with_ratings(np.arange(6), np.zeros(6), np.zeros(6), np.array([3, 2, 3, 0, 4, 4]), 1)
    s = sweep.State(
        mu_m=np.array([3.7502]), lam_m=np.array([7.1456]),
        tau_shape=np.array([423.13, 195.84, 444.63, 138.66, 34.268, 38.350]),
        tau_rate=np.array([300.57, 154.80, 288.39, 113.63, 26.115, 30.781]),
        delta_shape=np.array([3.5751]), delta_rate=np.array([2.2337]),
        eps=np.array([1 - 1e-10, 0.80939, 1 - 1e-10, 0.84337, 0.075699, 0.40129]),
        alpha=31.115, beta=23.980,
        bias_mean=np.array([-0.16944, -0.011239, -0.10267, -0.20678, -0.033541, -0.079202]),
        bias_prec=np.array([2236.6, 884.85, 2607.1, 580.10, 75.221, 86.207]), lam_b=56.803,
        pi=np.array([0.085364, 0.043541, 0.054127, 0.16494, 0.65203]), kappa=50.0,
    )  # fmt: skip
    return p, s


def test_an_item_at_a_slow_point_of_its_own_is_settled() -> None:
    p, s = web_item()
    # ten rounds barely move it: it is at a slow point, not at its block's optimum
    few, _ = settle.settle_items(p, s, max_rounds=10, drop=0.0, floor=0.0)
    assert few.mu_m[0] > 3.74
    new, moved = settle.settle_items(p, s)
    assert new.mu_m[0] == pytest.approx(3.42, abs=0.02)  # the tighter fit's 3.41, annotators held
    assert moved[0] == pytest.approx(s.mu_m[0] - new.mu_m[0])
    # where it ends is the block's fixed point, to within what the rounds leave (settle_drop)
    again, _ = settle.settle_items(p, new, drop=0.0, floor=0.0)
    assert abs(again.mu_m[0] - new.mu_m[0]) < DEFAULT.settle_drop
    # and the 1 is no longer called spam there (q(y) of the next sweep, annotators held)
    swept, _ = sweep.sweep(p, new)
    assert swept.omega[3] > 0.5 > sweep.sweep(p, s)[0].omega[3]


def _sweeps(p: sweep.Problem, s: sweep.State, n: int) -> tuple[sweep.State, float]:
    f = -np.inf
    for _ in range(n):
        s, f = sweep.sweep(p, s)
    return s, f


@FAST
@given(crowds(), st.sampled_from(["instance", "query"]), st.sampled_from(EXTENSIONS),
       st.integers(1, 4), st.integers(0, 2**6 - 1))  # fmt: skip
def test_the_next_sweep_never_falls_below_the_last_and_only_the_blocks_move(
    crowd, gran, ext, n, bits
):
    df, scale = crowd  # the scale it was drawn on: a level far from the used ones is no typo
    p, s = problem_and_state(df, gran, *ext, scale=scale)
    s, f = _sweeps(p, s, n)
    named = (bits >> np.arange(p.n_annotators)) % 2 == 1  # the annotators whose blocks move
    new, moved = settle.settle_items(p, s, named)
    _, f_next = sweep.sweep(p, new)
    assert f_next >= f - 1e-9 * max(1.0, abs(f))
    assert np.allclose(moved, np.abs(new.mu_m - s.mu_m))
    for name in ("tau_shape", "tau_rate", "eps", "bias_mean", "bias_prec"):
        a, b = getattr(s, name), getattr(new, name)
        assert (a is None and b is None) or np.array_equal(a[~named], b[~named]), name
    for name in ("pi", "dir_a", "alpha", "beta", "lam_b"):
        a, b = getattr(s, name), getattr(new, name)
        assert (a is None and b is None) or np.array_equal(a, b), name
    if not np.array_equal(p.cat_l, p.inst):  # a query's difficulty spans other items: held
        assert np.array_equal(new.delta_rate, s.delta_rate)


def test_gold_items_are_not_moved() -> None:
    crowd = simulate_crowd(n_items=60, n_annotators=8, spammer_share=0.3, random_state=4)
    p, s = problem_and_state(crowd.ratings, "instance", True, "global", gold_every=3)
    s, _ = _sweeps(p, s, 3)
    new, moved = settle.settle_items(p, s)
    gold = p.gold_mask
    assert np.array_equal(new.mu_m[gold], s.mu_m[gold]) and not moved[gold].any()
    assert np.array_equal(new.delta_rate[gold], s.delta_rate[gold])
    assert moved[~gold].max() > 0


def test_own_ratings_solve_the_gold_items_as_if_they_were_not_gold() -> None:
    crowd = simulate_crowd(n_items=60, n_annotators=8, spammer_share=0.3, random_state=4)
    p, s = problem_and_state(crowd.ratings, "instance", True, "global", gold_every=3)
    s, _ = _sweeps(p, s, 3)
    mu = settle.own_ratings(p, s)
    gold = p.gold_mask
    # everything but the gold items is held
    assert np.array_equal(mu[~gold], s.mu_m[~gold])
    # each gold item as the blocks of the problem without gold solve it (items' blocks are
    # independent with the annotators held)
    free, _ = settle.settle_items(p.with_gold(None), s)
    np.testing.assert_allclose(mu[gold], free.mu_m[gold], rtol=0, atol=1e-12)
    assert np.abs(mu[gold] - s.mu_m[gold]).max() > 0.1  # the gold was imposed, now it is not
    # without gold: the state's own
    plain = p.with_gold(None)
    assert settle.own_ratings(plain, s) is s.mu_m


# ------------------------------------------------------------------ the rounds' q(x), q(y)


@pytest.fixture(scope="module")
def crowd():
    return simulate_crowd(
        n_items=300, n_annotators=25, spammer_share=0.3, random_state=4, bias_sd=0.4,
        favourite_share=1.0,
    )  # fmt: skip


def assert_same_rated(got: reference.Rated, want: reference.Rated) -> None:
    for field in want._fields:
        g, w = getattr(got, field), getattr(want, field)
        if w is None:
            assert g is None, field
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, field
        np.testing.assert_array_equal(g, w, err_msg=field)


def row_sets(p) -> list[np.ndarray]:
    """Every rating; a sorted half (annotators and categories fewer than the rows: their
    moments taken once each); a few rows with repeats (more annotators and categories than
    rows: the moments gathered per rating)."""
    rng = np.random.default_rng(0)
    half = np.sort(rng.choice(p.n_ratings, p.n_ratings // 2, replace=False))
    return [np.arange(p.n_ratings), half, rng.choice(p.n_ratings, 7)]


@needs_jit
@pytest.mark.parametrize("granularity", ["instance", "query"])
@pytest.mark.parametrize(("bias", "spam_dist"), EXTENSIONS)
@pytest.mark.parametrize("gold_every", [0, 4])
def test_the_reference_q_xy_to_the_bit(crowd, granularity, bias, spam_dist, gold_every) -> None:
    p, s = problem_and_state(crowd.ratings, granularity, bias, spam_dist, gold_every=gold_every)
    for rows in row_sets(p):
        want = reference.q_xy(p, s, rows, kernels.tn_stats)
        assert_same_rated(settle.q_xy(p, s, rows), want)


@needs_jit
def test_the_paper_logit_and_extreme_states_to_the_bit(crowd) -> None:
    """eq. (4)'s logit (``exact=False``); ratings far in a tail and nearly certain (the
    ratings ``tn_vector`` leaves to ``tn_scalar``); Gamma shapes below ``gamma_functions``'
    range, where the moments are scipy's."""
    p, s = problem_and_state(crowd.ratings, "instance", True, "global")
    rng = np.random.default_rng(1)
    far = dataclasses.replace(
        s,
        mu_m=s.mu_m + rng.choice([0.0, 40.0, -40.0], s.mu_m.size),
        tau_rate=s.tau_rate * rng.choice([1.0, 1e-9, 1e9], s.tau_rate.size),
        delta_shape=np.where(rng.random(s.delta_shape.size) < 0.05, 1e-310, s.delta_shape),
    )
    for problem in (p, dataclasses.replace(p, exact=False)):
        for state in (s, far):
            for rows in row_sets(problem):
                want = reference.q_xy(problem, state, rows, kernels.tn_stats)
                assert_same_rated(settle.q_xy(problem, state, rows), want)


@needs_jit
def test_over_the_cores_while_alone_the_same_bits(crowd) -> None:
    p, s = problem_and_state(crowd.ratings, "query", True, "annotator")
    rows = np.repeat(np.arange(p.n_ratings), kernels.CHUNK_RATINGS // p.n_ratings + 1)
    assert kernels.CHUNK_RATINGS <= rows.size < kernels.PARALLEL_MIN_RATINGS
    serial = settle.q_xy(p, s, rows)
    try:
        kernels.run_alone(lambda: True)
        assert kernels.use_cores(rows.size)
        assert_same_rated(settle.q_xy(p, s, rows), serial)
    finally:
        kernels.run_alone(None)


@needs_jit
def test_the_settle_reads_the_compiled_rows(crowd, monkeypatch) -> None:
    """The settle's rounds take the compiled q_xy, and reach the same state as with the
    reference (so its bits are the ones the fits had)."""
    p, s = problem_and_state(crowd.ratings, "instance", True, "global")
    moving = np.zeros(p.n_annotators, dtype=bool)
    moving[:3] = True
    calls = []
    compiled = settle.q_xy
    monkeypatch.setattr(settle, "q_xy", lambda *a: calls.append(1) or compiled(*a))
    new, moved = settle.settle_items(p, s, moving)
    assert calls
    monkeypatch.setattr(
        settle, "q_xy", lambda p, s, rows: reference.q_xy(p, s, rows, kernels.tn_stats)
    )
    ref_new, ref_moved = settle.settle_items(p, s, moving)
    np.testing.assert_array_equal(moved, ref_moved)
    for field in ("mu_m", "lam_m", "delta_shape", "delta_rate", "tau_shape", "tau_rate", "eps"):
        np.testing.assert_array_equal(getattr(new, field), getattr(ref_new, field), field)
