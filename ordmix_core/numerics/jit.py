"""numba, if it is there: ``njit`` (or a stand-in), ``prange``, whether to use compiled code
(``USE_JIT``) and the on-disk cache of compiled code (``CACHE``, ``jit``).

One home for how ordmix compiles: the sweep's kernels (``kernels``) and the coding of big ID
columns (``id_hash``) both decorate with ``jit``. Without numba the decorated functions run as
plain Python.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import glob
import os
import stat
import tempfile
import threading
import types
from collections.abc import Callable, Iterator

#: how numba's OpenMP threads wait between parallel passes, unless the user chose
#: (``OMP_WAIT_POLICY``): asleep, not spinning. A sweep is three short parallel passes, and a
#: spinning thread takes the core from the other restart's thread, or from another process:
#: TREC RF10's default fit with another process busy on one of the two cores, 6.10-6.16 s
#: spinning against 5.50-5.61 s asleep (CPU 7.5 s against 6.5 s); on a quiet machine the same
#: within the runs' spread (``docs/benchmarks.md``). The results do not depend on it. Set
#: before numba loads libgomp, which reads it once
WAIT_POLICY = "PASSIVE"
os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)

try:  # pragma: no cover - exercised by the environment, not by a test
    import numba
    from numba import njit, prange

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    numba = None
    HAVE_NUMBA = False
    prange = range

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        """Stand-in for ``numba.njit``: returns the function unchanged."""
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


#: use compiled code (switch off with ORDMIX_NO_JIT=1): ``id_hash`` reads it here; the sweep
#: reads ``kernels.USE_JIT``, this value at import, which tests may assign
USE_JIT: bool = HAVE_NUMBA and os.environ.get("ORDMIX_NO_JIT", "") in ("", "0")


def _probe(x: float) -> float:  # pragma: no cover - never called, only decorated
    return x


def _cache_usable() -> bool:
    """Whether numba finds a folder it can write for the compiled kernels of every folder of
    the package (numba caches a kernel next to its source file, else in the user's cache): a
    probe is compiled as if it were in each folder's ``__init__.py``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for init in sorted(glob.glob(os.path.join(package, "*", "__init__.py"))):
        code = _probe.__code__.replace(co_filename=init)
        try:  # raises RuntimeError when no cache location is writable
            njit(cache=True)(types.FunctionType(code, {}))
        except RuntimeError:
            return False
    return True


def _private_cache_folder() -> str | None:
    """``ordmix-numba-<uid>`` in the temp folder, if it is (or can be made) this user's own
    and writable by no one else: kernels cached there are loaded as code."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid is None:
        return None
    path = os.path.join(tempfile.gettempdir(), f"ordmix-numba-{uid}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        return None
    return path


def _choose_cache() -> tuple[bool, str]:
    """numba's on-disk cache where it works (next to this file, or numba's user cache), else a
    private folder in the temp folder (as ``NUMBA_CACHE_DIR``), else none: the kernels are then
    compiled in memory in every process. Importing ordmix (and ``ordmix --version``) must not
    fail on a read-only install without a home folder."""
    if not HAVE_NUMBA:
        return False, "numba not installed"
    if _cache_usable():
        return True, "numba's default"
    before = numba.config.CACHE_DIR
    folder = _private_cache_folder()
    if folder is not None:
        numba.config.CACHE_DIR = folder
        if _cache_usable():
            return True, folder
    numba.config.CACHE_DIR = before
    return False, "none writable: compiled in memory per process"


#: whether the compiled kernels are cached on disk, and where
CACHE, CACHE_WHERE = _choose_cache()


def freeze_at_exit() -> None:
    """Freeze the garbage collector when the interpreter exits (an ``atexit`` handler, set once
    numba is imported). Tearing down what numba and LLVM made (its typing and target
    registries, the loaded kernels) took 0.3-0.5 s of every process that fitted TREC RF10,
    0.04-0.06 s frozen (``docs/benchmarks.md``). Handlers run before the interpreter's last
    collection, so objects left in reference cycles at exit are no longer collected and
    their ``__del__`` is not called; Python never promised it for objects alive at exit.
    Handlers registered before ordmix was imported still run, after this one; objects
    outside cycles are freed as always."""
    gc.freeze()


if HAVE_NUMBA:  # pragma: no branch
    atexit.register(freeze_at_exit)


def cores() -> int:
    """The cores this process may run on (``os.sched_getaffinity``; the machine's where that
    is not known): how many threads of restarts, or processes compiling, can run at once."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


