"""compile_ahead: the label model's kernels compiled in a child process around a first race."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from ordmix_core.estimators import compile_ahead
from ordmix_core.numerics import jit


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_only_the_label_models_kernels_are_pending():
    modules = {k.py_func.__module__ for k in jit.KERNELS}
    assert any(m.startswith("ordmix_core.labels.") for m in modules)
    assert any(not m.startswith("ordmix_core.labels.") for m in modules)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jit, "uncompiled", lambda: list(jit.KERNELS))
        pending = compile_ahead.pending_label_kernels()
    assert pending
    assert all(k.py_func.__module__.startswith("ordmix_core.labels.") for k in pending)
    assert len(pending) == sum(
        k.py_func.__module__.startswith("ordmix_core.labels.") for k in jit.KERNELS
    )


def test_nothing_starts_when_the_kernels_are_compiled_or_compiled_code_is_off(monkeypatch):
    monkeypatch.setattr(jit, "uncompiled", lambda: [])
    assert compile_ahead.start() is None
    monkeypatch.setattr(jit, "uncompiled", lambda: list(jit.KERNELS))
    monkeypatch.setattr(jit, "USE_JIT", False)
    assert compile_ahead.start() is None
    monkeypatch.setattr(jit, "USE_JIT", True)
    monkeypatch.setattr(jit, "CACHE", False)  # nowhere to leave them for the fit
    assert compile_ahead.start() is None


def test_a_failed_race_stops_the_child_and_a_finished_one_waits_for_it(monkeypatch):
    child = _sleeper()
    monkeypatch.setattr(compile_ahead, "start", lambda: child)
    t = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), compile_ahead.label_kernels():
        raise KeyboardInterrupt
    assert child.poll() is not None
    assert time.perf_counter() - t < 30

    quick = subprocess.Popen([sys.executable, "-c", "pass"])
    monkeypatch.setattr(compile_ahead, "start", lambda: quick)
    with compile_ahead.label_kernels() as got:
        assert got is quick
    assert quick.returncode == 0


def test_a_child_past_the_timeout_is_stopped(monkeypatch):
    monkeypatch.setattr(compile_ahead, "JOIN_TIMEOUT", 0.2)
    child = _sleeper()
    compile_ahead.join(child)
    assert child.poll() is not None
    compile_ahead.join(None)
    compile_ahead.stop(None)


@pytest.mark.slow
def test_the_child_leaves_every_label_kernel_in_an_empty_cache(tmp_path):
    """A first run: an empty numba cache, the child started and joined; a new process then
    finds every label-model kernel in the cache."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    script = textwrap.dedent(
        """
        from ordmix_core.estimators import compile_ahead as c
        before = len(c.pending_label_kernels())
        child = c.start()
        c.join(child)
        print(before, child.returncode)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    before, rc = out.stdout.split()
    assert int(before) > 0 and rc == "0"
    check = "from ordmix_core.estimators import compile_ahead as c; "
    check += "print(len(c.pending_label_kernels()))"
    out = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "0"


def test_nothing_starts_on_one_core(monkeypatch):
    monkeypatch.setattr(jit, "uncompiled", lambda: list(jit.KERNELS))
    monkeypatch.setattr(jit, "cores", lambda: 1)
    assert compile_ahead.start() is None
