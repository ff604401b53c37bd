"""Reading and coding a big ratings file: the CLI's read path, a whole small fit, an upload.

    python benchmarks/bench_read.py write /tmp/r10m.csv --ratings 10000000
    python benchmarks/bench_read.py read /tmp/r10m.csv     # read_ratings + crowd_from_coded
    python benchmarks/bench_read.py fit /tmp/r10m.csv      # `ordmix fit`, 1 restart, 5 sweeps
    python benchmarks/bench_read.py fit-crowd /tmp/r10m.csv  # that fit from io.read_crowd
    python benchmarks/bench_read.py stages /tmp/r10m.csv   # `ordmix fit`'s peak RSS by stage
    python benchmarks/bench_read.py upload --rows 1000000  # the dashboard's upload read path
    python benchmarks/bench_read.py hash /tmp/r10m.csv     # instance coding: pyarrow vs idhash
    python benchmarks/bench_read.py all /tmp/r10m.csv      # all four, one JSON line each

``write`` draws ``synth.synth_arrays`` (5 levels, 5 ratings per item, L/500 annotators, 1,000
queries, 30% spammers) and writes it as CSV with string IDs and a query column, rows shuffled:
``a01234,item0123456,3,q0042`` (about 27 bytes a rating: 10M ratings = 270 MB). ``read``
times ``io.read_ratings`` then ``data.crowd_from_coded(..., granularity="query")`` (reading and
coding as ``ordmix fit`` and ``io.read_crowd`` do it: what the fit needs before its first
sweep), wall and CPU (user + sys, all threads). ``fit`` runs ``ordmix fit ... --restarts 1
--max-iter 5 --tol 0 --granularity query`` as a child process and reports its wall time and
peak RSS (output files included: their decision columns cost more than the fit at 10M
ratings, see ``docs/benchmarks.md``); ``fit-crowd`` the same fit from ``io.read_crowd``
without writing the output files; ``stages`` runs that ``ordmix fit`` in its own process with
a thread sampling the RSS, and reports the peak of each stage (``STAGES``). ``upload``
builds the 1,000,000-row frame of ``tests/pages/test_app_data.py``'s upload test and times what
the Data page does with it outside Streamlit: ``io.read_table`` on the bytes, then
``data.normalize_columns`` + ``data.prepare`` (``app.make_dataset``'s engine calls).
``hash`` codes the instance column twice, with pyarrow's hash and sort and with
``idhash`` (what ``data`` uses for a big column of many distinct short IDs), checks that both
give the same codes and sorted dictionary, and reports CPU and wall of each (numba's first
call excluded). Each measurement runs in its own process (``resource.getrusage``: peak RSS
of that run only); ``ordmix_core`` is whatever ``PYTHONPATH`` points at, so the same
script measures two trees.
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
sys.path.insert(0, HERE)


def write_ratings_csv(path: str, n_ratings: int, seed: int = 0) -> dict:
    """The synth crowd as one CSV with string IDs and a query column, rows shuffled."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    from synth import synth_arrays

    a = synth_arrays(n_ratings, seed=seed)
    order = np.random.default_rng(seed + 1).permutation(n_ratings)

    def ids(prefix: str, codes, width: int) -> pa.Array:
        text = pc.utf8_lpad(pc.cast(pa.array(codes), pa.string()), width, "0")
        return pc.binary_join_element_wise(prefix, text, "")

    inst = a["inst"][order]
    table = pa.table(
        {
            "annotator": ids("a", a["ann"][order], 5),
            "instance": ids("item", inst, 7),
            "rating": pa.array(a["level"][order] + 1, pa.int8()),
            "query": ids("q", a["query_of_inst"][inst], 4),
        }
    )
    pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=True, quoting_style="none"))
    return {
        "path": path,
        "n_ratings": n_ratings,
        "n_instances": int(a["inst"].max()) + 1,
        "n_annotators": int(a["ann"].max()) + 1,
        "mb": round(os.path.getsize(path) / 1e6, 1),
    }


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_read(path: str, granularity: str = "query") -> dict:
    """``io.read_crowd`` in its two steps (what ``ordmix fit`` runs before its first sweep):
    parse, check and code the columns (``read_ratings``), then the scale, the queries and
    ``CrowdData`` from the codes (``data.crowd_from_coded``). CPU is user + sys of every
    thread (``time.process_time``)."""
    from ordmix_core.data.crowd import crowd_from_coded
    from ordmix_core.io import read_ratings

    t0, c0 = time.perf_counter(), time.process_time()
    df = read_ratings(path)
    t1, c1 = time.perf_counter(), time.process_time()
    data = crowd_from_coded(df, None, granularity, df.attrs["source"], copy=False)
    del df
    t2, c2 = time.perf_counter(), time.process_time()
    return {
        "what": "read",
        "read_s": round(t1 - t0, 2),
        "read_cpu_s": round(c1 - c0, 2),
        "crowd_s": round(t2 - t1, 2),
        "crowd_cpu_s": round(c2 - c1, 2),
        "read_and_code_s": round(t2 - t0, 2),
        "cpu_s": round(c2 - c0, 2),
        "load_avg": os.getloadavg()[0],
        "peak_rss_mb": round(_peak_mb()),
        "n_ratings": data.n_ratings,
        "n_instances": data.n_instances,
        "n_annotators": data.n_annotators,
        "n_categories": data.n_categories,
    }


