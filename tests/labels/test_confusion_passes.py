"""The confusion model's compiled passes against the numpy formulas they replace: the same bits."""

from __future__ import annotations

import numpy as np
import pytest
from _compiled import compiled_libm

from ordmix_core.labels import confusion_model as lm
from ordmix_core.labels import confusion_passes as passes
from ordmix_core.labels import confusion_ratings
from ordmix_core.numerics import jit, libm
from ordmix_core.vb import kernels


def _ratings(rng, n=9, m=40, k=4, r=600):
    ann = rng.integers(0, n, r).astype(np.int64)
    inst = rng.integers(0, m, r).astype(np.int64)
    rating = rng.integers(0, k, r).astype(np.int64)
    return ann, inst, rating


def _order(rng, inst, how):
    """The ratings in their order, sorted by item (stably), or shuffled."""
    if how == "sorted":
        return np.argsort(inst, kind="stable")
    if how == "shuffled":
        return rng.permutation(inst.size)
    return np.arange(inst.size)


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    """Run the parallel passes on 1 and on 2 numba threads."""
    if not jit.USE_JIT:
        yield request.param
        return
    before = kernels.numba.get_num_threads()
    kernels.numba.set_num_threads(min(request.param, kernels.numba.config.NUMBA_NUM_THREADS))
    yield request.param
    kernels.numba.set_num_threads(before)


@pytest.mark.parametrize("how", ["as-drawn", "sorted", "shuffled"])
def test_soft_tables_are_the_bincount_sums_bit_for_bit(threads, how):
    rng = np.random.default_rng(0)
    ann, inst, rating = _ratings(rng, r=3000)
    o = _order(rng, inst, how)
    ann, inst, rating = ann[o], inst[o], rating[o]
    q = rng.dirichlet(np.ones(4), size=40)
    want = lm.soft_tables(q, ann, inst, rating, 9)
    for parts in (1, 2, 5):
        got = passes.soft_tables(q, passes.partition(ann, 9, parts, inst, rating), 9)
        assert got.tobytes() == want.tobytes()


def test_group_is_a_stable_grouping_in_chunks():
    rng = np.random.default_rng(6)
    ann, inst, rating = _ratings(rng, r=1000)
    g = passes.group(inst, 45, ann, rating)  # items 40..44 have no ratings
    o = np.argsort(inst, kind="stable")
    assert np.array_equal(g.cols[0], ann[o]) and np.array_equal(g.cols[1], rating[o])
    assert all(c.dtype == np.int32 for c in g.cols)  # copied in a new order: half the bytes
    assert np.array_equal(np.diff(g.offsets), np.bincount(inst, minlength=45))
    assert g.bounds[0] == 0 and g.bounds[-1] == 45 and (np.diff(g.bounds) >= 0).all()
    assert g.bounds.size == passes.N_CHUNKS + 1
    s = np.sort(inst)
    assert passes.group(s, 40, ann).cols[0] is ann  # sorted: no sort, the codes as given
    w = rng.random(1000)  # float columns carried along keep their values and type
    assert np.array_equal(passes.group(inst, 45, ann, w).cols[1], w[o])


def test_codes_are_int32_and_int32_codes_are_not_copied():
    rng = np.random.default_rng(7)
    ann, inst, rating = _ratings(rng)
    assert passes.codes(ann).dtype == np.int32 and np.array_equal(passes.codes(ann), ann)
    small = ann.astype(np.int32)
    assert passes.codes(small) is small
    big = np.array([0, 2**31], np.int64)  # a code past int32's range keeps int64
    assert passes.codes(big).dtype == np.int64


@pytest.mark.parametrize("how", ["as-drawn", "sorted"])
def test_item_ratings_hold_int32_codes_whatever_the_callers_type(monkeypatch, how):
    """One type of codes in every pass (one compiled signature), and no copy of int32 codes:
    an in-memory fit's ratings are not held twice."""
    monkeypatch.setattr(confusion_ratings, "PARALLEL_MIN_RATINGS", 0)
    rng = np.random.default_rng(4)
    ann, inst, rating = _ratings(rng)
    o = _order(rng, inst, how)
    ann, inst, rating = ann[o], inst[o], rating[o]
    given = [c.astype(np.int32) for c in (ann, inst, rating)]
    for codes in ((ann, inst, rating), given):
        r = confusion_ratings.ItemRatings(*codes, 9, 40)
        held = [r.annotator, r.instance, r.rating]
        assert all(c.dtype == np.int32 for c in held)
        if r.by_item is not None:
            cols = r.by_part.cols + r.by_item.cols
            assert all(c.dtype == np.int32 for c in cols)
    assert all(h is g for h, g in zip(held, given, strict=True))


def test_the_experts_ratings_keep_the_ratings_types():
    ann, inst, rating = (np.array([0, 1, 1], np.int32) for _ in range(3))
    gold = np.array([-1, 2, -1, 0])
    a2, i2, r2 = confusion_ratings.with_expert(ann, inst, rating, gold, 2)
    assert a2.dtype == i2.dtype == r2.dtype == np.int32
    assert a2.tolist() == [0, 1, 1, 2, 2] and i2.tolist() == [0, 1, 1, 1, 3]
    assert r2.tolist() == [0, 1, 1, 2, 0]


