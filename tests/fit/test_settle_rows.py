"""``settle_rows.q_xy``: the settle's q(x), q(y) of a few ratings, compiled, with
``reference.q_xy``'s bits for every model the settle meets, on one thread and on the cores."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_extensions import EXTENSIONS, problem_and_state

from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import settle, settle_rows
from ordmix_core.vb import kernels, reference

needs_jit = pytest.mark.skipif(not kernels.USE_JIT, reason="numba")


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
        assert_same_rated(settle_rows.q_xy(p, s, rows), want)


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
                assert_same_rated(settle_rows.q_xy(problem, state, rows), want)


@needs_jit
def test_over_the_cores_while_alone_the_same_bits(crowd) -> None:
    p, s = problem_and_state(crowd.ratings, "query", True, "annotator")
    rows = np.repeat(np.arange(p.n_ratings), kernels.CHUNK_RATINGS // p.n_ratings + 1)
    assert kernels.CHUNK_RATINGS <= rows.size < kernels.PARALLEL_MIN_RATINGS
    serial = settle_rows.q_xy(p, s, rows)
    try:
        kernels.run_alone(lambda: True)
        assert kernels.use_cores(rows.size)
        assert_same_rated(settle_rows.q_xy(p, s, rows), serial)
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
    compiled = settle_rows.q_xy
    monkeypatch.setattr(settle_rows, "q_xy", lambda *a: calls.append(1) or compiled(*a))
    new, moved = settle.settle_items(p, s, moving)
    assert calls
    monkeypatch.setattr(
        settle_rows, "q_xy", lambda p, s, rows: reference.q_xy(p, s, rows, kernels.tn_stats)
    )
    ref_new, ref_moved = settle.settle_items(p, s, moving)
    np.testing.assert_array_equal(moved, ref_moved)
    for field in ("mu_m", "lam_m", "delta_shape", "delta_rate", "tau_shape", "tau_rate", "eps"):
        np.testing.assert_array_equal(getattr(new, field), getattr(ref_new, field), field)
