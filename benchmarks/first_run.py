"""The first ``ordmix fit`` after an install against the second: numba's cache empty, then warm.

Each round runs, per tree, ``ordmix fit`` of TREC RF10 (query granularity, the default
options) with a new empty ``NUMBA_CACHE_DIR`` (cold), then again with that cache (warm), and
prints wall and user seconds (children included: the label model's compile runs in a child
process) and cold / warm. ``--vs TREE`` runs another checkout (its root, put first on
``PYTHONPATH``) before this one in every round, so each pair of cold runs shares the load.

Usage (from the project root, ../shared beside it)::

    python benchmarks/first_run.py [--rounds 2] [--vs /path/to/other/checkout]
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


def run(tree: Path, cache: str, out: str) -> tuple[float, float]:
    """Wall and user seconds (this child and its children) of one ``ordmix fit``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-c", "from ordmix_core.cli.main import run; run()", "fit", str(TREC)]
    cmd += ["--granularity", "query", "--quiet", "--out", out]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vs", type=Path, default=None, help="another checkout, run first")
    args = ap.parse_args()
    trees = ([args.vs.resolve()] if args.vs else []) + [ROOT]
    print(f"# load average before the run: {' '.join(map(str, os.getloadavg()))}")
    for r in range(args.rounds):
        for tree in trees:
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
