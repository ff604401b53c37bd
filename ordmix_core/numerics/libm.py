"""``exp``, ``log``, ``log1p``, ``expm1``, ``log2``, ``cos`` and ``power`` of arrays as the C
library (libm) computes them, whatever the CPU: the fit's elementwise math ("the same
answer on any machine").

numpy chooses a loop for these functions at import from what the CPU offers. Its AVX-512 loops
round differently from libm in the last bit (of 1.2M values: exp 41,227 differ, log 1,602,
log1p 53,364, expm1 75,416), while its AVX2 and baseline loops give libm's results, as do
numba's kernels (``kernels``), which call libm. On an AVX-512 machine the default fit of TREC
RF10 moved estimates by up to 3e-4 against an AVX2 machine and wrote other bytes. These
functions are numba loops over libm, so every x86-64 machine with the same builds gets the same
bits; scalars go through Python's ``math`` (libm too). Without numba (or with
``ORDMIX_NO_JIT=1``) they are numpy's, and the AVX-512 difference comes back.

Each takes a scalar or an array (any shape) and returns numpy's type for it (``np.float64``
or an array of float64), with numpy's values at the edges (log(0) = -inf, log(-1) = nan,
exp(1000) = inf) and no floating-point warnings. ``power(2.0, x)`` stands for exp2.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import USE_JIT, jit

_EXP, _LOG, _LOG1P, _EXPM1, _COS, _LOG2, _POW = range(7)


@jit()
def _apply(op, x, y, out):  # pragma: no cover - compiled
    """``out[i] = f(x[i])`` (``f(x[i], y[i])`` for pow) for the function ``op``: one kernel
    for all of them, so a process loads one compiled function from numba's cache, not seven
    (5 ms a load here)."""
    n = x.size
    if op == _EXP:
        for i in range(n):
            out[i] = math.exp(x[i])
    elif op == _LOG or op == _LOG2:
        for i in range(n):
            v = x[i]
            if v > 0.0:
                out[i] = math.log(v) if op == _LOG else math.log2(v)
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


def _flat(a: np.ndarray) -> np.ndarray:
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
        if a.ndim == 0:
            try:
                return np.float64(scalar(float(a)))
            except (ValueError, OverflowError):  # math's edges; the loop gives numpy's
                pass
        flat = _flat(a)
        out = np.empty_like(flat)
        _apply(op, flat, flat, out)
        return out.reshape(a.shape) if a.ndim else out[0]

    f.__name__ = fallback.__name__
    f.__doc__ = f"numpy's ``{fallback.__name__}`` with libm's results (see the module)."
    return f


exp = _unary(_EXP, math.exp, np.exp)
log = _unary(_LOG, math.log, np.log)
log1p = _unary(_LOG1P, math.log1p, np.log1p)
expm1 = _unary(_EXPM1, math.expm1, np.expm1)
cos = _unary(_COS, math.cos, np.cos)
log2 = _unary(_LOG2, math.log2, np.log2)


def power(x, y):
    """numpy's ``power`` of float64 arrays (broadcast) with libm's ``pow`` (see the module)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    # read-only broadcast views (never numpy's writable-with-a-warning ones): _flat copies them
    a = a if a.shape == shape else np.broadcast_to(a, shape)
    b = b if b.shape == shape else np.broadcast_to(b, shape)
    if not USE_JIT:
        with np.errstate(all="ignore"):
            return np.power(a, b)
    fa, fb = _flat(a), _flat(b)
    out = np.empty_like(fa)
    _apply(_POW, fa, fb, out)
    return out.reshape(a.shape) if a.ndim else out[0]
