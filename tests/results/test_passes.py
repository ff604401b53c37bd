"""The results' compiled passes against the numpy formulas they replace: the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from ordmix_core.numerics import jit, libm
from ordmix_core.results import label_model as lm
from ordmix_core.results import passes, reliability
from ordmix_core.vb import kernels

# the passes call libm as ``numerics.libm`` does when compiled; without compiled code
# (ORDMIX_NO_JIT=1) libm is numpy's, which may round differently (AVX-512)
compiled_libm = pytest.mark.skipif(not jit.USE_JIT, reason="libm is numpy's without numba")


def _ratings(rng, n=9, m=40, k=4, r=600):
    ann = rng.integers(0, n, r).astype(np.int64)
    inst = rng.integers(0, m, r).astype(np.int64)
    rating = rng.integers(0, k, r).astype(np.int64)
    return ann, inst, rating


def test_soft_tables_are_the_bincount_sums_bit_for_bit():
    rng = np.random.default_rng(0)
    ann, inst, rating = _ratings(rng)
    q = rng.dirichlet(np.ones(4), size=40)
    want = lm.soft_tables(q, ann, inst, rating, 9)
    got = passes.soft_tables(q, ann, inst, rating, 9)
    assert got.tobytes() == want.tobytes()


@compiled_libm
@pytest.mark.parametrize("with_gold", [False, True])
def test_e_step_is_item_log_lik_then_posterior_bit_for_bit(with_gold):
    rng = np.random.default_rng(1)
    ann, inst, rating = _ratings(rng)
    logp = libm.log(lm.confusion(rng.normal(0, 2.0, (9, 6)), lm.design(4)))
    rho = rng.dirichlet(np.ones(4))
    q_old = rng.dirichlet(np.ones(4), size=40)
    gold = np.where(rng.random(40) < 0.3, rng.integers(0, 4, 40), -1) if with_gold else None
    q_want, ev_want = lm.posterior(lm.item_log_lik(logp, ann, inst, rating, 40), rho, gold)
    q, ev, moved = passes.e_step(logp, libm.log(rho), ann, inst, rating, gold, q_old)
    assert q.tobytes() == q_want.tobytes()
    assert ev == ev_want
    assert moved == float(np.abs(q_want - q_old).max())


@compiled_libm
def test_e_step_propagates_nan_as_numpy_does():
    rng = np.random.default_rng(2)
    ann, inst, rating = _ratings(rng)
    logp = libm.log(lm.confusion(rng.normal(size=(9, 6)), lm.design(4)))
    logp[3, 2, 1] = np.nan
    rho = np.full(4, 0.25)
    q_old = rng.dirichlet(np.ones(4), size=40)
    q_want, ev_want = lm.posterior(lm.item_log_lik(logp, ann, inst, rating, 40), rho, None)
    q, ev, moved = passes.e_step(logp, libm.log(rho), ann, inst, rating, None, q_old)
    np.testing.assert_array_equal(q, q_want)  # NaN where numpy has NaN
    assert np.isnan(ev) and np.isnan(ev_want) and np.isnan(moved)


@compiled_libm
@pytest.mark.parametrize("with_gold", [False, True])
def test_fit_levels_compiled_equals_numpy(monkeypatch, with_gold):
    """The whole EM, compiled passes or numpy formulas: the same bits (``kernels.USE_JIT``)."""
    rng = np.random.default_rng(3)
    ann, inst, rating = _ratings(rng, n=12, m=60, k=5, r=900)
    gold = np.where(rng.random(60) < 0.2, rng.integers(0, 5, 60), -1) if with_gold else None
    fits = []
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        fits.append(lm.fit_levels(ann, inst, rating, 12, 60, 5, gold=gold, max_iter=30))
    fast, slow = fits
    assert fast.n_iter == slow.n_iter and fast.evidence == slow.evidence
    for name in ("q", "confusion", "rho", "params", "a_bar", "lam"):
        assert getattr(fast, name).tobytes() == getattr(slow, name).tobytes(), name


@pytest.mark.parametrize("square", [False, True])
def test_pull_sums_are_the_per_annotator_bincount(square):
    rng = np.random.default_rng(4)
    ann = rng.integers(0, 7, 500).astype(np.int32)
    r = libm.exp(rng.normal(0, 3.0, 500))
    e = rng.random(7)
    pull = reliability._pull(e[ann], r)
    want = np.bincount(ann, weights=pull**2 if square else pull, minlength=7)
    assert passes.pull_sums(ann, r, e, square).tobytes() == want.tobytes()


def test_posterior_mode_compiled_equals_numpy(monkeypatch):
    rng = np.random.default_rng(5)
    ann = rng.integers(0, 8, 700).astype(np.int32)
    log_r = rng.normal(0, 20.0, 700)  # some beyond the clip
    modes = []
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        modes.append(reliability._posterior_mode(ann, log_r, 8, 1.0, 1.0))
    for fast, slow in zip(*modes, strict=True):
        assert fast.tobytes() == slow.tobytes()
