"""The Dask engine's default fit as a user runs it, at 10M-100M simulated ratings, scored on
the simulated truth: wall time, sweeps, each process's peak memory, label error.

    python benchmarks/scale_run.py write --ratings 100000000 --files 100 --folder /tmp/s100m
    python benchmarks/scale_run.py fit --folder /tmp/s100m --out /tmp/s100m-out
    python benchmarks/scale_run.py memory --folder /tmp/s10m      # the in-memory engine's labels

``write``: ``synth.synth_arrays`` (5 levels, 5 ratings an item, one annotator per 500 ratings,
Zipf-like loads, 30% uniform spammers, 20% biased raters, 1,000 queries) as ``--files`` Parquet
files with string IDs (``annotator, instance, rating, query``), and each item's true level in
``FOLDER.truth.parquet`` beside the folder (not in it: the folder is the ratings).

``fit``: ``ordmix fit FOLDER --engine dask --granularity query --seed 0 --out OUT`` in a
subprocess: the default local cluster (2 workers of one thread, Dask's ``auto`` memory limit,
the machine's memory shared between them), its lines in ``OUT.log``, each with the seconds since
the start (the first sweep's, the median gap between sweeps, the time after the last). Every
process of its tree is sampled each second for its peak resident memory (``VmHWM``): the
client (the ``ordmix`` process) and each worker. Then the labels (``items.csv``, or
``items/part-*.csv`` past ``max_local_items``) are scored on the truth, and the report (JSON on
stdout) holds the wall time, the fit's seconds and sweeps from ``summary.json``, the peaks and
the label error.

``memory``: the in-memory engine's default fit (``OrdinalMixture(granularity="query",
random_state=0)`` on ``pandas.read_parquet(FOLDER)``) in this process, its label error and
peak memory, to compare the engines' labels on the same generator.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

BIASED_SHARE = 0.2


def write(folder: str, n_ratings: int, n_files: int, seed: int = 0) -> dict:
    """The crowd as ``n_files`` Parquet files in ``folder`` (a new one) and its truth beside it
    (``bench_dask.write_parquet``)."""
    from bench_dask import write_parquet

    os.makedirs(folder, exist_ok=False)
    sizes = write_parquet(folder, n_ratings, n_files, seed, BIASED_SHARE, truth_path(folder))
    return {**sizes, "biased_share": BIASED_SHARE}


def truth_path(folder: str) -> str:
    return folder.rstrip("/") + ".truth.parquet"


def label_error(labels, folder: str) -> float:
    """Share of the items whose label is not their true level (``labels``: instance -> label)."""
    import pandas as pd

    truth = pd.read_parquet(truth_path(folder)).set_index("instance")["truth"]
    got = labels.reindex(truth.index)
    return float((got.to_numpy() != truth.to_numpy()).mean())


def _peaks(root: int) -> dict[int, tuple[str, int]]:
    """Each live process of ``root``'s tree but multiprocessing's resource tracker: its role
    (``client``, the ``ordmix`` process, or ``worker``) and its peak RSS (kB)."""
    import psutil

    out = {}
    try:
        procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
            if "resource_tracker" not in " ".join(p.cmdline()):
                out[p.pid] = ("client" if p.pid == root else "worker", hwm)
        except (OSError, StopIteration, psutil.Error):
            continue
    return out


def fit(folder: str, out: str) -> dict:
    """``ordmix fit FOLDER --engine dask`` as a user runs it, sampled for memory; scored."""
    import pandas as pd

    cmd = ["ordmix", "fit", folder, "--engine", "dask", "--granularity", "query"]
    cmd += ["--seed", "0", "--out", out]
    peaks: dict[int, tuple[str, int]] = {}
    sweeps: list[float] = []  # when each sweep's progress line came
    t0 = time.perf_counter()
    with open(out.rstrip("/") + ".log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def stamp() -> None:
            for line in proc.stdout:
                t = time.perf_counter() - t0
                log.write(f"{t:9.1f}  {line}")
                log.flush()
                if ", sweep " in line:
                    sweeps.append(t)

        reader = threading.Thread(target=stamp, daemon=True)
        reader.start()
        while proc.poll() is None:
            for pid, (name, hwm) in _peaks(proc.pid).items():
                peaks[pid] = (name, max(hwm, peaks.get(pid, ("", 0))[1]))
            time.sleep(1.0)
        reader.join()
    wall = time.perf_counter() - t0
    report: dict = {"command": " ".join(cmd), "exit": proc.returncode, "wall_s": wall}
    if len(sweeps) > 1:
        gaps = [b - a for a, b in zip(sweeps, sweeps[1:], strict=False)]
        report["to_first_sweep_s"] = sweeps[0]
        report["sweep_s_median"] = statistics.median(gaps)
        report["after_last_sweep_s"] = wall - sweeps[-1]
    report["peak_mb"] = {
        (name if name == "client" else f"{name} {pid}"): round(kb / 1024)
        for pid, (name, kb) in sorted(peaks.items(), key=lambda kv: -kv[1][1])
    }
    if proc.returncode != 0:
        return report
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    report["fit_s"] = summary["seconds"]
    report["iterations"] = summary["iterations"]
    restarts = pd.read_csv(os.path.join(out, "restarts.csv"))
    stages = [c for c in ("warmup_iter", "uniform_iter", "n_iter") if c in restarts]
    report["sweeps_all_stages"] = int(restarts[stages].to_numpy().sum())
    files = glob.glob(os.path.join(out, "items", "part-*.csv")) or [os.path.join(out, "items.csv")]
    labels = pd.concat(
        pd.read_csv(f, usecols=["instance", "label"], dtype={"instance": str}) for f in files
    ).set_index("instance")["label"]
    report["label_error"] = label_error(labels, folder)
    return report


def memory(folder: str) -> dict:
    """The in-memory engine's default fit of the folder, its label error and peak memory."""
    import warnings

    import pandas as pd

    from ordmix_core import OrdinalMixture

    data = pd.read_parquet(folder)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OrdinalMixture(granularity="query", random_state=0).fit(data)
    seconds = time.perf_counter() - t0
    labels = model.labels_
    labels.index = labels.index.astype(str)
    return {
        "fit_s": seconds,
        "label_error": label_error(labels, folder),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["write", "fit", "memory"])
    ap.add_argument("--folder", required=True)
    ap.add_argument("--ratings", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.what == "write":
        report = write(args.folder, args.ratings, args.files)
    elif args.what == "fit":
        report = fit(args.folder, args.out or args.folder.rstrip("/") + "-out")
    else:
        report = memory(args.folder)
    report["loadavg"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
