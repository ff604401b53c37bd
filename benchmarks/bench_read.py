"""Reading and coding a big ratings file: the CLI's read path, a whole small fit, an upload.

    python benchmarks/bench_read.py write /tmp/r10m.csv --ratings 10000000
    python benchmarks/bench_read.py read /tmp/r10m.csv     # read_ratings + crowd_from_coded
    python benchmarks/bench_read.py fit /tmp/r10m.csv      # `ordmix fit`, 1 restart, 5 sweeps
    python benchmarks/bench_read.py fit-crowd /tmp/r10m.csv  # that fit from io.read_crowd
    python benchmarks/bench_read.py stages /tmp/r10m.csv   # `ordmix fit`'s peak RSS by stage
    python benchmarks/bench_read.py upload --rows 1000000  # the dashboard's upload read path
    python benchmarks/bench_read.py hash /tmp/r10m.csv     # instance coding: pyarrow vs radix
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
builds the 1,000,000-row frame of ``tests/test_app_data.py``'s upload test and times what
the Data page does with it outside Streamlit: ``io.read_table`` on the bytes, then
``data.normalize_columns`` + ``data.prepare`` (``app.make_dataset``'s engine calls).
``hash`` codes the instance column twice, as ``data`` does today (pyarrow's hash, then sorting
the distinct IDs) and with a prototype for the next round (IDs of at most 16 bytes packed as
big-endian integer keys, rows scattered into 1,024 partitions by hash so that each partition's
table stays in cache, the distinct keys sorted with ``np.lexsort``), checks that both give the
same sorted dictionary, and reports CPU per step (the numba steps after a warm-up call).
Each measurement runs in its own process (``resource.getrusage``: peak RSS of that run only);
``ordmix_core`` is whatever ``PYTHONPATH`` points at, so the same script measures two trees.
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
    from ordmix_core.data import crowd_from_coded
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
        "import sys; from ordmix_core.cli import main; sys.exit(main())",
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
        "from ordmix_core.model import OrdinalMixture\n"
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
    ("ordmix_core.data", None, "crowd_from_coded", "crowd_from_coded"),
    ("ordmix_core.model", "_MemorySweeps", "sweep", "sweep"),
    ("ordmix_core.model", "_MemorySweeps", "propose", "squarem proposal"),
    ("ordmix_core.model", "_MemorySweeps", "sweep_proposal", "sweep from the proposal"),
    ("ordmix_core.model", "OrdinalMixture", "_store", "learned attributes"),
    ("ordmix_core.decisions", None, "annotator_flags", "spam decision's flags"),
    ("ordmix_core.outputs", None, "write_items_csv", "items.csv"),
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
    from ordmix_core.cli import main

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


def _radix_kernels():
    """The prototype's two numba passes (``hash``): packed keys and partition of each row;
    codes (first appearance within partitions), distinct keys and their first rows."""
    import numpy as np
    from numba import njit

    U = np.uint64
    P_BITS = 10

    @njit(cache=True, nogil=True)
    def keys_and_parts(off, data, k0s, k1s, lens, part):
        n = off.size - 1
        for i in range(n):
            a = off[i]
            b = off[i + 1]
            k0 = U(0)
            k1 = U(0)
            for p in range(a, min(b, a + 8)):
                k0 |= U(data[p]) << U(8 * (7 - (p - a)))
            for p in range(a + 8, b):
                k1 |= U(data[p]) << U(8 * (15 - (p - a)))
            ln = U(b - a + 1)
            h = (k0 ^ (k1 * U(0x9E3779B97F4A7C15)) ^ ln) * U(0xBF58476D1CE4E5B9)
            h ^= h >> U(31)
            k0s[i] = k0
            k1s[i] = k1
            lens[i] = np.uint32(b - a + 1)
            part[i] = np.uint32(h >> U(64 - P_BITS))

    @njit(cache=True, nogil=True)
    def encode_parts(k0s, k1s, lens, part):
        n = k0s.size
        P = 1 << P_BITS
        cnt = np.zeros(P + 1, np.int64)
        for i in range(n):
            cnt[part[i] + 1] += 1
        start = np.cumsum(cnt)
        pos = start[:-1].copy()
        perm = np.empty(n, np.int32)
        for i in range(n):
            p = part[i]
            perm[pos[p]] = i
            pos[p] += 1
        codes = np.empty(n, np.int32)
        uk0 = np.empty(n // 2 + 16, np.uint64)
        uk1 = np.empty_like(uk0)
        ul = np.empty(uk0.size, np.uint32)
        first = np.empty(uk0.size, np.int64)
        u = 0
        maxc = 0
        for p in range(P):
            maxc = max(maxc, start[p + 1] - start[p])
        cap = 1
        while cap < 2 * maxc:
            cap *= 2
        table = np.full(cap, -1, np.int32)
        for p in range(P):
            s0 = start[p]
            s1 = start[p + 1]
            c = 1
            while c < 2 * (s1 - s0):
                c *= 2
            m = c - 1
            for j in range(s0, s1):
                i = perm[j]
                k0 = k0s[i]
                k1 = k1s[i]
                ln = lens[i]
                h = (k0 ^ (k1 * U(0x9E3779B97F4A7C15)) ^ U(ln)) * U(0xC2B2AE3D27D4EB4F)
                s = np.int64(h >> U(40)) & m
                while True:
                    k = table[s]
                    if k < 0:
                        table[s] = u
                        uk0[u] = k0
                        uk1[u] = k1
                        ul[u] = ln
                        first[u] = i
                        codes[i] = u
                        u += 1
                        break
                    if uk0[k] == k0 and uk1[k] == k1 and ul[k] == ln:
                        codes[i] = k
                        break
                    s = (s + 1) & m
            table[:c] = -1
        return codes, uk0[:u], uk1[:u], ul[:u], first[:u]

    return keys_and_parts, encode_parts


def measure_hash(path: str) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ordmix_core.io import read_arrow

    table, _ = read_arrow(path, large=False)
    col = table.column("instance")
    keys_and_parts, encode_parts = _radix_kernels()
    res: dict = {"what": "hash", "load_avg": os.getloadavg()[0]}
    for warm in (True, False):  # the first round compiles the numba passes
        c0 = time.process_time()
        enc = pc.dictionary_encode(col)
        dictionary = enc.chunks[-1].dictionary
        c1 = time.process_time()
        ref = dictionary.take(pc.sort_indices(dictionary))
        c2 = time.process_time()
        n = len(col)
        k0s, k1s = np.empty(n, np.uint64), np.empty(n, np.uint64)
        lens, part = np.empty(n, np.uint32), np.empty(n, np.uint32)
        o = 0
        for ch in col.chunks:
            off = np.frombuffer(ch.buffers()[1], np.int32)[ch.offset : ch.offset + len(ch) + 1]
            data = np.frombuffer(ch.buffers()[2], np.uint8)
            sl = slice(o, o + len(ch))
            keys_and_parts(off, data, k0s[sl], k1s[sl], lens[sl], part[sl])
            o += len(ch)
        c3 = time.process_time()
        _, uk0, uk1, ul, first = encode_parts(k0s, k1s, lens, part)
        c4 = time.process_time()
        order = np.lexsort((ul, uk1, uk0))
        c5 = time.process_time()
        if not warm:
            res.update(
                pyarrow_hash_cpu_s=round(c1 - c0, 2),
                pyarrow_sort_cpu_s=round(c2 - c1, 2),
                radix_keys_cpu_s=round(c3 - c2, 2),
                radix_hash_cpu_s=round(c4 - c3, 2),
                radix_lexsort_cpu_s=round(c5 - c4, 2),
                same=bool(col.combine_chunks().take(pa.array(first[order])).equals(ref)),
                n_distinct=len(ref),
            )
    return res


def upload_bytes(n: int = 1_000_000) -> bytes:
    """The CSV of ``tests/test_app_data.py::test_million_row_upload_is_handled``."""
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
    from ordmix_core.data import normalize_columns, prepare
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
