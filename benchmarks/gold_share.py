"""What a share of the gold given to the fit does to the labels of the other items.

    python benchmarks/gold_share.py trec-rf10 web-zhou2014 [--shares 0.1,0.05,0.02]
        [--draws 5] [--data ../shared/data]

For each data set, share and draw: the rated gold items drawn with
``numpy.random.default_rng(draw).permutation`` (the first ``share`` of them) are given to
``OrdinalMixture(random_state=0).fit(ratings, gold=...)`` (what ``ordmix fit --seed 0 --gold``
runs); the other gold items are scored (label error, calibration error and log loss of
``labels_`` and ``probas_``, MSE of the estimate, ``metrics.evaluate``) against the same fit
without gold. The gold target: 10% of TREC RF10's gold at draw 0 lowers the label error on the
rest by 0.03 or more (``docs/results.md``).
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np

from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.evaluation.metrics import evaluate
from ordmix_core.io import read_gold, read_ratings

HERE = os.path.dirname(os.path.abspath(__file__))


def scores(m: OrdinalMixture, test, levels: np.ndarray) -> dict:
    idx = test.index
    return evaluate(
        m.estimates_.reindex(idx), test, None, levels=levels,
        proba=m.probas_.reindex(idx), labels=m.labels_.reindex(idx),
    )  # fmt: skip


def fit(ratings, gold=None) -> OrdinalMixture:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # convergence notes
        warnings.simplefilter("error", category=RuntimeWarning)  # a numpy warning fails
        return OrdinalMixture(random_state=0).fit(ratings, gold=gold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--shares", default="0.1,0.05,0.02")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    args = ap.parse_args()
    print("| data | share | draw | gold items | label error | calibration error | log loss | MSE |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.sets:
        folder = os.path.join(args.data, name)
        r = read_ratings(os.path.join(folder, "ratings.csv"))
        g = read_gold(os.path.join(folder, "gold.csv"))
        g = g[g.index.isin(r["instance"].astype(str).unique())]
        levels = np.unique(r["rating"].to_numpy(float))
        without = fit(r)
        for share in (float(s) for s in args.shares.split(",")):
            for draw in range(args.draws):
                use = np.random.default_rng(draw).permutation(len(g)) < int(len(g) * share)
                before = scores(without, g[~use], levels)
                after = scores(fit(r, g[use]), g[~use], levels)
                cells = [
                    f"{before[k]:.4f} -> {after[k]:.4f}"
                    for k in ("label_error", "calibration_error", "log_loss", "mse")
                ]
                row = f"| {name} | {share:g} | {draw} | {int(use.sum())} | "
                print(row + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
