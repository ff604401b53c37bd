"""The held-out confusion predictive compiled (``predictive_rows``) against ``label_choice``'s
numpy formulas: the same bits, on one thread and over the cores, NaN where numpy gives NaN."""

from __future__ import annotations

import numpy as np
import pytest
from _compiled import compiled_libm

from ordmix_core.results import label_choice, predictive_rows
from ordmix_core.vb import kernels


def _crowd(k: int, n_ratings: int, seed: int) -> dict:
    """Level posteriors with zeros (the floor) and a NaN row, log confusions with -inf cells
    (a level never given: 0 * -inf is NaN for a rating counting 0) and subnormal ones, and
    weights 0, 1 and between."""
    rng = np.random.default_rng(seed)
    m, n = 300, 40
    q = rng.dirichlet(np.full(k, 0.3), size=m)
    q[rng.random((m, k)) < 0.1] = 0.0
    q[7] = np.nan
    p = rng.dirichlet(np.ones(k), size=(n, k))
    p[rng.random((n, k, k)) < 0.05] = 1e-310
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    log_p[3, :, 1] = -np.inf
    ann = rng.integers(0, n, n_ratings)
    ann[:5] = 3
    inst = rng.integers(0, m, n_ratings)
    lev = rng.integers(0, k, n_ratings)
    lev[:5] = 1
    weight = rng.random(n_ratings)
    weight[::11], weight[::13], weight[:1] = 0.0, 1.0, 0.0
    return dict(
        q=q, log_p=log_p, annotator=ann, instance=inst, level=lev, weight=weight,
        eps=rng.random(n_ratings), spam_p=rng.random(n_ratings) * (rng.random(n_ratings) > 0.1),
    )  # fmt: skip


def _both(monkeypatch, fn, **kw) -> tuple[np.ndarray, np.ndarray]:
    got = {}
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            got[use_jit] = fn(**kw)
    return got[True], got[False]


def _same_bits(fast: np.ndarray, slow: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(slow))
    assert fast[~np.isnan(fast)].tobytes() == slow[~np.isnan(slow)].tobytes()


@compiled_libm
@pytest.mark.parametrize("cores", [False, True])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_confusion_and_mixed_predictive_compiled_equal_numpy(monkeypatch, k, cores):
    """Alone (every rating 1, or weighted) and mixed with the spam part: the compiled rows give
    numpy's floats, on the calling thread and over the cores (several blocks)."""
    monkeypatch.setattr(kernels, "use_cores", lambda size: cores)
    c = _crowd(k, 3 * predictive_rows.BLOCK + 17, seed=k)
    alone = {key: c[key] for key in ("q", "log_p", "annotator", "instance", "level")}
    for kw in (alone, {**alone, "weight": c["weight"]}):
        fast, slow = _both(monkeypatch, label_choice.confusion_log_predictive, **kw)
        _same_bits(fast, slow)
    fast, slow = _both(monkeypatch, label_choice.mixed_log_predictive, **c)
    _same_bits(fast, slow)
    # the cases the crowd was made for are there: NaN (the NaN item, 0 * -inf), the floor
    assert np.isnan(slow).any() and not np.isnan(slow).all()
    assert (slow == np.log(label_choice.FLOOR)).any()


@compiled_libm
def test_blocks_do_not_depend_on_threads(monkeypatch):
    """The rows are one rating each: over the cores or not, the same bytes."""
    c = _crowd(5, 2 * predictive_rows.BLOCK + 5, seed=11)
    out = []
    for cores in (False, True):
        monkeypatch.setattr(kernels, "use_cores", lambda size, cores=cores: cores)
        out.append(
            predictive_rows.confusion_rows(
                c["q"], c["log_p"], c["annotator"], c["instance"], c["level"],
                label_choice.FLOOR, c["weight"], c["eps"], c["spam_p"],
            ).tobytes()
        )  # fmt: skip
    assert out[0] == out[1]


def test_no_ratings():
    """An empty input gives an empty output (no block runs)."""
    c = _crowd(3, 0, seed=1)
    got = predictive_rows.confusion_rows(
        c["q"], c["log_p"], c["annotator"], c["instance"], c["level"], label_choice.FLOOR
    )
    assert got.shape == (0,)
