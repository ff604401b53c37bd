"""``libm``: numpy's elementwise functions with the C library's results on any CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordmix_core.numerics import libm

VALUES = np.concatenate(
    [
        np.random.default_rng(0).uniform(-745.0, 709.0, 50_000),
        np.exp(np.random.default_rng(1).uniform(-700.0, 700.0, 50_000)),
        np.random.default_rng(2).uniform(-1.0, 1.0, 50_000),
    ]
)
MATH = {
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "expm1": math.expm1,
    "log2": math.log2, "cos": math.cos,
}  # fmt: skip


def _math(name: str, v: float) -> float:
    """Python's ``math`` (the C library's function) with numpy's values where it raises."""
    try:
        return MATH[name](v)
    except ValueError:
        return -np.inf if v == (-1.0 if name == "log1p" else 0.0) else np.nan
    except OverflowError:
        return np.inf


#: computed by ``vector_math`` (within 1 ulp of the C library), not by the C library
VECTOR = ("exp", "log")


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, np.abs(got - want) / np.spacing(np.abs(want)))


@pytest.mark.parametrize("name", sorted(MATH))
def test_every_value_is_the_c_librarys(name) -> None:
    """Bit for bit the C library's value (Python's ``math`` calls it), on arrays of any shape;
    exp and log within 1 ulp of it (``vector_math``), and the C library's at its edges
    (subnormal results, log of 0, negatives). numpy's AVX-512 loops differ from it on
    thousands of these values (exp: 41,227 of 1.2M), so on such a machine this fails if a
    function falls back to numpy's."""
    x = VALUES if name not in ("log", "log2", "log1p") else np.abs(VALUES) - 0.5
    got = getattr(libm, name)(x.reshape(3, -1))
    assert got.shape == (3, x.size // 3) and got.dtype == np.float64
    want = np.array([_math(name, v) for v in x.tolist()])
    if name not in VECTOR:
        np.testing.assert_array_equal(got.ravel(), want)
        return
    assert _ulps(got.ravel(), want).max() <= 1.0
    edge = (x < -708.0) if name == "exp" else (x <= 0.0)
    assert edge.sum() > 100
    np.testing.assert_array_equal(got.ravel()[edge], want[edge])


def test_exp_and_log_are_the_vector_loops_and_a_scalar_is_an_element() -> None:
    """exp and log are ``vector_math``'s (they differ from the C library somewhere), and a
    scalar gets the same bits as the same value inside an array."""
    x = np.random.default_rng(5).uniform(-700.0, 700.0, 20_000)
    got = libm.exp(x)
    assert (got != np.array([math.exp(v) for v in x])).any()
    assert all(libm.exp(v) == g for v, g in zip(x[:200], got[:200], strict=True))
    y = np.abs(x) + 0.5
    got = libm.log(y)
    assert all(libm.log(v) == g for v, g in zip(y[:200], got[:200], strict=True))


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(sorted(MATH)))
def test_scalars_and_edges_as_numpy_gives_them(v, name) -> None:
    """A scalar gives numpy's scalar type, and the edges numpy's values (log(0) = -inf,
    log(-1) = nan, exp(1000) = inf), with no warning or error; equal to numpy's within an ulp."""
    got = getattr(libm, name)(v)
    assert type(got) is np.float64
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(v)
    assert got == pytest.approx(ref, rel=4e-16, nan_ok=True) or (np.isnan(got) and np.isnan(ref))
    want = _math(name, v)
    if name in VECTOR:
        assert _ulps(np.array([got]), np.array([want]))[0] <= 1.0
    else:
        assert got == want or (np.isnan(got) and np.isnan(want))


def test_power_broadcasts_with_pows_bits() -> None:
    x = np.random.default_rng(3).random((40, 5))
    y = np.array([0.3, 1.0, 2.5, 3.0, 1 / 0.7])
    got = libm.power(x, y)
    assert got.shape == (40, 5)
    want = np.array([[math.pow(a, b) for a, b in zip(row, y, strict=True)] for row in x])
    np.testing.assert_array_equal(got, want)
    assert libm.power(2.0, 3.0) == 8.0 and type(libm.power(2.0, 0.5)) is np.float64


def test_broadcast_arguments_give_no_numpy_warning():
    """Broadcast views are copied, never made writable in place (numpy's FutureWarning)."""
    import warnings

    x, y = np.linspace(0.1, 2.0, 6).reshape(2, 3), np.array([0.5, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(libm.power(x, y), np.power(x, y))
        np.testing.assert_array_equal(libm.power(2.0, y), np.power(2.0, y))


def test_the_modules_log_2pi_constants_are_libms() -> None:
    """``truncnorm``, ``updates`` and ``bound`` take log(2 pi) from ``math`` at import (no
    compiled call when ordmix is imported); ``libm.log`` gives the same bits."""
    from ordmix_core.numerics import truncnorm
    from ordmix_core.vb import bound, updates

    assert libm.log(2.0 * np.pi) == updates._LOG_2PI == bound._LOG_2PI
    assert 0.5 * libm.log(2.0 * np.pi) == truncnorm._HALF_LOG_2PI
