"""The reliability posterior's compiled pass against the numpy formula it replaces: the same
bits."""

from __future__ import annotations

import numpy as np
import pytest
from _compiled import compiled_libm

from ordmix_core.numerics import libm
from ordmix_core.results import evidence, passes, reliability
from ordmix_core.vb import kernels


@pytest.mark.parametrize("square", [False, True])
def test_pull_sums_are_the_per_annotator_bincount(square):
    rng = np.random.default_rng(4)
    ann = rng.integers(0, 7, 500).astype(np.int32)
    r = libm.exp(rng.normal(0, 3.0, 500))
    e = rng.random(7)
    pull = reliability._pull(e[ann], r)
    want = np.bincount(ann, weights=pull**2 if square else pull, minlength=7)
    assert passes.pull_sums(ann, r, e, square).tobytes() == want.tobytes()


@compiled_libm
@pytest.mark.parametrize("square", [False, True])
def test_pull_sums_of_log_ratios_exponentiate_in_the_pass(square):
    """``log_clip``: the ratios from their logs in the pass, ``libm.exp(np.clip(...))``'s bits."""
    rng = np.random.default_rng(7)
    ann = rng.integers(0, 7, 5000).astype(np.int32)
    log_r = rng.normal(0, 30.0, 5000)  # some beyond the clip
    log_r[[3, 40]] = [50.0, -50.0]
    r = libm.exp(np.clip(log_r, -50.0, 50.0))
    e = rng.random(7)
    want = passes.pull_sums(ann, r, e, square)
    assert passes.pull_sums(ann, log_r, e, square, 50.0).tobytes() == want.tobytes()


@pytest.mark.parametrize("chunk", [1 << 20, 256], ids=["one-chunk", "chunks"])
def test_posterior_mode_compiled_equals_numpy(monkeypatch, chunk):
    """Within one chunk (ratios stored) and beyond it (ratios in the pass): numpy's bits."""
    rng = np.random.default_rng(5)
    ann = rng.integers(0, 8, 700).astype(np.int32)
    log_r = rng.normal(0, 20.0, 700)  # some beyond the clip
    monkeypatch.setattr(evidence, "CHUNK", chunk)
    modes = []
    for use_jit in (True, False):
        monkeypatch.setattr(kernels, "USE_JIT", use_jit)
        pulls = reliability.pull_sums(ann, log_r, 8)
        modes.append(reliability._posterior_mode(pulls, 8, 1.0, 1.0))
    for fast, slow in zip(*modes, strict=True):
        assert fast.tobytes() == slow.tobytes()
