"""``exp``, ``log``, ``log1p``, ``expm1``, ``log2``, ``cos`` and ``power`` of arrays with the same
bits whatever the CPU: the fit's elementwise math ("the same answer on any machine").

numpy chooses a loop for these functions at import from what the CPU offers. Its AVX-512 loops
round differently from libm in the last bit (of 1.2M values: exp 41,227 differ, log 1,602,
log1p 53,364, expm1 75,416), while its AVX2 and baseline loops give libm's results. On an
AVX-512 machine the default fit of TREC RF10 moved estimates by up to 3e-4 against an AVX2
machine and wrote other bytes. These functions are numba loops instead: ``exp`` and ``log``
over ``vector_math`` (fdlibm's algorithms in plain arithmetic, within 1 ulp of libm's and
the same on every CPU and C library; the loop runs on the vector units, 5-8x faster than a
call of libm a value), with the C library's values where it gives subnormals (exp below
-708) or takes an edge (log of 0, a negative, a subnormal, inf, nan); the others call the C
library (libm), so every x86-64 machine with the same builds gets the same bits. Scalars go
through the same loops for exp and log (a scalar and an array element agree to the bit),
through Python's ``math`` (libm) for the others. Without numba (or with
``ORDMIX_NO_JIT=1``) they are numpy's, and the AVX-512 difference comes back. The loops
run without the GIL: restarts side by side in threads compute at once.

Each takes a scalar or an array (any shape) and returns numpy's type for it (``np.float64``
or an array of float64), with numpy's values at the edges (log(0) = -inf, log(-1) = nan,
exp(1000) = inf) and no floating-point warnings. ``power(2.0, x)`` stands for exp2.
"""

from __future__ import annotations

import math

import numpy as np

from . import vector_math
from .jit import USE_JIT, jit

_EXP, _LOG, _LOG1P, _EXPM1, _COS, _LOG2, _POW = range(7)
_TINY = 2.2250738585072014e-308  # the smallest normal float
_HUGE = 1.7976931348623157e308  # the largest finite float


@jit(inline="always")
def exp_value(x: float) -> float:  # pragma: no cover - compiled
    """One value of ``exp`` (for compiled loops that must give ``exp``'s bits): the C
    library's where it gives a subnormal, else ``vector_math.exp``."""
    return math.exp(x) if x < vector_math.EXP_MIN else vector_math.exp(x)


@jit(inline="always")
def log_value(v: float) -> float:  # pragma: no cover - compiled
    """One value of ``log`` (for compiled loops that must give ``log``'s bits):
    ``vector_math.log`` of a normal positive float, else the C library's or numpy's edge."""
    if v >= _TINY and v <= _HUGE:
        return vector_math.log(v)
    return math.log(v) if v > 0.0 else (-np.inf if v == 0.0 else np.nan)


@jit(inline="always")
def exp_into(x, out) -> None:  # pragma: no cover - compiled
    """``out[i] = exp_value(x[i])`` over 1-D arrays in two loops: ``vector_math.exp`` on the
    vector units, then the C library's value where it gives a subnormal (``x < EXP_MIN``)."""
    for i in range(x.size):
        out[i] = vector_math.exp(x[i])
    for i in range(x.size):
        if x[i] < vector_math.EXP_MIN:
            out[i] = exp_value(x[i])


@jit(nogil=True)
def _apply(op, x, y, out):  # pragma: no cover - compiled
    """``out[i] = f(x[i])`` (``f(x[i], y[i])`` for pow) for the function ``op``: one kernel
    for all of them, so a process loads one compiled function from numba's cache, not seven
    (5 ms a load here)."""
    n = x.size
    if op == _EXP:
        exp_into(x, out)
    elif op == _LOG:
        for i in range(n):  # on the vector units
            out[i] = vector_math.log(x[i])
        for i in range(n):  # 0, negatives, subnormals, inf and nan: as log_value
            v = x[i]
            if not (v >= _TINY and v <= _HUGE):
                out[i] = log_value(v)
    elif op == _LOG2:
        for i in range(n):
            v = x[i]
            if v > 0.0:
                out[i] = math.log2(v)
            else:
                out[i] = -np.inf if v == 0.0 else np.nan
    elif op == _LOG1P:
        for i in range(n):
            v = x[i]
            out[i] = math.log1p(v) if v > -1.0 else (-np.inf if v == -1.0 else np.nan)
    elif op == _EXPM1:
        for i in range(n):
            out[i] = math.expm1(x[i])
    elif op == _COS:
        for i in range(n):
            out[i] = math.cos(x[i])
    else:
        for i in range(n):
            out[i] = math.pow(x[i], y[i])


def flat_float64(a: np.ndarray) -> np.ndarray:
    """``a`` as a writable C-ordered 1-D float64 array (a view when it is one already): the
    kernel's one signature (a read-only array would make numba compile another). A broadcast
    view (not contiguous) or a read-only array is copied, never flagged writable in place."""
    flat = np.ascontiguousarray(a, dtype=np.float64)
    if not flat.flags.writeable:
        flat = flat.copy()
    return flat.reshape(-1)


def _unary(op, scalar, fallback):
    def f(x):
        a = np.asarray(x, dtype=np.float64)
        if not USE_JIT:
            with np.errstate(all="ignore"):
                return fallback(a)
        if a.ndim == 0 and scalar is not None:
            try:
                return np.float64(scalar(float(a)))
            except (ValueError, OverflowError):  # math's edges; the loop gives numpy's
                pass
        flat = flat_float64(a)
        out = np.empty_like(flat)
        _apply(op, flat, flat, out)
        return out.reshape(a.shape) if a.ndim else out[0]

    f.__name__ = fallback.__name__
    f.__doc__ = f"numpy's ``{fallback.__name__}`` with libm's results (see the module)."
    return f


exp = _unary(_EXP, None, np.exp)  # a scalar too through the kernel: the same bits as in an array
log = _unary(_LOG, None, np.log)
log1p = _unary(_LOG1P, math.log1p, np.log1p)
expm1 = _unary(_EXPM1, math.expm1, np.expm1)
cos = _unary(_COS, math.cos, np.cos)
log2 = _unary(_LOG2, math.log2, np.log2)


def power(x, y):
    """numpy's ``power`` of float64 arrays (broadcast) with libm's ``pow`` (see the module)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    # read-only broadcast views (never numpy's writable-with-a-warning ones): flat_float64
    # copies them
    a = a if a.shape == shape else np.broadcast_to(a, shape)
    b = b if b.shape == shape else np.broadcast_to(b, shape)
    if not USE_JIT:
        with np.errstate(all="ignore"):
            return np.power(a, b)
    fa, fb = flat_float64(a), flat_float64(b)
    out = np.empty_like(fa)
    _apply(_POW, fa, fb, out)
    return out.reshape(a.shape) if a.ndim else out[0]
