"""The first ``ordmix fit`` after an install against the second: numba's cache empty, then warm.

Each round runs, per tree, ``ordmix fit`` of TREC RF10 (query granularity, the default
options) with a new empty ``NUMBA_CACHE_DIR`` (cold), then again with that cache (warm), and
prints wall and user seconds (children included: the label model's compile runs in a child
process) and cold / warm. ``--vs TREE`` runs another checkout (its root, put first on
``PYTHONPATH``) before this one in every round, so each pair of cold runs shares the load.

``--install`` measures what a new user meets instead: each tree's committed state cloned, a new
venv, the README's ``pip install -e .`` (timed; it compiles numba's kernels into the clone's
cache, ``ordmix_core/estimators/compile_install.py``), then the first ``ordmix fit`` and the
second, numba's cache left where the install put it.

Usage (from the project root, ../shared beside it)::

    python benchmarks/first_run.py [--rounds 2] [--vs /path/to/other/checkout] [--install]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREC = ROOT.parent / "shared" / "data" / "trec-rf10" / "ratings.csv"


def timed(cmd: list[str], env: dict, cwd: str) -> tuple[float, float]:
    """Wall and user seconds (the child and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, cwd=cwd, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def fit_command(python: str, out: str) -> list[str]:
    """``ordmix fit`` of TREC RF10 at query granularity, the default options, under ``python``."""
    cmd = [python, "-c", "from ordmix_core.cli.main import run; run()", "fit", str(TREC)]
    return cmd + ["--granularity", "query", "--quiet", "--out", out]


def run(tree: Path, cache: str, out: str) -> tuple[float, float]:
    """Wall and user seconds of one ``ordmix fit`` of ``tree`` with numba's cache ``cache``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(tree)}
    return timed(fit_command(sys.executable, out), env, tempfile.gettempdir())


def install_round(tree: Path, tmp: str) -> str:
    """``tree`` cloned into ``tmp``, a new venv, ``pip install -e .``, the first fit and the
    second: one line of their seconds."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    clone, venv = f"{tmp}/clone", f"{tmp}/venv"
    subprocess.run(["git", "clone", "-q", str(tree), clone], check=True)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    install = timed([f"{venv}/bin/pip", "install", "-q", "-e", "."], env, clone)
    first = timed(fit_command(f"{venv}/bin/python", f"{tmp}/first"), env, tmp)
    second = timed(fit_command(f"{venv}/bin/python", f"{tmp}/second"), env, tmp)
    return (
        f"{tree}: install {install[0]:.1f} s wall, first fit {first[0]:.1f} s wall "
        f"{first[1]:.1f} s user, second {second[0]:.1f} s wall {second[1]:.1f} s user, "
        f"first / second {first[0] / second[0]:.2f}x wall"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vs", type=Path, default=None, help="another checkout, run first")
    ap.add_argument("--install", action="store_true", help="a new venv and pip install -e .")
    args = ap.parse_args()
    trees = ([args.vs.resolve()] if args.vs else []) + [ROOT]
    print(f"# load average before the run: {' '.join(map(str, os.getloadavg()))}")
    for r in range(args.rounds):
        for tree in trees:
            if args.install:
                with tempfile.TemporaryDirectory() as tmp:
                    print(f"round {r} {install_round(tree, tmp)}", flush=True)
                continue
            with tempfile.TemporaryDirectory() as tmp:
                cold = run(tree, f"{tmp}/cache", f"{tmp}/cold")
                warm = run(tree, f"{tmp}/cache", f"{tmp}/warm")
            print(
                f"round {r} {tree}: cold {cold[0]:.1f} s wall {cold[1]:.1f} s user, "
                f"warm {warm[0]:.1f} s wall {warm[1]:.1f} s user, "
                f"cold / warm {cold[0] / warm[0]:.2f}x wall",
                flush=True,
            )


if __name__ == "__main__":
    main()