@compiled_libm
@pytest.mark.parametrize("how", ["as-drawn", "sorted", "shuffled"])
def test_e_step_is_item_log_lik_then_posterior_bit_for_bit(threads, how):
    rng = np.random.default_rng(1)
    ann, inst, rating = _ratings(rng, m=300, r=3000)
    o = _order(rng, inst, how)
    ann, inst, rating = ann[o], inst[o], rating[o]
    logp = libm.log(lm.confusion(rng.normal(0, 2.0, (9, 6)), lm.design(4)))
    rho = rng.dirichlet(np.ones(4))
    q_old = rng.dirichlet(np.ones(4), size=310)  # items 300..309 have no ratings
    ll = lm.item_log_lik(logp, ann, inst, rating, 310)
    q_want, ev_want = lm.posterior(ll, rho)
    for chunks in (passes.N_CHUNKS, 1):
        by_item = passes.group(inst, 310, ann, rating, n_chunks=chunks)
        q, ev, moved = passes.e_step(logp, libm.log(rho), by_item, q_old)
        assert q.tobytes() == q_want.tobytes()
        assert ev == ev_want
        assert moved == float(np.abs(q_want - q_old).max())


@compiled_libm
def test_e_step_posteriors_down_to_subnormals_bit_for_bit():
    """Levels whose share of an item is below exp(-708) (a subnormal, or 0 below exp(-745)):
    the C library's exp there, as numpy's formulas (``libm.exp``), not the vector loop's 0."""
    rng = np.random.default_rng(5)
    ann, rating = rng.integers(0, 9, 40), rng.integers(0, 4, 40)
    inst = np.arange(40)  # one rating an item
    logp = libm.log(lm.confusion(rng.normal(size=(9, 6)), lm.design(4)))
    logp[:, 3, :] -= rng.uniform(700.0, 760.0, (9, 4))  # level 3: e^-700 .. e^-760 below
    rho = np.full(4, 0.25)
    q_old = rng.dirichlet(np.ones(4), size=40)
    q_want, ev_want = lm.posterior(lm.item_log_lik(logp, ann, inst, rating, 40), rho)
    assert ((q_want[:, 3] > 0) & (q_want[:, 3] < 2.2250738585072014e-308)).any()
    by_item = passes.group(inst, 40, ann, rating)
    q, ev, _ = passes.e_step(logp, libm.log(rho), by_item, q_old)
    assert q.tobytes() == q_want.tobytes() and ev == ev_want


@compiled_libm
def test_e_step_propagates_nan_as_numpy_does():
    rng = np.random.default_rng(2)
    ann, inst, rating = _ratings(rng)
    logp = libm.log(lm.confusion(rng.normal(size=(9, 6)), lm.design(4)))
    logp[3, 2, 1] = np.nan
    rho = np.full(4, 0.25)
    q_old = rng.dirichlet(np.ones(4), size=40)
    q_want, ev_want = lm.posterior(lm.item_log_lik(logp, ann, inst, rating, 40), rho)
    by_item = passes.group(inst, 40, ann, rating)
    q, ev, moved = passes.e_step(logp, libm.log(rho), by_item, q_old)
    np.testing.assert_array_equal(q, q_want)  # NaN where numpy has NaN
    assert np.isnan(ev) and np.isnan(ev_want) and np.isnan(moved)


def _expert_prior(careful, rho):
    return 0.7 * np.eye(rho.size) + 0.3 / rho.size


@compiled_libm
@pytest.mark.parametrize("parallel_min", [0, 10**9], ids=["parallel", "serial"])
@pytest.mark.parametrize("how", ["as-drawn", "sorted"])
@pytest.mark.parametrize("with_gold", [False, True])
def test_fit_compiled_equals_numpy(monkeypatch, threads, how, with_gold, parallel_min):
    """The whole EM, compiled passes or numpy formulas: the same bits (``kernels.USE_JIT``),
    the passes over the cores or on the calling thread."""
    monkeypatch.setattr(confusion_ratings, "PARALLEL_MIN_RATINGS", parallel_min)
    monkeypatch.setattr(lm, "NEWTON_PARALLEL_MIN", parallel_min)
    rng = np.random.default_rng(3)
    ann, inst, rating = _ratings(rng, n=12, m=60, k=5, r=900)
    o = _order(rng, inst, how)
    ann, inst, rating = ann[o], inst[o], rating[o]
    gold = np.where(rng.random(60) < 0.2, rng.integers(0, 5, 60), -1) if with_gold else None
    fits = []
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        fits.append(lm.fit(ann, inst, rating, 12, 60, 5, gold, _expert_prior, max_iter=30))
    fast, slow = fits
    assert fast.n_iter == slow.n_iter and fast.evidence == slow.evidence
    for name in ("q", "confusion", "rho", "params", "a_bar", "lam") + ("expert",) * with_gold:
        assert getattr(fast, name).tobytes() == getattr(slow, name).tobytes(), name


def test_newton_step_compiled_is_numpys_bit_for_bit(monkeypatch, threads):
    """The per-annotator compiled Newton step: the numpy step's bits (steps beyond the cap too)."""
    rng = np.random.default_rng(8)
    k, n = 5, 70
    d = lm.design(k)
    a = rng.normal(0, 2.0, (n, d.shape[2]))
    t = rng.gamma(0.5, 3.0, (n, k, k))
    t[:3] = 0.0  # annotators without ratings
    a_bar = rng.normal(size=d.shape[2])
    lam = np.eye(d.shape[2]) * 0.5 + 0.05
    p = lm.confusion(a, d)
    monkeypatch.setattr(kernels, "USE_JIT", False)
    want = lm.newton_step(a, t, d, a_bar, lam)
    for parallel in (True, False):
        got = passes.newton_step(a, t, d, a_bar, lam, p, lm.MAX_STEP, parallel)
        for w, g in zip(want, got, strict=True):
            assert g.tobytes() == w.tobytes()
