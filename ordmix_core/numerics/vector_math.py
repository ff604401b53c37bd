"""``exp`` and ``log`` in plain arithmetic, so that a compiled loop that calls them runs on the
CPU's vector units.

numba turns ``math.exp`` and ``math.log`` into calls of the C library (libm), one value per
call, and a loop with a call in it is not vectorised: the sweep's first pass spent most of its
time in such calls and the truncated-normal arithmetic between them. These are fdlibm's
algorithms (``e_exp.c``, ``e_log.c``: the same reductions and polynomials) written without a
branch or a call, with a float's bits read and written through ``as_int`` and ``as_float``
(a bit cast, no conversion). LLVM vectorises a loop made of them (8 values at a time with
AVX-512, 4 with AVX2), and compiles them without fused multiply-adds (numba's default), so the
result is the same on any x86-64 CPU and with any C library. Against glibc's ``exp`` and
``log`` they are within 1 ulp (``tests/numerics/test_vector_math.py``).

Without numba they run as plain Python (the bit casts through ``struct``), for tests only.
numba caches a compiled kernel by its own file's time stamp: a kernel that inlines these keeps
the old code after this file changes, until its own file changes or the cache is cleared.
"""

from __future__ import annotations

import math
import struct

from .jit import HAVE_NUMBA, jit

if HAVE_NUMBA:  # pragma: no branch
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def as_int(typingctx, x):  # pragma: no cover - compiled
        """The bits of a float64 as an int64."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(64))

        return types.int64(types.float64), codegen

    @intrinsic
    def as_float(typingctx, x):  # pragma: no cover - compiled
        """The float64 whose bits are the int64 ``x``."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.DoubleType())

        return types.float64(types.int64), codegen

else:  # pragma: no cover

    def as_int(x: float) -> int:
        """The bits of a float64 as an int64."""
        return struct.unpack("<q", struct.pack("<d", x))[0]

    def as_float(x: int) -> float:
        """The float64 whose bits are the int64 ``x``."""
        return struct.unpack("<d", struct.pack("<q", x))[0]


_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_P1 = 1.66666666666666019037e-01
_P2 = -2.77777777770155933842e-03
_P3 = 6.61375632143793436117e-05
_P4 = -1.65339022054652515390e-06
_P5 = 4.13813679705723846039e-08
#: 1.5 * 2^52: adding it rounds a float of magnitude < 2^51 to an integer (round to nearest)
_ROUND = 6755399441055744.0
#: below this exp gives 0 (fdlibm gives subnormals down to -745; nothing here needs them)
EXP_MIN = -708.0
#: above this exp gives inf
EXP_MAX = 709.0


@jit(inline="always")
def exp(x: float) -> float:
    """``e**x`` within 1 ulp of libm's for ``EXP_MIN <= x <= EXP_MAX``; 0 below, inf above, nan
    for nan."""
    xc = min(max(x, EXP_MIN), EXP_MAX)
    kf = (xc * _INV_LN2 + _ROUND) - _ROUND  # the nearest integer to x / ln 2
    hi = xc - kf * _LN2_HI
    lo = kf * _LN2_LO
    r = hi - lo  # |r| <= ln2 / 2
    t = r * r
    c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)  # e**r in [0.7, 1.42]
    k = as_int(kf + _ROUND) - as_int(_ROUND)
    out = as_float(as_int(y) + (k << 52))  # y * 2**k, k in [-1022, 1023]
    out = 0.0 if x < EXP_MIN else out
    out = math.inf if x > EXP_MAX else out
    return x if x != x else out


_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_SQRT2 = 1.4142135623730951
_MANTISSA = 0x000FFFFFFFFFFFFF
_ONE_BITS = 0x3FF0000000000000


@jit(inline="always")
def log(x: float) -> float:
    """Natural log within 1 ulp of libm's for normal ``x > 0`` (subnormals, 0, negatives, inf
    and nan are not handled: the callers never pass them)."""
    bits = as_int(x)
    e = (bits >> 52) - 1023
    m = as_float((bits & _MANTISSA) | _ONE_BITS)  # x = m 2**e, m in [1, 2)
    big = m > _SQRT2
    m = 0.5 * m if big else m  # m in [sqrt(1/2), sqrt(2))
    k = float(e + 1 if big else e)
    f = m - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = w * (_LG2 + w * (_LG4 + w * _LG6)) + z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)
