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


KERNEL_MODULE = """
from ordmix_core.numerics.jit import jit

@jit(nogil=True)
def twice(x):
    return 2.0 * x

@jit(inline="always")
def inlined(x):
    return x + 1.0
"""

FIRST_CALLS = """
import sys
sys.path.insert(0, sys.argv[1])
import kernel_module
from ordmix_core.numerics import jit
mine = [k for k in jit.KERNELS if k.py_func.__module__ == "kernel_module"]
reports = []
with jit.compile_progress(lambda *r: reports.append(r)) as pending:
    kernel_module.twice(1.5)
    kernel_module.twice(2.5)
n = len(pending)
print(len(mine), kernel_module.twice in pending, reports == [(0, n, True), (1, n, False)])
"""


@pytest.mark.skipif(not jit.USE_JIT, reason="compiled code only")
def test_a_kernel_is_reported_while_it_compiles_and_not_once_it_is_cached(tmp_path) -> None:
    """``compile_progress`` reports the start and the end of the compile of a kernel that
    neither this process nor numba's cache has compiled, once, against every kernel then
    waiting; the next process loads it from the cache and hears nothing of it (the other
    kernels it never calls stay waiting). An inlined function is not a kernel of its own."""
    (tmp_path / "kernel_module.py").write_text(KERNEL_MODULE)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", FIRST_CALLS, str(tmp_path)],
            capture_output=True, text=True, check=True, env=env,
        ).stdout.strip()
        for _ in range(2)
    ]  # fmt: skip
    assert runs == ["1 True True", "1 False False"]


def test_the_compile_note_scales_the_first_runs_seconds_by_the_kernels_left(monkeypatch):
    """All of ``KERNELS`` to compile: ``COMPILE_SECONDS``; a share of them, that share, to 5 s
    and at least 5 s."""
    monkeypatch.setattr(jit, "KERNELS", [object()] * 8)
    assert jit.compile_note(8) == f"compiling (once, about {round(jit.COMPILE_SECONDS)} s)"
    assert jit.compile_seconds(4) == 5 * round(jit.COMPILE_SECONDS / 2 / 5)
    assert jit.compile_seconds(0) == 5


def test_nothing_compiles_without_compiled_code(monkeypatch):
    """``ORDMIX_NO_JIT`` (``USE_JIT`` False): no kernel is waiting to compile, and the
    progress reports nothing."""
    monkeypatch.setattr(jit, "USE_JIT", False)
    reports = []
    with jit.compile_progress(lambda *r: reports.append(r)) as pending:
        pass
    assert jit.uncompiled() == [] and pending == [] and reports == []


def test_the_cores_are_the_affinity_or_else_the_machines(monkeypatch):
    """``cores``: the cores this process may run on; the machine's count where the platform
    has no affinity call (macOS), never 0."""
    import os

    assert jit.cores() == len(os.sched_getaffinity(0))
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert jit.cores() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert jit.cores() == 1