def measure_fit(path: str) -> dict:
    with_out = os.path.join(os.path.dirname(os.path.abspath(path)), "bench_read_fit_out")
    cmd = [
        sys.executable,
        "-c",
        "import sys; from ordmix_core.cli.main import main; sys.exit(main())",
        "fit",
        path,
        "--out",
        with_out,
        "--restarts",
        "1",
        "--max-iter",
        "5",
        "--tol",
        "0",
        "--granularity",
        "query",
        "--seed",
        "0",
        "--quiet",
    ]
    t0 = time.perf_counter()
    # run from the CSV's folder: ``python -c`` puts the working directory first on sys.path,
    # which must not shadow the ordmix_core that PYTHONPATH names
    proc = subprocess.Popen(cmd, cwd=os.path.dirname(os.path.abspath(path)))
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return {
        "what": "fit",
        "load_avg": os.getloadavg()[0],
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "command": " ".join(cmd[3:]),
    }


def measure_fit_crowd(path: str) -> dict:
    """The same fit from ``io.read_crowd`` (the frame dropped once coded), no output files."""
    code = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "from ordmix_core.io import read_crowd\n"
        "from ordmix_core.estimators.ordinal_mixture import OrdinalMixture\n"
        "data = read_crowd(sys.argv[1], granularity='query')\n"
        "OrdinalMixture('query', n_restarts=1, max_iter=5, tol=0, random_state=0).fit(data)\n"
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, os.path.abspath(path)],
        cwd=os.path.dirname(os.path.abspath(path)),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return {
        "what": "fit-crowd",
        "load_avg": os.getloadavg()[0],
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(time.perf_counter() - t0, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
    }


#: what ``stages`` labels: (module, class or None, function, label)
STAGES = (
    ("ordmix_core.io", None, "read_ratings", "read_ratings"),
    ("ordmix_core.data.crowd", None, "crowd_from_coded", "crowd_from_coded"),
    ("ordmix_core.estimators.ordinal_mixture", "MemorySweeps", "sweep", "sweep"),
    ("ordmix_core.estimators.ordinal_mixture", "MemorySweeps", "propose", "squarem proposal"),
    (
        "ordmix_core.estimators.ordinal_mixture",
        "MemorySweeps",
        "sweep_proposal",
        "sweep from the proposal",
    ),
    ("ordmix_core.estimators.ordinal_mixture", "OrdinalMixture", "_store", "learned attributes"),
    ("ordmix_core.results.reliability", None, "fitted_flags", "annotators' flags"),
    ("ordmix_core.estimators.ordinal_mixture", None, "choose_labels", "label fit"),
    ("ordmix_core.results.agreement", None, "annotator_agreement", "annotators' agreement"),
    ("ordmix_core.results.agreement", None, "crowd_agreement", "crowd's agreement"),
    ("ordmix_core.results.outputs", None, "write_items_csv", "items.csv"),
    ("ordmix_core.io", None, "write_csv", "other files"),
)


def measure_stages(path: str) -> dict:
    """``ordmix fit`` (the ``fit`` command) in this process, with a thread reading VmRSS every
    10 ms: the peak RSS of each stage (the innermost running labelled function, else the
    stage before). The sweeps are numba code that releases the GIL, so the polling thread
    runs beside them."""
    import functools
    import importlib
    import threading

    stack = ["start"]
    peaks: dict[str, float] = {}

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def poll() -> None:
        while True:
            label = stack[-1]
            peaks[label] = max(peaks.get(label, 0.0), rss_mb())
            time.sleep(0.01)

    def label(fn, name):
        @functools.wraps(fn)
        def wrapped(*a, **k):
            stack.append(name)
            try:
                return fn(*a, **k)
            finally:
                stack.pop()

        return wrapped

    for mod, cls, fn, name in STAGES:
        owner = importlib.import_module(mod)
        owner = getattr(owner, cls) if cls else owner
        setattr(owner, fn, label(getattr(owner, fn), name))
    from ordmix_core.cli.main import main

    threading.Thread(target=poll, daemon=True).start()
    out = os.path.join(os.path.dirname(os.path.abspath(path)), "bench_read_stages_out")
    args = ["fit", path, "--out", out, "--restarts", "1", "--max-iter", "5", "--tol", "0"]
    args += ["--granularity", "query", "--seed", "0", "--quiet"]
    t0 = time.perf_counter()
    code = main(args)
    wall = time.perf_counter() - t0
    time.sleep(0.05)
    return {
        "what": "stages",
        "exit": code,
        "wall_s": round(wall, 1),
        "load_avg": os.getloadavg()[0],
        "peak_rss_mb": round(_peak_mb()),
        "stage_peak_mb": {k: round(v) for k, v in peaks.items()},
    }


def measure_hash(path: str) -> dict:
    """The instance column coded both ways, warm (numba's first call excluded), CPU."""
    import numpy as np

    from ordmix_core.data import coding, id_hash
    from ordmix_core.io import read_arrow

    table, _ = read_arrow(path, large=False)
    col = table.column("instance")
    id_hash._load_kernels()
    res: dict = {"what": "hash", "load_avg": os.getloadavg()[0]}
    real = id_hash.sorted_codes
    for warm in (True, False):
        id_hash.sorted_codes = lambda arr: None  # pyarrow's hash and sort
        c0, w0 = time.process_time(), time.perf_counter()
        ref = coding._code_arrow(col)
        c1, w1 = time.process_time(), time.perf_counter()
        id_hash.sorted_codes = real
        fast = coding._code_arrow(col)
        c2, w2 = time.process_time(), time.perf_counter()
        if not warm:
            res.update(
                pyarrow_cpu_s=round(c1 - c0, 2),
                pyarrow_wall_s=round(w1 - w0, 2),
                idhash_cpu_s=round(c2 - c1, 2),
                idhash_wall_s=round(w2 - w1, 2),
                same=all(np.array_equal(a, b) for a, b in zip(ref, fast, strict=True)),
                n_distinct=len(ref[1]),
            )
    return res


def upload_bytes(n: int = 1_000_000) -> bytes:
    """The CSV of ``tests/pages/test_app_data.py::test_million_row_upload_is_handled``."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "annotator": np.char.add("w", rng.integers(0, 2000, n).astype(str)),
            "instance": np.char.add("i", rng.integers(0, 200_000, n).astype(str)),
            "rating": rng.integers(1, 6, n),
        }
    )
    return df.to_csv(index=False).encode()


def measure_upload(n: int) -> dict:
    from ordmix_core.data.crowd import normalize_columns, prepare
    from ordmix_core.io import read_table

    content = upload_bytes(n)
    t0, c0 = time.perf_counter(), time.process_time()
    table = read_table(content, "big.csv")
    t1 = time.perf_counter()
    renamed = table[["annotator", "instance", "rating"]]  # the page's column mapping
    df = normalize_columns(renamed, source="big.csv")
    data = prepare(df, None, granularity="instance", source="big.csv")
    t2, c2 = time.perf_counter(), time.process_time()
    return {
        "what": "upload",
        "rows": n,
        "read_table_s": round(t1 - t0, 2),
        "normalize_prepare_s": round(t2 - t1, 2),
        "total_s": round(t2 - t0, 2),
        "cpu_s": round(c2 - c0, 2),
        "load_avg": os.getloadavg()[0],
        "peak_rss_mb": round(_peak_mb()),
        "n_instances": data.n_instances,
    }


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ["write", "read", "fit", "fit-crowd", "stages", "upload", "hash", "all"]
    p.add_argument("what", choices=what)
    p.add_argument("path", nargs="?", help="the ratings CSV (written by `write`)")
    p.add_argument("--ratings", type=int, default=10_000_000, help="ratings to write")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the upload test")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.what != "upload" and not args.path:
        p.error(f"{args.what} needs the CSV path")
    if args.what == "write":
        res = write_ratings_csv(args.path, args.ratings, args.seed)
    elif args.what == "read":
        res = measure_read(args.path)
    elif args.what == "fit":
        res = measure_fit(args.path)
    elif args.what == "fit-crowd":
        res = measure_fit_crowd(args.path)
    elif args.what == "stages":
        res = measure_stages(args.path)
    elif args.what == "upload":
        res = measure_upload(args.rows)
    elif args.what == "hash":
        res = measure_hash(args.path)
    else:
        for what in ("read", "fit", "fit-crowd"):
            print(json.dumps(_child([what, args.path])), flush=True)
        res = _child(["upload", "--rows", str(args.rows)])
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
