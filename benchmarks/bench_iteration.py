"""Seconds per iteration per million ratings: the VB engine vs a plain Dawid-Skene EM.

    python benchmarks/bench_iteration.py [--sizes 10000,100000,1000000,10000000]

Each (method, size) runs in its own subprocess on the same simulated crowd (``synth.py``: 5 levels,
5 ratings per item, 30% spammers, 1000 queries, query granularity), so that peak RSS
(``resource.getrusage``) belongs to that run alone. Methods: ``fused`` (the engine's default
sweep, numba, 1 and 2 threads), ``numpy`` (the reference sweep, up to 1M ratings) and ``ds``
(one EM iteration of Dawid-Skene with the levels as classes: ``ordmix_core.estimators.baselines``'
M and E steps if present, else a vectorised numpy DS defined here). Time per iteration is the
minimum over several iterations after one warm-up iteration (which also loads the JIT cache).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _iters(n: int) -> int:
    return max(3, min(50, 2_000_000 // n))


def _ds_steps():
    """(m_step, e_step) of Dawid-Skene on CrowdData: the project's, else a local numpy one."""
    try:
        from ordmix_core.estimators.baselines.dawid_skene import ds_e_step, ds_m_step

        return (
            lambda post, d: ds_m_step(post, d, 0.01),
            ds_e_step,
            "ordmix_core.estimators.baselines",
        )
    except ImportError:
        import numpy as np

        def m_step(post, d):
            k, n = d.scale.k, d.n_annotators
            idx = d.ann * k + d.level
            conf = np.empty((n, k, k))
            for t in range(k):
                w = post[d.inst, t]
                conf[:, t, :] = np.bincount(idx, weights=w, minlength=n * k).reshape(n, k)
            conf = conf + 0.01
            conf /= conf.sum(axis=2, keepdims=True)
            pri = post.sum(axis=0) + 0.01
            return conf, pri / pri.sum()

        def e_step(conf, pri, d):
            logc = np.log(conf)
            logp = np.tile(np.log(pri), (d.n_instances, 1))
            for t in range(d.scale.k):
                w = logc[d.ann, t, d.level]
                logp[:, t] += np.bincount(d.inst, weights=w, minlength=d.n_instances)
            logp -= logp.max(axis=1, keepdims=True)
            p = np.exp(logp)
            return p / p.sum(axis=1, keepdims=True), 0.0

        return m_step, e_step, "benchmark-local numpy DS"


def child(method: str, n: int, threads: int) -> dict:
    """One measurement in this process; returns seconds per iteration and peak RSS."""
    import numpy as np

    sys.path.insert(0, HERE)
    from synth import synth_crowd

    data = synth_crowd(n, "query")
    iters = _iters(n)
    times = []
    if method == "ds":
        m_step, e_step, impl = _ds_steps()
        counts = np.zeros((data.n_instances, data.scale.k))
        np.add.at(counts, (data.inst, data.level), 1.0)
        post = counts / counts.sum(axis=1, keepdims=True)
        for _ in range(iters + 1):
            t = time.perf_counter()
            conf, pri = m_step(post, data)
            post, _ = e_step(conf, pri, data)
            times.append(time.perf_counter() - t)
    else:
        from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
        from ordmix_core.vb import kernels
        from ordmix_core.vb import sweep as vb

        impl = method
        if method == "fused":
            kernels.numba.set_num_threads(threads)
        k = data.scale.k
        p = vb.Problem.from_data(
            data, mu=data.scale.center, lam=0.1, phi=10.0, eta=5.0, pi=np.full(k, 1.0 / k),
            ordinal=True, spam=True, exact=True,
        )  # fmt: skip
        _, s = OrdinalMixture("query")._initial_state(data, p, 0, np.random.default_rng(0))
        sweep = vb.sweep_fused if method == "fused" else vb.sweep_numpy
        with np.errstate(over="ignore", under="ignore"):
            for _ in range(iters + 1):
                t = time.perf_counter()
                s, f = sweep(p, s)
                times.append(time.perf_counter() - t)
    sec = float(np.min(times[1:]))  # min: the least disturbed by other load on the machine
    return {
        "method": method,
        "impl": impl,
        "threads": threads,
        "ratings": n,
        "iters": iters,
        "s_per_iter": sec,
        "s_per_iter_per_M": sec / (n / 1e6),
        "ns_per_rating": sec / n * 1e9,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def run(method: str, n: int, threads: int = 1) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(max(threads, 1)), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, "--size", str(n), "--threads", str(threads)],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--numpy-max", type=int, default=1_000_000, help="largest size for numpy")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.size, args.threads)))
        return
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"# load average before the run: {' '.join(load)} (2 cores)")
    rows = []
    hdr = (f"{'ratings':>10} {'method':>10} {'thr':>3} {'s/it/M':>8} {'ns/rating':>9} "
           f"{'peak MB':>8} {'DS/this':>8}")  # fmt: skip
    print(hdr)
    for n in (int(x) for x in args.sizes.split(",")):
        ds = run("ds", n)
        group = [ds]
        if n <= args.numpy_max:
            group.append(run("numpy", n))
        group += [run("fused", n, 1), run("fused", n, 2)]
        for r in group:
            ratio = ds["s_per_iter"] / r["s_per_iter"]
            print(
                f"{n:>10,} {r['method']:>10} {r['threads']:>3} {r['s_per_iter_per_M']:>8.3f} "
                f"{r['ns_per_rating']:>9.1f} {r['peak_rss_mb']:>8.0f} {ratio:>8.2f}",
                flush=True,
            )
            rows.append(r)
    print(f"# DS: {rows[0]['impl']}; DS/this > 1: an iteration is faster than one DS iteration")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
