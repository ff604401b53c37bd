"""Whole-process timings against crowd-kit's Dawid-Skene (the ratios the speed targets use).

Run with the interpreter of a venv that has crowd-kit, numba and ordmix (see docs/benchmarks.md)::

    /tmp/ckvenv/bin/python benchmarks/bench_vs_crowdkit.py [--repeats 3]

Every measurement is one fresh subprocess (interpreter start, imports, CSV load and fit), timed
from outside, with ordmix's bytecode written first (``compile_ordmix``: crowd-kit's is, by pip);
the minimum over ``--repeats`` alternating runs is reported (the machine may be
shared), and the ratio of each run of ours to the crowd-kit run after it, with their median. Pairs:

1. TREC RF10 (``../shared/data/trec-rf10/ratings.csv``): ``OrdinalMixture(random_state=0)``,
   the true default with the command line's seed (instance granularity, the default model,
   restarts, schedule, max_iter, tol, tol_estimate: whatever model.py has at the time) vs
   crowd-kit ``DawidSkene(n_iter=100)``.
   Target ratio <= 1.0 (earlier budgets: 1.5, then 0.6). The sweeps of every restart and
   stage are printed (stable across machines, unlike the times).
2. A simulated crowd of 1,000,000 ratings written to a CSV (``synth.py``): 50 iterations of one
   restart (``n_restarts=1, nospam_warmup=False, max_iter=50, tol=0, accelerate=False,
   spam=True``: 50 plain sweeps, no SQUAREM proposals, no spam decision, whose evidence costs
   about 4 s more at this size) vs crowd-kit
   ``DawidSkene(n_iter=50, tol=-1)`` (with tol=0 it stops after ~12 iterations when the loss
   stops changing; tol=-1 makes it run all 50). Target ratio <= 0.25.
3. The same 1M crowd: the default fit at query granularity (``OrdinalMixture('query',
   random_state=0)``, every restart and stage) vs crowd-kit ``DawidSkene(n_iter=100)`` (which
   stops by its own tol after about a dozen iterations). Target ratio <= 1.0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREC = os.path.join(HERE, "..", "..", "shared", "data", "trec-rf10", "ratings.csv")

OURS = """
import sys, pandas as pd
from ordmix_core import OrdinalMixture
df = pd.read_csv(sys.argv[1], dtype={{"annotator": str, "instance": str, "query": str}})
m = OrdinalMixture({kwargs}).fit(df)
r = m.restarts_
stages = [c for c in ("warmup_iter", "uniform_iter", "n_iter") if c in r]
print(m.n_iter_, int(r[stages].to_numpy().sum()))
"""

THEIRS = """
import sys, pandas as pd
from crowdkit.aggregation import DawidSkene
df = pd.read_csv(sys.argv[1], dtype={{"annotator": str, "instance": str, "query": str}})
df = df.rename(columns={{"annotator": "worker", "instance": "task", "rating": "label"}})
ds = DawidSkene({kwargs}).fit(df[["worker", "task", "label"]])
print(len(ds.loss_history_))
"""


def timed(code: str, path: str) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, path], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - t, out.stdout.strip()


def pair(name: str, path: str, ours: str, theirs: str, repeats: int, target: float) -> None:
    a, b = [], []
    for _ in range(repeats):
        ta, out_a = timed(OURS.format(kwargs=ours), path)
        tb, out_b = timed(THEIRS.format(kwargs=theirs), path)
        a.append(ta)
        b.append(tb)
    ratio = min(a) / min(b)
    print(f"{name}")
    print(f"  ordmix  OrdinalMixture({ours}): {min(a):7.2f} s  (runs {fmt(a)}; "
          f"sweeps: chosen restart, all restarts and stages = {out_a})")  # fmt: skip
    print(f"  crowdkit DawidSkene({theirs}): {min(b):7.2f} s  (runs {fmt(b)}; iterations {out_b})")
    print(f"  ratio ordmix / crowd-kit = {ratio:.3f}  (target <= {target})")
    # each run of ours beside the crowd-kit run right after it: how much the ratio of a
    # single pair of runs moves with the machine's load
    pairs = sorted(x / y for x, y in zip(a, b, strict=True))
    print(f"  run by run: {fmt(pairs)}; median {pairs[len(pairs) // 2]:.2f}", flush=True)


def compile_ordmix() -> None:
    """Write ordmix's bytecode before timing. crowd-kit is imported from the bytecode pip wrote
    when it installed it; ordmix, installed editable, from its source tree, where a first import
    writes the bytecode, unless PYTHONDONTWRITEBYTECODE is set (as on the machines these
    figures come from): every run would then compile ordmix's 50 modules again (0.05 s)."""
    code = "import compileall, os, ordmix_core as m; compileall.compile_dir(os.path.dirname(m.__file__), quiet=1)"  # noqa: E501
    subprocess.run([sys.executable, "-c", code], check=True)


def fmt(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trec", default=TREC)
    ap.add_argument("--sim-csv", default="/tmp/ordmix_sim_1m.csv")
    ap.add_argument("--skip-trec", action="store_true")
    ap.add_argument("--skip-sim", action="store_true")
    ap.add_argument("--skip-sim-default", action="store_true", help="skip the 1M default fit")
    args = ap.parse_args()
    with open("/proc/loadavg") as f:
        print(f"# load average before the run: {' '.join(f.read().split()[:3])} (2 cores)")
    compile_ordmix()
    if not args.skip_trec:
        pair("TREC RF10, default fit vs DS 100 iterations", args.trec, "random_state=0",
             "n_iter=100", args.repeats, 1.0)  # fmt: skip
    if args.skip_sim:
        return
    if not os.path.exists(args.sim_csv):
        sys.path.insert(0, HERE)
        from synth import synth_frame

        synth_frame(1_000_000, seed=0).to_csv(args.sim_csv, index=False)
    if not args.skip_sim_default:
        pair("simulated 1M ratings, default fit (query granularity) vs DS 100 iterations",
             args.sim_csv, "'query', random_state=0", "n_iter=100", args.repeats, 1.0)  # fmt: skip
    pair("simulated 1M ratings, 50 iterations of one restart vs DS 50 iterations", args.sim_csv,
         "'query', n_restarts=1, nospam_warmup=False, max_iter=50, tol=0.0, accelerate=False, "
         "spam=True",
         "n_iter=50, tol=-1.0",
         args.repeats, 0.25)  # fmt: skip


if __name__ == "__main__":
    main()
