"""numba's compile of a first run moved to other processes: the label path's kernels while a
first fit runs its race, and every kernel while the dashboard waits for its user.

On a first run numba compiles every kernel on the thread that first calls it, one at a time,
holding the interpreter's lock: the race's kernels first, then, after the race, the label
model's (about half of the compile). On a machine with a second core that core sits idle
while the race's kernels compile. ``start`` hands the label model's kernels to a child process
(``warm_up`` in a new interpreter), which compiles them into numba's on-disk cache by fitting
the label model to a small simulated crowd; ``join`` waits for it before the fit's label path,
which then loads them from the cache (``label_kernels``, around the race). Nothing is started
when those kernels are in the cache already (every run after the first), when compiled code is
off or has no on-disk cache, or on one core. The answers do not depend on it: a kernel loaded
from the cache is the one compiled in this process.

``start_background`` (the dashboard calls it when it opens) starts a child that compiles every
kernel a default fit calls (``compile_fit.compile_every_kernel``) while the user looks at the
data: a fit started before it is done waits for it (``wait_background``) rather than compile
the same kernels beside it, and one started after it loads them all from the cache.

A child never outlives its parent: it stops within ``WATCH_SECONDS`` of the parent's end, however
the parent ended (``run_child``), and a parent that exits stops it first (``atexit``). numba
writes a cache file under another name and renames it, so a stopped child leaves no half-written
kernel behind.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np

from ..labels.choose import choose_labels
from ..numerics import jit

#: the modules whose kernels the child compiles: the label model's
LABEL_MODULES = ("ordmix_core.labels.",)

#: the simulated crowd the child fits: past the label path's thresholds for running over the
#: cores (``confusion_ratings.PARALLEL_MIN_RATINGS`` ratings,
#: ``confusion_model.NEWTON_PARALLEL_MIN`` annotators), so that it compiles the kernels a real
#: crowd calls, and small enough to fit in milliseconds
WARM_RATINGS, WARM_ANNOTATORS, WARM_ITEMS, WARM_LEVELS = 12_000, 100, 2_000, 3

#: the longest ``join`` waits for the child (seconds); then the fit compiles what is left itself
JOIN_TIMEOUT = 600.0

#: what ``start_background``'s child runs: every kernel a default fit calls compiled
BACKGROUND_ENTRY = ("ordmix_core.estimators.compile_fit", "compile_every_kernel")

#: set (to anything but "" or "0") to start no background compile (``start_background``)
NO_BACKGROUND = "ORDMIX_NO_BACKGROUND_COMPILE"

#: how often a child looks whether its parent is still there (seconds; ``run_child``)
WATCH_SECONDS = 1.0

#: ``start_background``'s child (None: none started), and whether it has been called: it
#: starts at most one child a process, and looks at the cache once
_background: subprocess.Popen | None = None
_background_asked = False


def pending_label_kernels() -> list:
    """The label model's kernels still to compile in this process and not in numba's cache."""
    return [k for k in jit.uncompiled() if k.py_func.__module__.startswith(LABEL_MODULES)]


def start() -> subprocess.Popen | None:
    """The child that compiles the label model's kernels, started if any of them is still to
    compile, compiled code is on with an on-disk cache, and this process may run on more than
    one core; else None."""
    if not (jit.USE_JIT and jit.CACHE) or jit.cores() < 2:
        return None
    if not pending_label_kernels():
        return None
    return _spawn(__name__, "warm_up")


def _spawn(module: str, entry: str) -> subprocess.Popen | None:
    """A new interpreter running ``module.entry()`` (through ``run_child``: it stops when this
    process ends), with this process's numba cache, its output discarded; None when no child
    process can be started (the fit then compiles what it needs itself)."""
    env = dict(os.environ)
    if jit.CACHE_WHERE != "numba's default":  # the private folder ``jit`` chose
        env["NUMBA_CACHE_DIR"] = jit.CACHE_WHERE
    code = f"from {__name__} import run_child; run_child({module!r}, {entry!r}, {os.getpid()})"
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    atexit.register(stop, child)
    return child


def run_child(module: str, entry: str, parent: int) -> None:
    """A child's life: ``module.entry()``, while a thread looks every ``WATCH_SECONDS`` whether
    the process ``parent`` is still its parent and ends the child when it is not (the parent
    ended, say a dashboard stopped within its first minute, and the child was handed to
    another)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    getattr(importlib.import_module(module), entry)()


def start_background() -> subprocess.Popen | None:
    """The child compiling every kernel a default fit calls (``BACKGROUND_ENTRY``), started at the
    first call of this process when a kernel is still to compile, compiled code is on with an
    on-disk cache and ``NO_BACKGROUND`` is not set; the child while it runs, else None. Later
    calls start nothing: what it did not compile, the fits compile."""
    global _background, _background_asked
    if _background_asked:
        return _background if background_running() else None
    _background_asked = True
    if os.environ.get(NO_BACKGROUND, "") not in ("", "0"):
        return None
    if not (jit.USE_JIT and jit.CACHE) or not jit.uncompiled():
        return None
    _background = _spawn(*BACKGROUND_ENTRY)
    return _background


def background_running() -> bool:
    """Whether ``start_background``'s child is still compiling."""
    return _background is not None and _background.poll() is None


def wait_background() -> None:
    """Wait for ``start_background``'s child while it runs (``join``: at most
    ``JOIN_TIMEOUT`` seconds), so that a fit loads the kernels it compiles from the cache."""
    if background_running():
        join(_background)


def join(child: subprocess.Popen | None) -> None:
    """Wait for ``child`` (``start``'s) to finish, at most ``JOIN_TIMEOUT`` seconds; a child
    still running then is stopped. Whatever it did not compile, the fit compiles."""
    if child is None:
        return
    try:
        child.wait(timeout=JOIN_TIMEOUT)
    except subprocess.TimeoutExpired:
        stop(child)


def stop(child: subprocess.Popen | None) -> None:
    """Stop ``child`` (``start``'s) if it is still running."""
    if child is not None and child.poll() is None:
        child.kill()
        child.wait()


@contextlib.contextmanager
def label_kernels() -> Iterator[subprocess.Popen | None]:
    """Around the race: ``start`` on entry; on leaving, ``join`` (the label path comes next),
    or ``stop`` when the block raised (a stopped or failed fit has no label path)."""
    child = start()
    try:
        yield child
    except BaseException:
        stop(child)
        raise
    join(child)


def warm_up() -> None:
    """Fit the label model to a small simulated crowd (``WARM_*``), with the code types of a
    fit's (int32 codes, float64 values): its kernels are compiled into numba's cache."""
    rng = np.random.default_rng(0)
    ann = rng.integers(0, WARM_ANNOTATORS, WARM_RATINGS).astype(np.int32)
    inst = (np.arange(WARM_RATINGS) % WARM_ITEMS).astype(np.int32)
    level = rng.integers(0, WARM_LEVELS, WARM_RATINGS).astype(np.int32)
    values = np.arange(1.0, WARM_LEVELS + 1.0)
    choose_labels(ann, inst, level, WARM_ANNOTATORS, WARM_ITEMS, values)
