"""The label EM's compiled steps between its passes against ``confusion_model``'s numpy formulas:
the same bits."""

from __future__ import annotations

import numpy as np
import pytest
from _compiled import compiled_libm

from ordmix_core.labels import confusion_model as lm
from ordmix_core.labels import confusion_steps as label_steps
from ordmix_core.vb import kernels


@compiled_libm
@pytest.mark.parametrize("k", [2, 3, 5])
def test_confusion_and_careless_split_compiled_equal_numpy(monkeypatch, k):
    """The EM's M-step helpers, compiled or numpy's formulas: the same bits, NaN where numpy
    gives NaN, and extreme parameters (exp's subnormal range) included."""
    rng = np.random.default_rng(7)
    d = lm.design(k)
    a = rng.normal(0, 3.0, (40, d.shape[2]))
    logits = np.einsum("crj,j->cr", d, a[3])
    a[3] *= 720.0 / -(logits - logits.max(axis=1, keepdims=True)).min()  # a cell at exp(-720)
    a[5, 0] = np.nan
    t = rng.random((40, k, k)) * rng.integers(0, 30, (40, 1, 1))
    gamma = np.concatenate([[0.0, 1.0], rng.random(38)])
    got = {}
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        p = lm.confusion(a, d)
        got[use_jit] = (p, *lm.careless_split(t, np.nan_to_num(p), gamma))
    for fast, slow in zip(got[True], got[False], strict=True):
        np.testing.assert_array_equal(fast, slow)
        finite = np.isfinite(slow)
        assert fast[finite].tobytes() == slow[finite].tobytes()
    p = got[True][0]
    assert np.isnan(p[5]).all() and ((p[3] > 0.0) & (p[3] < 2.2250738585072014e-308)).any()


@pytest.mark.parametrize("shape", [(1, 3), (7, 2), (20026, 3), (5000, 5), (100_000, 7)])
def test_column_sums_are_numpys_sum_over_rows(shape):
    """``column_sums`` adds row by row, which is numpy's order for ``q.sum(axis=0)`` of a
    C-ordered (M, K) array: the same bits."""
    q = np.random.default_rng(shape[0]).dirichlet(np.ones(shape[1]), size=shape[0])
    assert label_steps.column_sums(q).tobytes() == q.sum(axis=0).tobytes()
    assert label_steps.column_sums(q[:0]).tobytes() == q[:0].sum(axis=0).tobytes()
