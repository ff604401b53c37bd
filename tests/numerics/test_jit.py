"""jit.py: the garbage collector frozen at the interpreter's exit (``freeze_at_exit``), and how
numba's OpenMP threads wait (``WAIT_POLICY``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ordmix_core.numerics import jit

#: a handler registered before ordmix is imported runs after ordmix's (atexit is last in,
#: first out), so it sees what ``freeze_at_exit`` did
PROGRAM = """
import atexit, gc
atexit.register(lambda: print("at exit", gc.get_freeze_count() > 0))
import ordmix_core.cli.main as c
c.main(["--version"])
print("before exit", gc.get_freeze_count() > 0)
"""


@pytest.mark.skipif(not jit.HAVE_NUMBA, reason="the handler is set with numba only")
def test_the_collector_is_frozen_at_exit_and_not_before() -> None:
    """Importing ordmix changes nothing while the program runs; at exit, before the
    interpreter's last collection (which would tear down numba's objects, 0.3-0.5 s after a
    fit of TREC RF10), the collector is frozen, and earlier handlers still run."""
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[-2:] == ["before exit False", "at exit True"]


#: a parallel kernel, so that numba loads its OpenMP layer, which prints its settings
#: (``OMP_DISPLAY_ENV``) as it starts
PARALLEL = """
import numpy as np
from ordmix_core.numerics import jit
@jit.numba.njit(parallel=True)
def total(x):
    s = 0.0
    for i in jit.prange(x.size):
        s += x[i]
    return s
total(np.ones(1000))
print(jit.numba.threading_layer())
"""


@pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba's threads only")
@pytest.mark.parametrize("chosen", [None, "ACTIVE"])
def test_numbas_openmp_threads_sleep_between_passes_unless_the_user_chose(chosen) -> None:
    """Importing ordmix sets the wait policy before numba loads libgomp (which reads it once):
    its threads sleep rather than spin between passes; a user's own choice is kept."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    if chosen is not None:
        env["OMP_WAIT_POLICY"] = chosen
    run = subprocess.run(
        [sys.executable, "-c", PARALLEL], capture_output=True, text=True, check=True, env=env
    )
    if run.stdout.split()[-1] != "omp":
        pytest.skip("numba's threading layer here is not OpenMP")
    want = jit.WAIT_POLICY if chosen is None else chosen
    assert f"OMP_WAIT_POLICY = '{want}'" in run.stderr
    # unset, libgomp says PASSIVE too but spins 300,000 times first: asleep means no spinning
    asleep = "GOMP_SPINCOUNT = '0'" in run.stderr
    assert asleep == (want == "PASSIVE"), run.stderr