#: every kernel ``jit`` made that numba compiles on its own (an ``inline="always"`` function is
#: compiled into its callers): what ``uncompiled`` and ``compile_progress`` look at
KERNELS: list = []

#: seconds a first run spends compiling when none of ``KERNELS`` is in the cache, for the
#: "about N s" of ``compile_note`` (scaled by the share of them still to compile): the first
#: ``ordmix fit`` of TREC RF10 (query granularity) with numba's cache empty, less a warm one,
#: on the 2-core machine of ``docs/benchmarks.md``
COMPILE_SECONDS = 40.0


def jit(**flags):
    """``numba.njit`` with the on-disk cache when there is one (``CACHE``) and numpy's error
    model: a division by zero gives inf or nan, as in numpy, rather than a check before every
    division for Python's ZeroDivisionError (2% of a TREC sweep's first pass). The kernel
    joins ``KERNELS`` unless it is inlined.

    numba keys its cache on a kernel's bytecode and its file's time stamp, not on these flags:
    a change of flags reaches a cached kernel only when its source file changes."""
    flags.setdefault("error_model", "numpy")
    make = njit(cache=CACHE, **flags)
    if not HAVE_NUMBA or flags.get("inline") == "always":
        return make

    def register(fn):
        kernel = make(fn)
        KERNELS.append(kernel)
        return kernel

    return register


def _in_cache(kernel) -> bool:
    """Whether numba's on-disk cache holds code of ``kernel`` for its source as it is now
    (numba's index of the kernel, which it empties when the source file changed)."""
    try:
        return bool(kernel._cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 - no on-disk cache (numba's NullCache), or another numba
        return False


def uncompiled() -> list:
    """The kernels (of the modules imported so far) whose first call in this process will
    compile them: neither compiled here yet nor in the on-disk cache. Empty without
    compiled code (``USE_JIT`` False)."""
    if not USE_JIT:
        return []
    return [k for k in KERNELS if not k.overloads and not _in_cache(k)]


def compile_seconds(n_pending: int) -> int:
    """About how long ``n_pending`` of ``KERNELS`` take to compile: ``COMPILE_SECONDS`` times
    their share, to 5 s."""
    share = n_pending / max(len(KERNELS), 1)
    return max(5, 5 * round(COMPILE_SECONDS * share / 5))


def compile_note(n_pending: int) -> str:
    """What a front end says while ``n_pending`` kernels are to compile."""
    return f"compiling (once, about {compile_seconds(n_pending)} s)"


@contextlib.contextmanager
def compile_progress(report: Callable[[int, int, bool], None]) -> Iterator[list]:
    """While the block runs, ``report(done, total, compiling)`` at the start and the end of
    each compile of a kernel that was ``uncompiled()`` on entry (``total`` of them; with
    ``compiling`` True from a start to its end). Yields that list; nothing is reported
    when it is empty. numba compiles on whichever thread first calls a kernel, one at a time,
    so the report may come from a restart's thread."""
    pending = uncompiled()
    if not pending:
        yield pending
        return
    from numba.core import event

    waiting = {id(k) for k in pending}
    done = [0]
    lock = threading.Lock()

    class Listener(event.Listener):
        def on_start(self, ev):
            if id(ev.data["dispatcher"]) in waiting:
                report(done[0], len(pending), True)

        def on_end(self, ev):
            key = id(ev.data["dispatcher"])
            with lock:
                if key not in waiting:
                    return
                waiting.discard(key)
                done[0] += 1
            report(done[0], len(pending), False)

    with event.install_listener("numba:compile", Listener()):
        yield pending
