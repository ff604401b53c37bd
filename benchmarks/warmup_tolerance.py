"""How polished the mixture's start should be: the warm-up's and the uniform-spam stage's
stopping tolerance (``FitPolicy.warmup_tol``), leave-one-data-set-out.

For each tolerance of ``--grid`` and each real set (``../shared/data``: TREC RF10 at instance
and at query granularity, Web, adult-content2, metaphor-novelty), the default fit at seeds
0-3: the continuous fit's ``z_mean`` scored on gold (MSE), the winner's lower bound and the
sweeps of the whole fit (all restarts and stages). A looser start reaches higher bounds, but
the bound is not the gold figure: the learned spam distribution can explain a generous crowd as
spam. For each data set left out (TREC's two fits together), the tolerance chosen on the
others: of those whose mean MSE is within ``SLACK`` of the tightest tolerance's on each of
them, the one with the fewest sweeps weighted by ratings. The left-out set is then scored
with it.

Usage (from the project root, ../shared beside it)::

    python benchmarks/warmup_tolerance.py [--grid 1e-6,1e-4,3e-4] [--seeds 0,1,2,3]
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core import OrdinalMixture
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.io import read_ratings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: name -> (folder, granularity); a name's part before "-" is its data set
SETS = {"trec": ("trec-rf10", "instance"), "trec-query": ("trec-rf10", "query"),
        "web": ("web-zhou2014", "instance"), "adult": ("adult-content2", "instance"),
        "metaphor": ("metaphor-novelty", "instance")}  # fmt: skip
#: a tolerance is as good as the tightest on a set when its mean MSE is within this
SLACK = 0.005


def fits(folder: str, granularity: str, tol: float, seeds: list[int]) -> dict:
    """At ``seeds`` with ``warmup_tol = tol``: each fit's ``z_mean`` MSE on gold, the winner's
    bound and the sweeps; and the set's ratings."""
    ratings = read_ratings(DATA / folder / "ratings.csv")
    gold = pd.read_csv(DATA / folder / "gold.csv", dtype={"instance": str})
    gold = gold.set_index("instance")["truth"].astype(float)
    OrdinalMixture.fit_policy = dataclasses.replace(DEFAULT, warmup_tol=tol)
    out: dict = {"mse": [], "bound": [], "sweeps": [], "ratings": len(ratings)}
    try:
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = OrdinalMixture(random_state=seed, granularity=granularity).fit(ratings)
            z = m.items_["z_mean"].rename(index=str)
            rated = gold[gold.index.isin(z.index)]
            out["mse"].append(float(np.mean((z[rated.index].to_numpy() - rated.to_numpy()) ** 2)))
            out["bound"].append(float(m.lower_bound_))
            out["sweeps"].append(len(m.trace_))
    finally:
        OrdinalMixture.fit_policy = DEFAULT
    return out


def chosen(table: dict, names: list[str], grid: list[float]) -> float:
    """Of the tolerances whose mean MSE is within ``SLACK`` of the tightest's on every one of
    ``names``, the one with the fewest sweeps weighted by ratings there."""
    tight = min(grid)

    def ok(tol: float) -> bool:
        return all(
            np.mean(table[n][tol]["mse"]) <= np.mean(table[n][tight]["mse"]) + SLACK for n in names
        )

    def cost(tol: float) -> float:
        return sum(np.sum(table[n][tol]["sweeps"]) * table[n][tol]["ratings"] for n in names)

    return min((tol for tol in grid if ok(tol)), key=cost)


def cell(r: dict) -> str:
    return f"{np.mean(r['mse']):.3f} / {np.mean(r['bound']):,.0f} / {sum(r['sweeps']):,}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="1e-6,1e-4,3e-4")
    ap.add_argument("--seeds", default="0,1,2,3")
    a = ap.parse_args()
    grid = [float(v) for v in a.grid.split(",")]
    seeds = [int(v) for v in a.seeds.split(",")]
    table = {name: {tol: fits(*where, tol, seeds) for tol in grid} for name, where in SETS.items()}
    print("| set | " + " | ".join(f"{tol:g}: MSE / bound / sweeps" for tol in grid) + " |")
    print("|---" * (len(grid) + 1) + "|")
    for name in SETS:
        print(f"| {name} | " + " | ".join(cell(table[name][tol]) for tol in grid) + " |")
    print("\n| left out | chosen on the others | its MSE / bound / sweeps | the tightest's |")
    print("|---|---|---|---|")
    for base in dict.fromkeys(n.partition("-")[0] for n in SETS):
        tol = chosen(table, [n for n in SETS if n.partition("-")[0] != base], grid)
        for name in (n for n in SETS if n.partition("-")[0] == base):
            print(f"| {name} | {tol:g} | {cell(table[name][tol])} | "
                  f"{cell(table[name][min(grid)])} |")  # fmt: skip
    print(f"\nmeans over seeds {seeds}; sweeps summed over them (all restarts and stages)")


if __name__ == "__main__":
    main()
