"""The Dask engine out of core: simulated ratings as Parquet partitions, a memory-limited
LocalCluster, seconds per sweep and peak memory per worker, next to the in-memory engine.

    python benchmarks/bench_dask.py [--ratings 10000000] [--memory-limit 1.5GiB] [--json out.json]

1. ``synth.synth_arrays`` (memory O(L)) written as ``--files`` Parquet files with string IDs
   (``annotator, instance, rating, query``), in a temporary folder, or in ``--folder`` if it
   is missing or empty (kept for the next run, which reads it as it is).
2. Dask: the local cluster a fit starts (``cluster.local_cluster``: its workers' allocator
   settings too) of 2 worker processes, 1 thread each, ``--memory-limit`` each;
   ``DaskOrdinalMixture(granularity='query', n_restarts=1, max_iter=N, tol=0,
   accelerate=False, spam=True, nospam_warmup=False)`` on the folder: the default model
   (``model='extended'``: bias, learned spam distribution), ``N = --iters`` plain sweeps of it
   (no SQUAREM, so one progress callback per sweep; ``tol=0`` never stops early). With
   ``--warmup`` the fit first runs the default no-spam warm-up (``nospam_warmup=True``); it
   stops at its own tolerance or at ``N // 2`` sweeps, and ``max_iter`` caps both stages
   together, so the sweeps are then of two models. Time per sweep = median gap between
   progress callbacks (and min); load (read, shuffle, codes, start) = fit start to the first
   callback minus one sweep; after = last callback to the fit's return (the learned
   attributes, the labels); peak memory per worker = ``ru_maxrss`` of each worker process.
   CPU seconds per sweep of each worker and of the client (``getrusage``, read at the first
   and the last sweep) do not depend on what else the machine runs, as wall times do; each
   worker's user and system seconds in all (page faults count as system time).
   ``--default`` fits ``DaskOrdinalMixture(granularity='query', random_state=0)`` instead:
   the whole default fit (every restart, stage and stopping rule), its sweeps counted in all
   restarts and in the winner; CPU is then read at the first sweep and after the fit.
3. In memory, each in its own subprocess (peak RSS is that process's alone): the same fit with
   ``OrdinalMixture`` from the same Parquet folder (``pandas.read_parquet``, string IDs: what
   the whole data needs in one process), and the engine alone on integer codes (``synth_crowd``,
   no strings, as ``bench_iteration.py``). ``--skip-memory`` leaves both out.

The load average (``/proc/loadavg``) before each measurement goes into the report.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def write_parquet(
    folder: str,
    n_ratings: int,
    n_files: int,
    seed: int = 0,
    biased_share: float = 0.0,
    truth_path: str | None = None,
) -> dict:
    """The synth crowd (``biased_share``: ``synth_arrays``') as ``n_files`` Parquet files with
    string IDs, and with ``truth_path`` each item's true level (1-based) there; its sizes."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from synth import synth_arrays

    a = synth_arrays(n_ratings, seed=seed, biased_share=biased_share)
    q = a["query_of_inst"][a["inst"]]
    bounds = np.linspace(0, n_ratings, n_files + 1).astype(int)

    def ids(prefix: str, codes) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(codes), pa.string()), "")

    for i in range(n_files):
        s = slice(bounds[i], bounds[i + 1])
        table = pa.table(
            {
                "annotator": ids("a", a["ann"][s]),
                "instance": ids("i", a["inst"][s]),
                "rating": pa.array(a["level"][s] + 1, pa.int8()),
                "query": ids("q", q[s]),
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{i:03d}.parquet"))
    if truth_path is not None:
        truth = a["truth"]
        pq.write_table(
            pa.table({"instance": ids("i", np.arange(truth.size)), "truth": pa.array(truth + 1)}),
            truth_path,
        )
    return {
        "n_ratings": n_ratings,
        "n_instances": int(a["inst"].max()) + 1,
        "n_annotators": int(a["ann"].max()) + 1,
        "n_queries": int(np.unique(a["query_of_inst"]).size),
        "bytes_on_disk": sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)),
    }


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def model_params(iters: int, warmup: bool, default: bool = False) -> dict:
    """The fit of both engines: the default model, ``iters`` plain sweeps (see the docstring);
    ``default``: the whole default fit instead (query granularity, seed 0, every restart,
    stage and stopping rule as the estimator's defaults have them)."""
    if default:
        return {"granularity": "query", "random_state": 0}
    return {
        "granularity": "query",
        "n_restarts": 1,
        "max_iter": iters,
        "tol": 0.0,
        "accelerate": False,
        "spam": True,
        "nospam_warmup": warmup,
        "random_state": 0,
    }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process so far, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _user_system_s() -> tuple[float, float]:
    """User and system CPU seconds of this process so far (page faults show as system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _timed_fit(model, data, cpu) -> dict:
    """Fit with a callback that stamps every sweep; per-sweep and load times, wall and CPU.

    ``cpu()``: CPU seconds per process (a dict), read at the start, at the first and at the
    last sweep, so that CPU seconds per sweep do not depend on what else the machine runs."""
    stamps: list[float] = []
    cpus = [cpu()]

    def callback(r, i, f):
        stamps.append(time.perf_counter())
        if len(stamps) in (1, model.max_iter):
            cpus.append(cpu())

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(data, callback=callback)
    total = time.perf_counter() - t0
    if len(cpus) < 3:  # a fit that stopped before max_iter: CPU to its end, after-fit work too
        cpus.append(cpu())
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    per_iter = statistics.median(gaps)
    start, first, last = cpus
    procs = sorted(start)
    return {
        "model": model.model,
        "sweeps": len(stamps),
        "s_per_iter": per_iter,
        "s_per_iter_min": min(gaps),
        "s_per_iter_max": max(gaps),
        "gaps_s": gaps,
        "load_s": stamps[0] - t0 - per_iter,
        "after_s": t0 + total - stamps[-1],
        "total_s": total,
        "cpu_s_per_iter": {k: (last[k] - first[k]) / len(gaps) for k in procs},
        "cpu_s_to_first_sweep": {k: first[k] - start[k] for k in procs},
        "lower_bound": float(model.lower_bound_),
    }


def run_dask(
    folder: str, iters: int, warmup: bool, memory_limit: str, n_partitions: int,
    default: bool = False,
) -> dict:  # fmt: skip
    from distributed import Client

    from ordmix_core.dask_engine import DaskOrdinalMixture
    from ordmix_core.dask_engine.cluster import local_cluster

    with local_cluster(2, memory_limit) as cluster, Client(cluster) as client:
        model = DaskOrdinalMixture(
            **model_params(iters, warmup, default), scheduler=client, n_partitions=n_partitions
        )

        def cpu() -> dict:
            per_worker = client.run(_cpu_s)
            names = {w: f"worker{i}" for i, w in enumerate(sorted(per_worker))}
            out = {names[w]: v for w, v in per_worker.items()}
            out["client"] = _cpu_s()
            return out

        out = _timed_fit(model, folder, cpu)
        rss = client.run(_peak_rss_mb)
        out["peak_rss_mb_per_worker"] = sorted(rss.values())
        out["user_system_s_per_worker"] = sorted(client.run(_user_system_s).values())
        out["n_partitions"] = model.data_.n_partitions
        out["items_type"] = type(model.items_).__name__
        r = model.restarts_
        stages = [c for c in ("warmup_iter", "uniform_iter", "n_iter") if c in r]
        out["sweeps_all_restarts"] = int(r[stages].to_numpy().sum())
        out["winner_sweeps"] = int(model.n_iter_)
    return out


def run_memory(folder: str, iters: int, warmup: bool, codes: bool, n_ratings: int) -> dict:
    """The in-memory engine (one process) from the Parquet folder, or on integer codes."""
    from ordmix_core import OrdinalMixture

    model = OrdinalMixture(**model_params(iters, warmup), n_jobs=1)
    if codes:
        from synth import synth_crowd

        data = synth_crowd(n_ratings, granularity="query")
    else:
        import pandas as pd

        data = pd.read_parquet(folder)
    out = _timed_fit(model, data, lambda: {"process": _cpu_s()})
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--iters", type=int, default=8, help="sweeps (max_iter)")
    ap.add_argument("--warmup", action="store_true", help="run the no-spam warm-up first")
    ap.add_argument("--memory-limit", default="1.5GiB", help="per Dask worker")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--folder", help="Parquet folder: read, or written if missing or empty")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--default", action="store_true",
                    help="the whole default fit (Dask only; --iters is ignored)")  # fmt: skip
    ap.add_argument("--json")
    ap.add_argument("--child", choices=["memory-parquet", "memory-codes"], help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        codes = args.child == "memory-codes"
        res = run_memory(args.folder, args.iters, args.warmup, codes, args.ratings)
        print(json.dumps(res))
        return

    tmp = None
    folder = args.folder
    report: dict = {"argv": sys.argv[1:], "ratings": args.ratings}
    report["params"] = model_params(args.iters, args.warmup, args.default)
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix="ordmix-bench-dask-")
        folder = tmp.name
    if not os.path.isdir(folder) or not os.listdir(folder):
        os.makedirs(folder, exist_ok=True)
        t = time.perf_counter()
        report["data"] = write_parquet(folder, args.ratings, args.files)
        report["data"]["write_s"] = time.perf_counter() - t
        print("data", report["data"], flush=True)
    load = _loadavg()
    report["dask"] = run_dask(
        folder, args.iters, args.warmup, args.memory_limit, args.partitions, args.default
    )
    report["dask"]["memory_limit"] = args.memory_limit
    report["dask"]["loadavg_before"] = load
    report["dask"]["loadavg_after"] = _loadavg()
    print("dask", report["dask"], flush=True)
    if not args.skip_memory and not args.default:
        for kind in ("memory-codes", "memory-parquet"):
            cmd = [sys.executable, __file__, "--child", kind, "--folder", folder]
            cmd += ["--iters", str(args.iters), "--ratings", str(args.ratings)]
            cmd += ["--warmup"] if args.warmup else []
            load = _loadavg()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                report[kind] = {"error": proc.stderr.strip().splitlines()[-1:]}
            else:
                report[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
            report[kind]["loadavg_before"] = load
            print(kind, report[kind], flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
