"""The blocks' per-annotator sums as rows of their own annotators (``block_labels.add_rows``):
added by code they are the sums over every block's ratings, computed here densely."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.dask_engine import block_labels


def _block_part(rng, ann, k):
    """A block's soft tables of random ratings, as ``label_start`` sends them: rows of the
    block's annotators (sorted global codes), and the same sums over all N annotators."""
    codes, local = np.unique(ann, return_inverse=True)
    rating = rng.integers(0, k, ann.size)
    w = rng.random(ann.size)
    rows = np.zeros((codes.size, k))
    np.add.at(rows, (local, rating), w)
    return {"codes": codes, "rows_t": rows, "q_sums": rows.sum(axis=0), "max_moved": w.max()}


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_blocks=st.integers(1, 9),
    n=st.integers(1, 30),
)
def test_rows_added_by_code_are_the_dense_sums(seed, n_blocks, n):
    rng = np.random.default_rng(seed)
    k = 3
    parts, dense = [], np.zeros((n, k))
    for _ in range(n_blocks):
        ann = rng.integers(0, n, rng.integers(1, 40))  # a block holds some annotators only
        part = _block_part(rng, ann, k)
        dense[part["codes"]] += part["rows_t"]
        parts.append(part)
    # a tree of fan-in 2 over the blocks, as the client's reduction may take them
    while len(parts) > 1:
        parts = [block_labels.add_rows(*parts[i : i + 2]) for i in range(0, len(parts), 2)]
    got = parts[0]
    assert np.all(np.diff(got["codes"]) > 0)  # sorted, each once
    full = np.zeros((n, k))
    full[got["codes"]] = got["rows_t"]
    np.testing.assert_allclose(full, dense, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got["q_sums"], dense.sum(axis=0), rtol=1e-12)
    absent = np.setdiff1d(np.arange(n), got["codes"])
    assert not dense[absent].any()  # an annotator no block holds has no row


def test_the_largest_move_is_nan_when_any_block_is():
    """The EM's stop reads ``max_moved``: a NaN anywhere must not be hidden by a maximum that
    depends on the order (``max`` over floats with NaN does)."""
    parts = [
        {"codes": np.array([0]), "rows_t": np.ones((1, 2)), "max_moved": m}
        for m in (0.5, float("nan"), 0.2)
    ]
    for order in ([0, 1, 2], [1, 0, 2], [2, 0, 1]):
        got = block_labels.add_rows(*[parts[i] for i in order])
        assert np.isnan(got["max_moved"])
    assert block_labels.add_rows(parts[0], parts[2])["max_moved"] == pytest.approx(0.5)
