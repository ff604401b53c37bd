"""``fixed_order``: level sums left to right, the row-wise log softmax built on them, and
Cholesky solves."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import log_softmax as scipy_log_softmax

from ordmix_core.numerics import fixed_order


def test_last_sum_adds_left_to_right() -> None:
    # 1 + 1e16 - 1e16 is 0 left to right (the 1 is lost) and 1 in any order that first cancels
    x = np.array([[1.0, 1e16, -1e16], [2.0, 3.0, 4.0]])
    np.testing.assert_array_equal(fixed_order.last_sum(x), [0.0, 9.0])
    long = np.concatenate([x, np.zeros((2, fixed_order.ACCUMULATE_FROM))], axis=1)
    np.testing.assert_array_equal(fixed_order.last_sum(long), [0.0, 9.0])
    cube = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(fixed_order.last_sum(cube), cube.sum(axis=-1))


def _left_to_right(x: np.ndarray) -> np.ndarray:
    out = x[..., 0].copy()
    for i in range(1, x.shape[-1]):
        out += x[..., i]
    return out


@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 3), st.integers(fixed_order.ACCUMULATE_FROM + 1, 300)),
        elements=st.floats(-1e16, 1e16),
    )
)
def test_a_long_last_axis_is_added_left_to_right_too(x) -> None:
    # a 0..100 scale's K x K cells: the same additions in the same order, so the same bits
    got = fixed_order.last_sum(x)
    assert got.tobytes() == _left_to_right(x).tobytes()


def test_last_sum_does_not_write_into_its_input() -> None:
    x = np.ones((3, 2))
    fixed_order.last_sum(x)
    np.testing.assert_array_equal(x, 1.0)


@given(
    hnp.arrays(
        float,
        st.tuples(st.integers(1, 6), st.integers(1, 5)),
        elements=st.floats(-1e3, 1e3, allow_nan=False),
    )
)
def test_log_softmax_is_scipys_and_normalised(z: np.ndarray) -> None:
    out = fixed_order.log_softmax(z)
    assert np.all(np.isfinite(out)) and np.all(out <= 0.0)
    np.testing.assert_allclose(out, scipy_log_softmax(z, axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0, rtol=1e-12)


def test_log_softmax_rows_far_apart() -> None:
    z = np.array([[1000.0, 0.0], [-1000.0, -1000.0]])
    np.testing.assert_allclose(fixed_order.log_softmax(z), [[0.0, -1000.0], [-np.log(2)] * 2])


def test_cholesky_solves_match_lapack() -> None:
    rng = np.random.default_rng(8)
    x = rng.normal(size=(6, 5, 5))
    m = x @ x.transpose(0, 2, 1) + 0.1 * np.eye(5)
    b = rng.normal(size=(6, 5, 3))
    low = fixed_order.cholesky(m)
    np.testing.assert_allclose(low @ low.transpose(0, 2, 1), m, rtol=1e-12, atol=1e-12)
    assert not np.triu(low, 1).any()
    got = fixed_order.cho_solve(low, b)
    np.testing.assert_allclose(got, np.linalg.solve(m, b), rtol=1e-9, atol=1e-9)
