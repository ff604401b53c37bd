"""The fused sweep's phases: what a sweep remembers for the next one changes no number."""

from __future__ import annotations

import numpy as np
import pytest
from test_sweep import STATE_FIELDS, initial_state, make_problem

from ordmix_core.data.crowd import prepare
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.vb import phases, sweep, updates


@pytest.fixture(scope="module")
def problem():
    ratings = simulate_crowd(n_items=150, n_annotators=12, spammer_share=0.3, random_state=4)
    data = prepare(ratings.ratings, granularity="instance")
    p = make_problem(data)
    return p, initial_state(data, p, seed=5)


def chain(
    p: sweep.Problem, s: sweep.State, n: int, forget: bool
) -> tuple[sweep.State, list[float]]:
    bounds = []
    for _ in range(n):
        if forget:
            phases.forget_gamma()
        s, f = phases.sweep_fused(p, s)
        bounds.append(f)
    return s, bounds


def test_remembered_gamma_statistics_change_no_bit(problem, monkeypatch) -> None:
    p, s0 = problem
    calls = []
    real = updates.gamma_stats
    monkeypatch.setattr(updates, "gamma_stats", lambda a, b: calls.append(a.size) or real(a, b))
    phases.forget_gamma()
    remembered, f_remembered = chain(p, s0, 6, forget=False)
    n_remembered = len(calls)
    calls.clear()
    fresh, f_fresh = chain(p, s0, 6, forget=True)
    assert f_remembered == f_fresh
    for name in (*STATE_FIELDS, "omega"):
        assert np.array_equal(getattr(remembered, name), getattr(fresh, name)), name
    # four Gamma statistics a sweep without the memory (old and new q(tau), q(delta)); with
    # it, the old ones of every sweep but the first are the previous sweep's new ones
    assert len(calls) == 4 * 6
    assert n_remembered == 4 + 2 * 5


def test_recall_computes_for_other_arrays_with_the_same_values(problem) -> None:
    p, s0 = problem
    phases.forget_gamma()
    s, _ = phases.sweep_fused(p, s0)
    kept = phases.recall_gamma(s.delta_shape, s.delta_rate)
    assert phases.recall_gamma(s.delta_shape, s.delta_rate) is kept  # the very arrays
    copy = s.copy()
    copy.delta_rate[0] *= 2.0  # a copy may be changed: its statistics are its own
    got = phases.recall_gamma(copy.delta_shape, copy.delta_rate)
    assert got is not kept
    for a, b in zip(got, updates.gamma_stats(copy.delta_shape, copy.delta_rate), strict=True):
        assert np.array_equal(a, b)
    assert got[0][0] == pytest.approx(kept[0][0] / 2.0)
    phases.release_scratch()  # forgets them too
    assert phases.recall_gamma(s.delta_shape, s.delta_rate) is not kept


def test_rating_codes_are_unsigned_views_of_the_problems_codes():
    """The passes get the codes as uint32 views: the same memory, the same values."""
    data = prepare(simulate_crowd(n_items=30, n_annotators=6, random_state=1).ratings)
    p = make_problem(data)
    codes = phases.rating_codes(p)
    for got, want in zip(codes, (p.ann, p.inst, p.cat_l, p.level), strict=True):
        assert got.dtype == np.uint32 and np.shares_memory(got, want)
        np.testing.assert_array_equal(got, want)
