"""jit.py: the garbage collector frozen at the interpreter's exit (``freeze_at_exit``)."""

from __future__ import annotations

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
