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


@pytest.fixture
def background(monkeypatch):
    """``start_background`` as in a new process, with kernels to compile and the switch off
    unset; the children it records, and any still running killed afterwards."""
    monkeypatch.setattr(compile_ahead, "_background", None)
    monkeypatch.setattr(compile_ahead, "_background_asked", False)
    monkeypatch.delenv(compile_ahead.NO_BACKGROUND, raising=False)
    monkeypatch.setattr(jit, "uncompiled", lambda: list(jit.KERNELS))
    monkeypatch.setattr(jit, "USE_JIT", True)
    monkeypatch.setattr(jit, "CACHE", True)
    spawned = []

    def spawn(module, entry):
        spawned.append(f"{module}.{entry}")
        child = _sleeper()
        spawned.append(child)
        return child

    monkeypatch.setattr(compile_ahead, "_spawn", spawn)
    yield spawned
    for child in spawned[1::2]:
        compile_ahead.stop(child)


def test_the_background_compile_starts_once_a_process(background):
    child = compile_ahead.start_background()
    assert background == ["ordmix_core.estimators.compile_fit.compile_every_kernel", child]
    assert compile_ahead.background_running()
    assert compile_ahead.start_background() is child  # still running: the same child
    compile_ahead.stop(child)
    assert not compile_ahead.background_running()
    assert compile_ahead.start_background() is None  # done: nothing new is started
    assert len(background) == 2


@pytest.mark.parametrize("why", ["switched off", "nothing to compile", "no jit", "no cache"])
def test_no_background_compile_when_switched_off_or_nothing_to_do(background, monkeypatch, why):
    if why == "switched off":
        monkeypatch.setenv(compile_ahead.NO_BACKGROUND, "1")
    elif why == "nothing to compile":
        monkeypatch.setattr(jit, "uncompiled", lambda: [])
    else:
        monkeypatch.setattr(jit, "USE_JIT" if why == "no jit" else "CACHE", False)
    assert compile_ahead.start_background() is None
    assert background == []


def test_a_fit_waits_for_the_background_compile(monkeypatch):
    """A fit started while the background child compiles waits for it (it then loads the
    kernels from the cache), and the dashboard's job says it is compiling meanwhile."""
    from ordmix_core.dashboard.fit_job import FitJob, FitParams
    from ordmix_core.dashboard.report import make_dataset
    from ordmix_core.data.simulate import simulate_crowd

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    monkeypatch.setattr(compile_ahead, "_background", child)
    monkeypatch.setattr(jit, "uncompiled", lambda: list(jit.KERNELS[:3]))
    crowd = simulate_crowd(n_items=30, n_annotators=6, random_state=0)
    job = FitJob(make_dataset("crowd", crowd.ratings), FitParams(n_restarts=1))
    t = time.perf_counter()
    job.run()
    assert job.error is None and job.model is not None
    assert child.poll() == 0 and time.perf_counter() - t >= 1.0
    assert job.compile_note is not None and job.compile_note.startswith("compiling (once")


@pytest.mark.slow
def test_after_the_background_compile_a_first_fit_compiles_nothing(tmp_path):
    """An empty numba cache, ``start_background``'s child run to its end; a new process then
    fits the shipped TREC demo (query granularity) and the simulated demo with no kernel
    compiled, every one loaded from the cache."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    env.pop(compile_ahead.NO_BACKGROUND, None)
    script = textwrap.dedent(
        """
        from ordmix_core.estimators import compile_ahead as c
        child = c.start_background()
        c.wait_background()
        print(child.returncode)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "0"
    demo = os.path.join(os.path.dirname(__file__), "..", "..", "demo_data")
    check = textwrap.dedent(
        f"""
        import warnings
        warnings.simplefilter("ignore")
        import pandas as pd
        from ordmix_core import OrdinalMixture
        from ordmix_core.numerics import jit
        pending = jit.uncompiled()
        trec = pd.read_csv({os.path.join(demo, "trec-rf10-ratings.csv")!r})
        OrdinalMixture(granularity="query", random_state=0).fit(trec)
        sim = pd.read_csv({os.path.join(demo, "simulated-ratings.csv")!r})
        OrdinalMixture(random_state=0).fit(sim)
        loaded = sum(bool(k.overloads) for k in jit.KERNELS)
        print(sum(bool(k.overloads) for k in pending), loaded)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, check=True
    )
    compiled, loaded = out.stdout.split()
    assert compiled == "0" and int(loaded) > 0  # every kernel the fits ran, from the cache


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["killed", "exits"])
def test_a_child_ends_with_its_parent(how):
    """No child outlives its parent: one that exits stops it (``atexit``); one that is killed
    (no ``atexit`` runs) leaves it to its watch, which sees the parent gone within a second."""
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from ordmix_core.estimators import compile_ahead as c; "
         "child = c._spawn('signal', 'pause'); print(child.pid, flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = int(parent.stdout.readline())
    time.sleep(0.5)
    assert _alive(child)
    if how == "killed":
        parent.kill()
    else:
        parent.stdin.write("exit\n")
        parent.stdin.flush()
    parent.wait(timeout=30)
    deadline = time.monotonic() + 10 * compile_ahead.WATCH_SECONDS + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)
