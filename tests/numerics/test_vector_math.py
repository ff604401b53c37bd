"""``vector_math``: exp and log in plain arithmetic, within 1 ulp of the C library's, and a loop
of them compiled to vector instructions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordmix_core.numerics import vector_math
from ordmix_core.numerics.jit import HAVE_NUMBA, jit

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the bit casts are compiled by numba")


@jit()
def _exp_loop(x, out):  # pragma: no cover - compiled
    for i in range(x.size):
        out[i] = vector_math.exp(x[i])


@jit()
def _log_loop(x, out):  # pragma: no cover - compiled
    for i in range(x.size):
        out[i] = vector_math.log(x[i])


def _exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _exp_loop(np.ascontiguousarray(x, dtype=np.float64), out)
    return out


def _log(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _log_loop(np.ascontiguousarray(x, dtype=np.float64), out)
    return out


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


def test_exp_within_one_ulp_of_libm() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(-708.0, 709.0, 200_000), rng.uniform(-2.0, 2.0, 200_000),
         rng.uniform(-1e-6, 1e-6, 10_000), np.arange(-700, 700) * math.log(2.0)]
    )  # fmt: skip
    want = np.array([math.exp(v) for v in x])
    assert _ulps(_exp(x), want).max() <= 1.0


def test_log_within_one_ulp_of_libm() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [np.exp(rng.uniform(-700.0, 700.0, 200_000)), rng.uniform(0.5, 2.0, 200_000),
         1.0 + rng.uniform(-1e-8, 1e-8, 10_000), 2.0 ** np.arange(-1000, 1000),
         np.array([math.sqrt(2.0), np.nextafter(math.sqrt(2.0), 2.0), 2.2250738585072014e-308])]
    )  # fmt: skip
    want = np.array([math.log(v) for v in x])
    ulps = _ulps(_log(x), want)
    ulps[want == 0.0] = 0.0
    assert ulps.max() <= 1.0
    assert _log(np.array([1.0]))[0] == 0.0


def test_exp_at_its_ends() -> None:
    x = np.array([-np.inf, -1e308, -708.5, vector_math.EXP_MIN, 0.0, vector_math.EXP_MAX,
                  709.5, np.inf, np.nan])  # fmt: skip
    got = _exp(x)
    assert got[0] == got[1] == got[2] == 0.0
    assert got[3] == pytest.approx(math.exp(vector_math.EXP_MIN), rel=3e-16)
    assert got[4] == 1.0
    assert got[5] == pytest.approx(math.exp(vector_math.EXP_MAX), rel=3e-16)
    assert got[6] == got[7] == np.inf
    assert np.isnan(got[8])


@given(st.floats(min_value=vector_math.EXP_MIN, max_value=vector_math.EXP_MAX))
def test_exp_any_value_in_range(x: float) -> None:
    want = math.exp(x)
    got = _exp(np.array([x]))[0]
    assert abs(got - want) <= np.spacing(want)


@given(st.floats(min_value=2.2250738585072014e-308, max_value=1.7e308))
def test_log_any_normal_value(x: float) -> None:
    want = math.log(x)
    got = _log(np.array([x]))[0]
    assert abs(got - want) <= np.spacing(abs(want))


def test_a_loop_of_them_is_vectorised() -> None:
    """The point of the module: the compiled loop works on several values per instruction
    (packed doubles in xmm, ymm or zmm registers), where ``math.exp`` would be a call per
    value. (Compiled here without the on-disk cache, which keeps no assembly.)"""
    import numba

    def loop(x, out):
        for i in range(x.size):
            out[i] = vector_math.exp(x[i]) + vector_math.log(x[i])

    def libm_loop(x, out):
        for i in range(x.size):
            out[i] = math.exp(x[i]) + math.log(x[i])

    for f, packed in ((loop, True), (libm_loop, False)):
        compiled = numba.njit(error_model="numpy")(f)
        compiled(np.ones(8), np.empty(8))
        asm = compiled.inspect_asm(compiled.signatures[0])
        assert ("mulpd" in asm) is packed


#: sha256 of the bits ``exp`` and ``log`` give on the grids of ``test_the_bits_are_pinned``
EXP_BITS = "f148b760c79c76ab2beff1f9db2dddc63118040dee29a60000c114945b377225"
LOG_BITS = "aaea95929498992e95ca7b1d858281838bcf7b0d33107446d58d62f0cbe1610a"


def test_the_bits_are_pinned() -> None:
    """The fit's last bits are these functions' (the sweep, libm's exp and log): on fixed
    grids (made without a transcendental function, so the same on any CPU) they give stored
    bits. A change of a coefficient too small for the 1-ulp tests (fdlibm's P5 moved by 4e-4
    relative) changes them; a deliberate change of the algorithms updates the digests."""
    import hashlib

    x = np.linspace(-708.0, 709.0, 200_001)
    y = np.ldexp(np.linspace(1.0, 2.0, 1001)[:-1], np.arange(-1000, 1000)[:, None]).ravel()
    assert hashlib.sha256(_exp(x).tobytes()).hexdigest() == EXP_BITS
    assert hashlib.sha256(_log(y).tobytes()).hexdigest() == LOG_BITS
