"""What a user runs, timed as whole processes: ``ordmix fit`` against crowd-kit's Dawid-Skene.

    python benchmarks/bench_vs_crowdkit.py [--pairs 3] [--peer-python /tmp/ckvenv/bin/python]

crowd-kit 1.4.2 lives in its own venv, never in the project's (``python -m venv /tmp/ckvenv &&
/tmp/ckvenv/bin/pip install crowd-kit==1.4.2``). Each case runs the two commands in turn, ours
then the peer, ``--pairs`` times (at least 3); each run is a fresh process timed from its start
to its exit (imports, reading the CSV, the fit, writing the result, the interpreter's exit),
and the ratio is taken pair by pair, so that a machine that slows down during the call moves
both runs of a pair. Printed: the median of each side, the median of the pairs' ratios (the
figure the targets use) and their spread; for TREC also the sweeps of the fit (every restart
and stage, from its ``trace.csv``).

- ours: ``ordmix fit FILE --out DIR`` with the default options (TREC at ``--granularity
  query``), the ``ordmix`` found on the PATH (``--ordmix`` to name another command);
- the peer: ``PEER`` below, run by ``--peer-python``: reads the same CSV with pandas, runs
  ``DawidSkene(n_iter=100, tol=0).fit_predict_proba`` and writes the result with ``to_csv``.

Cases and targets (the median ratio ours / peer): TREC RF10 <= 0.8, adult-content2 <= 1.0, a
simulated crowd of 1,000,000 ratings (``synth.synth_frame(1_000_000, seed=0)``, written once
to ``--sim-csv``) <= 1.0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")

PEER = """
import sys, pandas as pd
from crowdkit.aggregation import DawidSkene
df = pd.read_csv(sys.argv[1], dtype={"annotator": str, "instance": str})
df = df.rename(columns={"annotator": "worker", "instance": "task", "rating": "label"})
proba = DawidSkene(n_iter=100, tol=0).fit_predict_proba(df[["worker", "task", "label"]])
proba.to_csv(sys.argv[2])
"""

#: (name, ratings file, extra options of ``ordmix fit``, target of the median ratio)
CASES = {
    "trec": ("TREC RF10", os.path.join(DATA, "trec-rf10", "ratings.csv"),
             ["--granularity", "query"], 0.8),
    "adult": ("adult-content2", os.path.join(DATA, "adult-content2", "ratings.csv"), [], 1.0),
    "1m": ("simulated crowd, 1M ratings", None, [], 1.0),
}  # fmt: skip


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one process, from its start to its exit."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def sweeps(out: str) -> int:
    """Sweeps of a fit, every restart and stage: the rows of its ``trace.csv``."""
    with open(os.path.join(out, "trace.csv")) as f:
        return sum(1 for _ in f) - 1


def case(key: str, path: str, ordmix: list[str], peer: list[str], pairs: int) -> None:
    name, _, extra, target = CASES[key]
    work = tempfile.mkdtemp(prefix="bench-vs-crowdkit-")
    ours_cmd = [*ordmix, "fit", path, "--out", os.path.join(work, "fit"), "--quiet", *extra]
    peer_cmd = [*peer, "-c", PEER, path, os.path.join(work, "proba.csv")]
    a, b, peak, n_sweeps = [], [], [], set()
    for _ in range(pairs):
        shutil.rmtree(os.path.join(work, "fit"), ignore_errors=True)
        ta, pa = run(ours_cmd)
        n_sweeps.add(sweeps(os.path.join(work, "fit")))
        tb, _ = run(peer_cmd)
        a.append(ta)
        b.append(tb)
        peak.append(pa)
    shutil.rmtree(work, ignore_errors=True)
    ratios = sorted(x / y for x, y in zip(a, b, strict=True))
    print(f"{name} ({path})")
    print(f"  ordmix fit FILE --out DIR {' '.join(extra)}: median {statistics.median(a):.2f} s "
          f"({fmt(a)}), peak {max(peak):.0f} MB, sweeps "
          f"{'/'.join(str(s) for s in sorted(n_sweeps))}")  # fmt: skip
    print(
        f"  crowd-kit: DawidSkene(n_iter=100, tol=0): median {statistics.median(b):.2f} s "
        f"({fmt(b)})"
    )
    print(
        f"  ratio, median of {pairs} pairs: {statistics.median(ratios):.3f} "
        f"({fmt(ratios)}; target <= {target})",
        flush=True,
    )


def fmt(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--peer-python", default="/tmp/ckvenv/bin/python")
    ap.add_argument("--ordmix", default="ordmix", help="the command that runs ordmix")
    ap.add_argument("--cases", default="trec,adult,1m", help="comma-separated: trec, adult, 1m")
    ap.add_argument("--sim-csv", default="/tmp/ordmix_sim_1m.csv")
    args = ap.parse_args()
    if args.pairs < 3:
        ap.error("--pairs: at least 3 (the figure is a median of pairs)")
    with open("/proc/loadavg") as f:
        print(f"# load average before the run: {' '.join(f.read().split()[:3])}, "
              f"{os.cpu_count()} cores")  # fmt: skip
    for key in args.cases.split(","):
        path = CASES[key][1]
        if key == "1m":
            path = args.sim_csv
            if not os.path.exists(path):
                sys.path.insert(0, HERE)
                from synth import synth_frame

                synth_frame(1_000_000, seed=0).to_csv(path, index=False)
        case(key, path, args.ordmix.split(), [args.peer_python], args.pairs)


if __name__ == "__main__":
    main()
