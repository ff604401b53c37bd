"""Nanoseconds per rating per sweep of the default fit, vs a plain Dawid-Skene EM iteration.

    python benchmarks/bench_iteration.py [--sizes 100000,1000000,10000000] [--json out.json]

Each (method, size, threads) runs in its own subprocess on the same simulated crowd
(``synth.py``: 5 levels, 5 ratings per item, 30% spammers, 1000 queries, query granularity), so
that peak RSS (``resource.getrusage``, data generation included) belongs to that run alone.

``fit`` times the default model (``model='extended'``: bias, learned spam distribution) through
the public estimator only, so it survives refactors of the engine's internals:
``OrdinalMixture("query", n_restarts=1, nospam_warmup=False, max_iter=N, tol=0.0,
accelerate=False, spam=True, random_state=0).fit(data, callback=...)``, where the callback
stamps ``time.perf_counter()`` after every sweep. With one restart, no warm-up, no SQUAREM and
``tol=0`` every callback is one plain sweep of the extended mixture, and the gap between two
callbacks is one sweep plus its bookkeeping (bound, stopping rule): median and min over the
``N - 1`` gaps (the first sweep, which also loads the JIT cache, is not a gap), and the
process's CPU seconds per sweep (``time.process_time``, all threads: with one thread it does not
depend on other load on the machine, with two it is the sum of both threads). With
``--repeats R`` each row runs in R subprocesses and the one with the lowest median is shown
(the others' medians are in the JSON): on a shared machine the least disturbed. Threads:
``ordmix_core.vb.kernels.numba.set_num_threads`` (and ``NUMBA_NUM_THREADS``).

``ds``: one EM iteration (M + E step) of Dawid-Skene with the levels as classes
(``ordmix_core.estimators.baselines``' steps if present, else a vectorised numpy DS defined
here); median and min over ``N`` iterations after one warm-up iteration.
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
    """Timed sweeps (or DS iterations) at ``n`` ratings: 40 at 100k, 10 at 1M, 8 at 10M."""
    return max(8, min(40, 10_000_000 // n))


def _ds_steps():
    """(m_step, e_step) of Dawid-Skene on CrowdData: the project's, else a local numpy one."""
    try:
        from ordmix_core.estimators.baselines.dawid_skene import ds_e_step, ds_m_step

        return (
            lambda post, d: ds_m_step(post, d, 0.01)[:2],
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
    """One measurement in this process; returns seconds per sweep and peak RSS."""
    import statistics
    import warnings

    import numpy as np

    sys.path.insert(0, HERE)
    from synth import synth_crowd

    data = synth_crowd(n, "query")
    iters = _iters(n)
    if method == "ds":
        m_step, e_step, impl = _ds_steps()
        counts = np.zeros((data.n_instances, data.scale.k))
        np.add.at(counts, (data.inst, data.level), 1.0)
        post = counts / counts.sum(axis=1, keepdims=True)
        times = []
        for _ in range(iters + 1):
            if len(times) == 1:
                c0 = time.process_time()
            t = time.perf_counter()
            conf, pri = m_step(post, data)
            post, _ = e_step(conf, pri, data)
            times.append(time.perf_counter() - t)
        cpu_per_sweep = (time.process_time() - c0) / iters
        gaps = times[1:]
    else:
        from ordmix_core import OrdinalMixture
        from ordmix_core.vb import kernels

        kernels.numba.set_num_threads(threads)
        model = OrdinalMixture(
            "query", n_restarts=1, nospam_warmup=False, max_iter=iters + 1, tol=0.0,
            accelerate=False, spam=True, random_state=0,
        )  # fmt: skip
        impl = f"OrdinalMixture(model={model.model!r})"
        stamps: list[float] = []
        cpu: list[float] = []

        def callback(r, i, f):
            stamps.append(time.perf_counter())
            cpu.append(time.process_time())

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning: tol=0 never converges
            model.fit(data, callback=callback)
        if len(stamps) != iters + 1:
            raise RuntimeError(f"expected {iters + 1} sweeps, got {len(stamps)}")
        gaps = np.diff(stamps).tolist()
        cpu_per_sweep = (cpu[-1] - cpu[0]) / (len(cpu) - 1)
    sec = statistics.median(gaps)
    return {
        "method": method,
        "impl": impl,
        "threads": threads,
        "ratings": n,
        "iters": len(gaps),
        "s_per_iter": sec,
        "s_per_iter_min": min(gaps),
        "s_per_iter_per_M": sec / (n / 1e6),
        "ns_per_rating": sec / n * 1e9,
        "ns_per_rating_min": min(gaps) / n * 1e9,
        "cpu_ns_per_rating": cpu_per_sweep / n * 1e9,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(method: str, n: int, threads: int = 1) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(max(threads, 1)), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, "--size", str(n), "--threads", str(threads)],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--repeats", type=int, default=1, help="subprocesses per row; keeps the best")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.size, args.threads)))
        return
    print(f"# load average before the run: {_loadavg()} (2 cores)")
    rows = []
    hdr = (f"{'ratings':>10} {'method':>6} {'thr':>3} {'ns/rating':>9} {'(min)':>6} "
           f"{'CPU ns':>6} {'s/sweep':>8} {'peak MB':>8} {'DS/this':>8}  load before")  # fmt: skip
    print(hdr)
    for n in (int(x) for x in args.sizes.split(",")):
        group = []
        for method, threads in (("ds", 1), ("fit", 1), ("fit", 2)):
            tries = []
            for _ in range(args.repeats):
                load = _loadavg()
                r = run(method, n, threads)
                r["loadavg_before"] = load
                tries.append(r)
            best = min(tries, key=lambda t: t["s_per_iter"])
            best["repeats_ns_per_rating"] = [t["ns_per_rating"] for t in tries]
            group.append(best)
        ds = group[0]
        for r in group:
            ratio = ds["s_per_iter"] / r["s_per_iter"]
            print(
                f"{n:>10,} {r['method']:>6} {r['threads']:>3} {r['ns_per_rating']:>9.1f} "
                f"{r['ns_per_rating_min']:>6.1f} {r['cpu_ns_per_rating']:>6.1f} "
                f"{r['s_per_iter']:>8.3f} "
                f"{r['peak_rss_mb']:>8.0f} {ratio:>8.2f}  {r['loadavg_before']}",
                flush=True,
            )
            rows.append(r)
    print(f"# DS: {rows[0]['impl']}; DS/this > 1: a sweep is faster than one DS iteration")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
