"""The marker of tests that compare compiled code's bits with numpy's formulas."""

import pytest

from ordmix_core.numerics import jit

#: compiled code calls libm as ``numerics.libm`` does when compiled; without compiled code
#: (ORDMIX_NO_JIT=1) libm is numpy's, which may round differently (AVX-512), so there is no
#: second implementation to compare bits with
compiled_libm = pytest.mark.skipif(not jit.USE_JIT, reason="libm is numpy's without numba")
