"""Where a TREC process's time goes: the default fit through the API, timed inside.

    python benchmarks/process_timeline.py [ratings.csv] [--repeats 3]

Each repeat is a fresh child process that imports pandas and ordmix, reads the CSV with
``pandas.read_csv`` and fits ``OrdinalMixture(random_state=0)``, with timers around each step
and around ``race.race``; the parent adds the interpreter's exit (from the child's last
timestamp to its end). Default: the shared TREC RF10 ratings.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREC = os.path.join(HERE, "..", "..", "shared", "data", "trec-rf10", "ratings.csv")

CHILD = """
import sys, time
t0 = time.perf_counter()
import pandas as pd
t1 = time.perf_counter()
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.fit import race as fit_race
t2 = time.perf_counter()
df = pd.read_csv(sys.argv[1], dtype={"annotator": str, "instance": str, "query": str})
t3 = time.perf_counter()
marks, race = {}, fit_race.race
def timed(*a, **k):
    marks[0] = time.perf_counter()
    try:
        return race(*a, **k)
    finally:
        marks[1] = time.perf_counter()
fit_race.race = timed
OrdinalMixture(random_state=0).fit(df)
t4 = time.perf_counter()
print(f"pandas {t1 - t0:.2f}  ordmix import {t2 - t1:.2f}  read {t3 - t2:.2f}  fit {t4 - t3:.2f}"
      f" (before the race {marks[0] - t3:.2f}, race {marks[1] - marks[0]:.2f},"
      f" after it {t4 - marks[1]:.2f})")
print(time.time(), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ratings", nargs="?", default=TREC)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    for _ in range(a.repeats):
        start = time.time()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, a.ratings], capture_output=True, text=True, check=True
        ).stdout.split("\n")
        end = time.time()
        print(f"{out[0]}  exit {end - float(out[1]):.2f}  whole process {end - start:.2f}")


if __name__ == "__main__":
    main()
