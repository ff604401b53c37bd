"""``gamma_functions``: digamma and gammaln on the vector units, close to the true values
(mpmath) wherever the fit takes them, scipy's outside their range, and a loop of them packed."""

from __future__ import annotations

import hashlib
import math
import re

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special

from ordmix_core.numerics import gamma_functions as gf
from ordmix_core.numerics.jit import HAVE_NUMBA, USE_JIT

compiled = pytest.mark.skipif(not USE_JIT, reason="without numba these are scipy's")


def _truth(f, x: np.ndarray) -> np.ndarray:
    with mpmath.workdps(40):
        return np.array([float(f(mpmath.mpf(float(v)))) for v in x])


def _log_uniform(lo: float, hi: float, n: int, seed: int) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).uniform(np.log(lo), np.log(hi), n))


#: (lo, hi, digamma's largest error in ulp, gammaln's) away from the functions' zeros
ULP_BANDS = [(1e-300, 1e-3, 8, 8), (1e-3, 0.3, 8, 32), (3.0, 8.0, 8, 64), (8.0, 1e300, 2, 2)]


@pytest.mark.parametrize(("lo", "hi", "dig_ulp", "lgam_ulp"), ULP_BANDS)
def test_within_a_few_ulp_away_from_the_zeros(lo, hi, dig_ulp, lgam_ulp) -> None:
    x = _log_uniform(lo, hi, 1500, seed=int(np.log10(lo) + 400))
    cases = ((gf.digamma, mpmath.digamma, dig_ulp), (gf.gammaln, mpmath.loggamma, lgam_ulp))
    for f, truth, bound in cases:
        want = _truth(truth, x)
        ulps = np.abs(f(x) - want) / np.spacing(np.abs(want))
        assert ulps.max() <= bound, (f.__name__, lo, hi, ulps.max())


def test_within_1e_14_absolute_near_the_zeros() -> None:
    """Where digamma (1.4616...) and gammaln (1 and 2) cross zero the shifted sums cancel:
    the error is absolute there (scipy's is ~1e-17), far below what the fit resolves."""
    rng = np.random.default_rng(3)
    near = rng.uniform(-1e-4, 1e-4, (3, 300)) + [[1.4616321449683622], [1.0], [2.0]]
    x = np.concatenate([rng.uniform(0.3, 3.0, 3000), near.ravel()])
    assert np.abs(gf.digamma(x) - _truth(mpmath.digamma, x)).max() < 5e-15
    assert np.abs(gf.gammaln(x) - _truth(mpmath.loggamma, x)).max() < 1e-14


@given(st.floats(min_value=gf.LOWEST, max_value=gf.HIGHEST))
def test_close_to_scipy_anywhere_in_range(x: float) -> None:
    for f, ref in ((gf.digamma, special.digamma), (gf.gammaln, special.gammaln)):
        got, want = float(f(np.array([x]))[0]), float(ref(x))
        assert abs(got - want) <= 1e-14 + 64 * np.spacing(abs(want)), (f.__name__, x, got, want)


def test_outside_the_range_the_values_are_scipys() -> None:
    x = np.array(
        [0.0, -0.0, -1.0, -0.5, -2.5, 1e-310, 5e-324, 2e300, 1e308, np.inf, -np.inf, np.nan]
    )
    for f, ref in ((gf.digamma, special.digamma), (gf.gammaln, special.gammaln)):
        np.testing.assert_array_equal(f(x), ref(x))
        # mixed in among values inside the range, at any position
        mixed = np.concatenate([np.linspace(0.5, 50.0, 7), x, np.linspace(0.5, 50.0, 7)])
        np.testing.assert_array_equal(f(mixed)[7:-7], ref(x))


@compiled
def test_shapes_scalars_and_read_only_inputs() -> None:
    x = np.linspace(0.1, 40.0, 24).reshape(2, 3, 4)
    for f in (gf.digamma, gf.gammaln):
        out = f(x)
        assert out.shape == x.shape and out.dtype == np.float64
        assert isinstance(f(3.0), np.float64) and f(3.0) == f(np.array([3.0]))[0]
        frozen = x.copy()
        frozen.flags.writeable = False
        np.testing.assert_array_equal(f(frozen), out)
        np.testing.assert_array_equal(f(x[:, ::2]), out[:, ::2])  # a strided view


def _libm_calls(asm: str) -> set[str]:
    return set(re.findall(r"movabsq\s+\$(log|exp|lgamma|tgamma)\b", asm))


@compiled
def test_the_loop_is_vectorised() -> None:
    """The element loop calls no libm function (its ``log`` is ``vector_math``'s) and runs on
    packed doubles. Compiled here without the on-disk cache, which keeps no assembly; a loop
    with ``math.log`` in it shows what the check would see."""
    import numba

    def with_libm(x, out):
        for i in range(x.size):
            out[i] = math.log(x[i] + 8.0) - 1.0 / (x[i] + 1.0)

    control = numba.njit(error_model="numpy")(with_libm)
    control(np.ones(8), np.empty(8))
    assert _libm_calls(control.inspect_asm(control.signatures[0])) == {"log"}
    loop = numba.njit(error_model="numpy", nogil=True)(gf._apply.py_func)
    for which in (0, 1):
        loop(which, np.ones(8), np.empty(8))
    for sig in loop.signatures:
        asm = loop.inspect_asm(sig)
        assert not _libm_calls(asm)
        assert "divpd" in asm and "mulpd" in asm


#: sha256 of the values on a fixed grid (made without a transcendental function)
DIGAMMA_BITS = "c4c4158ba0a5ed5a760c624be02fa0d7d4afea7c9050591747fe796ad6799045"
GAMMALN_BITS = "63dafaf1eccb5935a3684bd81e82732eb08c89cf2b59b0401717113123459e13"


@pytest.mark.skipif(not HAVE_NUMBA or not USE_JIT, reason="the compiled loop's bits")
def test_the_bits_are_pinned() -> None:
    """The fit's last bits depend on these (every q(tau) and q(delta)): a coefficient changed
    by a little (too little for the ulp bounds) changes the digests."""
    x = np.ldexp(np.linspace(1.0, 2.0, 1001)[:-1], np.arange(-60, 60)[:, None]).ravel()
    assert hashlib.sha256(gf.digamma(x).tobytes()).hexdigest() == DIGAMMA_BITS
    assert hashlib.sha256(gf.gammaln(x).tobytes()).hexdigest() == GAMMALN_BITS
