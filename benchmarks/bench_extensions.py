"""Cost of the model's extensions: per-sweep time of the fused sweep, and sweeps per fit.

    python benchmarks/bench_extensions.py [--ratings PATH] [--sweeps 40] [--fits]
    python benchmarks/bench_extensions.py --crowdkit --ck-python /tmp/ckvenv/bin/python

1. Per sweep: ``phases.sweep_fused`` on TREC RF10 (instance granularity) from the same
   warmed-up state, for the paper's model, the bias alone, the default (bias + learned global
   spam distribution) and bias + per-annotator spam distributions: minimum over ``--sweeps``
   sweeps after two warm-up sweeps (JIT), in CPU time of the process (the sweep runs on one
   thread below ``kernels.PARALLEL_MIN_RATINGS``, so other load does not count). Target:
   the bias adds at most 20% to a sweep.
2. ``--fits``: the default fit (``OrdinalMixture()``) and ``model='paper'`` on TREC, one run
   each: wall time and sweeps of all restarts and stages (the machine may be shared: the sweep
   counts are the stable figure).
3. ``--crowdkit``: whole processes (interpreter, imports, CSV, fit) of the default fit and of
   crowd-kit ``DawidSkene(n_iter=100)``, timed from outside, minimum of ``--repeats``.
   Target: ordmix <= 1.5 x crowd-kit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TREC = os.path.join(HERE, "..", "..", "shared", "data", "trec-rf10", "ratings.csv")
VARIANTS = {  # name: (bias, spam_dist)
    "paper": (False, "uniform"),
    "bias": (True, "uniform"),
    "default (bias + global pi)": (True, "global"),
    "bias + per-annotator pi": (True, "annotator"),
}


def per_sweep(path: str, n_sweeps: int) -> None:
    from ordmix_core.data.crowd import prepare
    from ordmix_core.fit import restarts
    from ordmix_core.io import read_ratings
    from ordmix_core.vb import phases, sweep

    data = prepare(read_ratings(path), None, granularity="instance")
    k, step = data.scale.k, data.scale.step
    n_m, n_n = data.counts()
    base = None
    print(f"per sweep, fused, {data.n_ratings:,} ratings (min of {n_sweeps}):")
    for name, (bias, dist) in VARIANTS.items():
        p = sweep.Problem.from_data(
            data, mu=data.scale.center, lam=0.1, phi=10.0, eta=5.0, pi=np.full(k, 1 / k),
            ordinal=True, spam=True, exact=True, bias=bias, spam_dist=dist,
        )  # fmt: skip
        g = restarts.init_globals(
            n_n, np.arange(n_n.size, dtype=np.uint64), np.ones(data.n_instances), 0, 0, step,
            True, False, 10.0, 5.0, bias, dist, np.full(k, 1 / k),
        )  # fmt: skip
        mu_m = (p.mu * p.lam + n_m * data.per_instance_mean()) / (p.lam + n_m)
        s = sweep.State(mu_m=mu_m, lam_m=p.lam + n_m / step**2, **g._asdict())
        s.delta_shape = 10.0 + 0.5 * n_m.astype(float)
        s.delta_rate = s.delta_shape / 2.0
        for _ in range(2):
            s, _ = phases.sweep_fused(p, s)
        times = []
        for _ in range(n_sweeps):  # CPU time of this process: robust on a shared machine
            t = time.process_time()
            s, _ = phases.sweep_fused(p, s)
            times.append(time.process_time() - t)
        best = min(times)
        base = best if base is None else base
        print(f"  {name:28s} {1e3 * best:7.2f} ms  ({best / base:.2f} x paper)", flush=True)


def fits(path: str) -> None:
    import warnings

    from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
    from ordmix_core.io import read_ratings

    df = read_ratings(path)
    print("whole fits (in process, one run each):")
    for model in ("paper", "extended"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            m = OrdinalMixture(model=model, random_state=0).fit(df)
            sec = time.perf_counter() - t
        r = m.restarts_
        sweeps = int(r["warmup_iter"].sum() + r["uniform_iter"].sum() + r["n_iter"].sum())
        print(f"  model={model:8s} {sec:6.1f} s, {sweeps} sweeps (all restarts and stages), "
              f"{1e3 * sec / sweeps:.1f} ms per sweep", flush=True)  # fmt: skip


OURS = """
import sys, pandas as pd
from ordmix_core import OrdinalMixture
df = pd.read_csv(sys.argv[1], dtype={"annotator": str, "instance": str, "query": str})
OrdinalMixture(random_state=0).fit(df)
"""
THEIRS = """
import sys, pandas as pd
from crowdkit.aggregation import DawidSkene
df = pd.read_csv(sys.argv[1], dtype={"annotator": str, "instance": str, "query": str})
df = df.rename(columns={"annotator": "worker", "instance": "task", "rating": "label"})
DawidSkene(n_iter=100).fit(df[["worker", "task", "label"]])
"""


def crowdkit(path: str, repeats: int, ck_python: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.path.join(HERE, "..")}

    def timed(python: str, code: str) -> float:
        t = time.perf_counter()
        subprocess.run([python, "-c", code, path], check=True, env=env, capture_output=True)
        return time.perf_counter() - t

    a, b = [], []
    for _ in range(repeats):
        a.append(timed(sys.executable, OURS))
        b.append(timed(ck_python, THEIRS))
    print(
        f"whole processes (min of {repeats}): ordmix default {min(a):.2f} s, crowd-kit "
        f"DawidSkene(n_iter=100) {min(b):.2f} s, ratio {min(a) / min(b):.2f} (target <= 1.5)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", default=TREC)
    ap.add_argument("--sweeps", type=int, default=40)
    ap.add_argument("--fits", action="store_true")
    ap.add_argument("--crowdkit", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--ck-python", default=sys.executable, help="the interpreter that has crowd-kit"
    )
    args = ap.parse_args()
    per_sweep(args.ratings, args.sweeps)
    if args.fits:
        fits(args.ratings)
    if args.crowdkit:
        crowdkit(args.ratings, args.repeats, args.ck_python)


if __name__ == "__main__":
    main()
