"""The Dask client's work a sweep as the annotators grow: seconds and CPU of the client per
plain sweep, at a given number of annotators.

    python benchmarks/bench_dask_annotators.py --annotators 200000 [--ratings 1000000]
        [--partitions 4] [--iters 6] [--json out.json]

``synth.synth_arrays(n_ratings, n_annotators=...)`` (5 ratings an item, 1,000 queries, 5 levels,
30% spammers, the annotators' loads falling as 1/sqrt(rank)) as a pandas frame of string IDs,
fitted by ``DaskOrdinalMixture(granularity='query', n_restarts=1, max_iter=iters, tol=0,
accelerate=False, spam=True, nospam_warmup=False)`` on the local cluster a fit starts, 2 worker
processes x 1 thread: every progress callback is one plain sweep of the default model. Per
sweep (the median over the sweeps after the first): wall seconds between callbacks, the
client process's CPU seconds (``getrusage``: its own steps, the (de)serialisation of what it
sends and receives, and the local scheduler's work, which runs in the client's process), and
of those the client's own steps (the CPU of the thread that runs the fit, ``thread_time``: the
annotators' and categories' factors, which are global); the annotators a block holds (mean
over the blocks, from the blocks' ``ann_codes``); the seconds before the first sweep (loading
and encoding) and after the last. The label path after the race (``label_fit.finish``) is
left out: it is not a sweep, and the fit's learned labels are not read. The load average
goes into the report.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--annotators", type=int, required=True)
    ap.add_argument("--ratings", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--memory-limit", default="3GiB")
    ap.add_argument("--json")
    args = ap.parse_args()

    import numpy as np
    import pandas as pd
    from distributed import Client
    from synth import synth_arrays

    from ordmix_core.dask_engine import DaskOrdinalMixture, label_fit
    from ordmix_core.dask_engine.cluster import local_cluster

    a = synth_arrays(args.ratings, n_annotators=args.annotators, seed=0)

    def ids(prefix: str, codes: np.ndarray) -> np.ndarray:  # text IDs, one per distinct code
        names = np.char.add(prefix, np.arange(codes.max() + 1).astype(str)).astype(object)
        return names[codes]

    frame = pd.DataFrame(
        {
            "annotator": ids("a", a["ann"]),
            "instance": ids("i", a["inst"]),
            "rating": a["level"].astype(float) + 1.0,
            "query": ids("q", a["query_of_inst"][a["inst"]]),
        }
    )
    n_ann = int(np.unique(a["ann"]).size)
    del a
    held: list[float] = []

    def counting_finish(model, labels, winner, local, gold=None):  # their annotators, counted
        held.extend(c.size for c in labels.codes)
        return []  # the label path after the race is not a sweep: left out

    label_fit.finish = counting_finish
    stamps: list[tuple[float, float, float]] = []

    def callback(r, i, f):
        stamps.append((time.perf_counter(), _cpu_s(), time.thread_time()))

    load = open("/proc/loadavg").read().split()[:3]
    with (
        local_cluster(2, args.memory_limit) as cluster,
        Client(cluster) as client,
        warnings.catch_warnings(),
    ):  # fmt: skip
        warnings.simplefilter("ignore")
        model = DaskOrdinalMixture(
            granularity="query", n_restarts=1, max_iter=args.iters, tol=0, accelerate=False,
            spam=True, nospam_warmup=False, scheduler=client, n_partitions=args.partitions,
        )  # fmt: skip
        t0 = time.perf_counter()
        model.fit(frame, callback=callback)
        total = time.perf_counter() - t0
    wall = [b[0] - a[0] for a, b in zip(stamps[1:], stamps[2:], strict=False)]
    cpu = [b[1] - a[1] for a, b in zip(stamps[1:], stamps[2:], strict=False)]
    own = [b[2] - a[2] for a, b in zip(stamps[1:], stamps[2:], strict=False)]
    out = {
        "annotators": n_ann,
        "ratings": args.ratings,
        "partitions": args.partitions,
        "sweeps": len(stamps),
        "wall_per_sweep_s": statistics.median(wall),
        "client_cpu_per_sweep_s": statistics.median(cpu),
        "client_steps_cpu_per_sweep_s": statistics.median(own),
        "annotators_per_block": statistics.mean(held) if held else None,
        "fit_s": total,
        "load_s": stamps[0][0] - t0 if stamps else None,
        "after_race_s": t0 + total - stamps[-1][0] if stamps else None,
        "loadavg_before": load,
        "loadavg_after": open("/proc/loadavg").read().split()[:3],
    }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
