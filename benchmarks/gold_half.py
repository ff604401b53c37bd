"""Fit with half of the gold (seed 0 split), score on the other half; the same without gold.

    python benchmarks/gold_half.py web-zhou2014 trec-rf10 [--data ../shared/data]

The gold check: for each data set, the default and the paper's model, each fitted
without gold and with the seed-0 half of the rated gold items, scored on the other half.
"""

import os
import sys
import time
import warnings

import numpy as np

from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.evaluation.metrics import evaluate
from ordmix_core.io import read_gold, read_ratings

warnings.simplefilter("ignore")
args = sys.argv[1:]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
if "--data" in args:
    i = args.index("--data")
    DATA = args[i + 1]
    del args[i : i + 2]
for name in args:
    d = os.path.join(DATA, name)
    r = read_ratings(f"{d}/ratings.csv")
    g = read_gold(f"{d}/gold.csv")
    g = g[g.index.isin(r["instance"].astype(str).unique())]
    rng = np.random.default_rng(0)
    use = rng.permutation(len(g)) < len(g) // 2
    g_fit, g_test = g[use], g[~use]
    levels = np.unique(r["rating"].to_numpy(float))
    for model in ("extended", "paper"):
        for with_gold in (False, True):
            t = time.time()
            m = OrdinalMixture(model=model, random_state=0).fit(
                r, gold=g_fit if with_gold else None
            )
            s = evaluate(m.estimates_, g_test, levels=levels)
            print(
                f"{name} {model:8s} gold={with_gold!s:5s} mse {s['mse']:.4f} "
                f"r {s['correlation']:.4f} "
                f"ndcg {s['ndcg']:.4f} "
                f"label_err {s['label_error']:.4f} n_test {s['n_gold']} "
                f"spam {1 - np.mean(m.omega_):.3f} ({time.time() - t:.0f} s)",
                flush=True,
            )
