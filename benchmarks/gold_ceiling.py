"""How far gold could lower the label error of the confusion model, given all of it.

    python benchmarks/gold_ceiling.py trec-rf10 web-zhou2014 [--data ../shared/data]

The gold target (10% of the gold lowering the label error on the rest) asks what gold can
teach the labels' model (``results/label_model.py``). This measures the ceiling of that model
family with every gold item given and scored in-sample (an upper bound on what any share of
gold can do, since a held-out score can only be worse):

- ``no gold``: ``fit_levels`` on the ratings, label = most probable level;
- ``gold map``: ``results/gold_map.py``'s map on the posterior alone (the fit's own uses the
  unweighted posterior and the continuous estimate too, which this script does not fit),
  with its ridge, fitted on all gold, applied to all items;
- ``K x K map``: a full linear map of the log level probabilities plus offsets (multinomial
  logistic regression, no ridge), fitted on all gold;
- ``matrices from gold``: the annotators' confusion matrices learned with every gold level
  imposed, each item then decoded from its own ratings (``unclamped``);
- ``both``: those matrices' decoding, then the K x K map on top.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from scipy.optimize import minimize

from ordmix_core.data.crowd import prepare
from ordmix_core.io import read_gold, read_ratings
from ordmix_core.results import gold_map
from ordmix_core.results import label_model as lm

HERE = os.path.dirname(os.path.abspath(__file__))


def gold_levels(data, gold) -> np.ndarray:
    """(M,) level index of each rated gold item (nearest level), -1 elsewhere."""
    g = gold.reindex(data.instances).to_numpy(dtype=float)
    lev = np.full(len(g), -1)
    ok = np.isfinite(g)
    lev[ok] = np.abs(g[ok][:, None] - data.scale.values[None, :]).argmin(axis=1)
    return lev


def error(q: np.ndarray, lev: np.ndarray) -> float:
    ok = lev >= 0
    return float((q[ok].argmax(axis=1) != lev[ok]).mean())


def full_map(q: np.ndarray, lev: np.ndarray) -> np.ndarray:
    """softmax(log q @ W + b) with (W, b) fitted on the gold items by maximum likelihood."""
    k = q.shape[1]
    ok = lev >= 0
    x_all = np.log(np.clip(q, 1e-300, 1.0))
    x, y = x_all[ok], lev[ok]
    rows = np.arange(len(y))

    def loss(w: np.ndarray) -> float:
        z = x @ w[: k * k].reshape(k, k) + w[k * k :]
        z = z - z.max(axis=1, keepdims=True)
        return float(-(z[rows, y] - np.log(np.exp(z).sum(axis=1))).sum())

    w = minimize(loss, np.r_[np.eye(k).ravel(), np.zeros(k)], method="L-BFGS-B").x
    z = x_all @ w[: k * k].reshape(k, k) + w[k * k :]
    return np.exp(z - z.max(axis=1, keepdims=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    args = ap.parse_args()
    print("| data | no gold | gold map | K x K map | matrices from gold | both |")
    print("|---|---|---|---|---|---|")
    for name in args.sets:
        folder = os.path.join(args.data, name)
        d = prepare(read_ratings(os.path.join(folder, "ratings.csv")))
        lev = gold_levels(d, read_gold(os.path.join(folder, "gold.csv")))
        fit = lm.fit_levels(d.ann, d.inst, d.level, d.n_annotators, d.n_instances, d.scale.k)
        ok = lev >= 0
        base = np.log(np.clip(fit.q, 1e-300, 1.0))
        x = gold_map.evidence(base)
        calibrated = np.exp(gold_map.fit(base[ok], x[ok], lev[ok]).log_proba(base, x))
        taught = lm.fit_levels(
            d.ann, d.inst, d.level, d.n_annotators, d.n_instances, d.scale.k, gold=lev
        )
        own = lm.unclamped(taught, d.ann, d.inst, d.level, d.n_instances)
        maps = (fit.q, calibrated, full_map(fit.q, lev), own, full_map(own, lev))
        row = [error(q, lev) for q in maps]
        print(f"| {name} | " + " | ".join(f"{e:.3f}" for e in row) + " |", flush=True)


if __name__ == "__main__":
    main()
