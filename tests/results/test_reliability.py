"""reliability.py's numpy path against its compiled one, and the fewest ratings that can flag
an annotator at its boundaries. (The posterior against the exact Beta mixture, its properties
and the flags on real and simulated crowds: ``test_decisions.py``; the compiled pull sums:
``test_passes.py``.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ordmix_core.results import evidence, reliability
from ordmix_core.vb import kernels


def _ratings(n_ratings: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Annotators 0..6 of 8 (the last one has no rating), log evidence far beyond the clip."""
    rng = np.random.default_rng(seed)
    ann = rng.integers(0, 7, n_ratings).astype(np.int32)
    log_r = rng.normal(0.0, 80.0, n_ratings)
    assert (log_r > evidence.LOG_R_CLIP).any() and (log_r < -evidence.LOG_R_CLIP).any()
    return ann, log_r


@pytest.mark.parametrize("chunk", [1 << 20, 64], ids=["one-chunk", "chunks"])
def test_grid_sums_in_numpy_are_the_compiled_ones(monkeypatch, chunk):
    """The grid's log likelihoods (G, N) without numba: each rating's evidence clipped to
    exp(+-LOG_R_CLIP) on both sides (unclipped, a node's sum moves by tens of nats), an
    annotator without ratings a row of zeros."""
    ann, log_r = _ratings(600, 3)
    monkeypatch.setattr(evidence, "CHUNK", chunk)
    rng = np.random.default_rng(4)
    mode, width = rng.normal(0.0, 3.0, 8), rng.uniform(0.2, 2.0, 8)
    z = np.linspace(-16.0, 16.0, 9)
    got = {}
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        got[use_jit] = reliability.grid_sums(ann, log_r, 8, mode, width, z)
    assert got[False].shape == (9, 8)
    np.testing.assert_allclose(got[False], got[True], rtol=1e-12, atol=1e-9)
    assert (got[False][:, 7] == 0.0).all()
    # the clip, computed here: log(1 - eps + eps r) with r = exp(clip(log_r)), at the nodes
    # where eps is not within 1e-9 of 0 or 1 (there 1 - eps would lose the digits)
    u = reliability.grid_nodes(mode, width, z)
    eps = 1.0 / (1.0 + np.exp(-u))
    r = np.exp(np.clip(log_r, -evidence.LOG_R_CLIP, evidence.LOG_R_CLIP))
    want = np.stack([np.bincount(ann, np.log1p(e[ann] * (r - 1.0)), minlength=8) for e in eps])
    inner = (np.abs(u) <= 20.0) & (np.arange(8) < 7)
    assert inner.sum() > 20
    np.testing.assert_allclose(got[False][inner], want[inner], rtol=1e-7)


@pytest.mark.parametrize("use_jit", [True, False], ids=["compiled", "numpy"])
def test_grid_sums_of_some_nodes_are_those_of_all_to_the_bit(monkeypatch, use_jit):
    """A node's sums do not depend on the other nodes of the call, nor on a kept ``order``:
    the Dask engine asks its blocks for the grid a few nodes at a time (``label_fit``)."""
    monkeypatch.setattr(kernels, "USE_JIT", use_jit)
    ann, log_r = _ratings(5000, 5)
    rng = np.random.default_rng(6)
    mode, width = rng.normal(0.0, 3.0, 8), rng.uniform(0.2, 2.0, 8)
    z = np.linspace(-16.0, 16.0, 37)
    whole = reliability.grid_sums(ann, log_r, 8, mode, width, z)
    order = np.argsort(ann, kind="stable")
    for step in (1, 4, 16):
        parts = [
            reliability.grid_sums(ann, log_r, 8, mode, width, z[lo : lo + step], order)
            for lo in range(0, z.size, step)
        ]
        assert np.array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize("square", [False, True])
def test_pull_sums_in_numpy_count_every_annotator(monkeypatch, square):
    """Without numba the pulls are summed a chunk at a time per annotator: (N,) with zeros for
    an annotator who has no ratings, as the compiled pass gives."""
    ann, log_r = _ratings(300, 5)
    e = np.random.default_rng(6).random(8)
    got = {}
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        got[use_jit] = reliability.pull_sums(ann, log_r, 8)(e, square)
    assert got[False].shape == (8,) and got[False][7] == 0.0
    np.testing.assert_allclose(got[False], got[True], rtol=1e-12, atol=1e-12)


def test_fewest_ratings_to_flag_at_its_boundaries():
    """``P(Beta(1, 1 + n) < 0.5) = 1 - 0.5 ** (n + 1)``: exactly 0.875 at n = 2, which a
    confidence of 0.875 reaches (the rule is >=); the answer at ``max_n`` itself is found, and
    one not reached by ``max_n`` is ``max_n + 1`` (100,001 by default)."""
    assert stats.beta.cdf(0.5, 1, 3) == 0.875
    assert reliability.fewest_ratings_to_flag(0.5, 0.875) == 2
    assert reliability.fewest_ratings_to_flag(0.5, 0.9, max_n=3) == 3
    assert reliability.fewest_ratings_to_flag(0.5, 0.9, max_n=2) == 3
    assert reliability.fewest_ratings_to_flag(0.5, 0.9, max_n=1) == 2
    # a threshold of 1e-9 needs about 2.3e9 decisive ratings
    assert reliability.fewest_ratings_to_flag(threshold=1e-9) == 100_001
    assert reliability.fewest_ratings_to_flag(threshold=1e-9, max_n=10) == 11
