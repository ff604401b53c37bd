"""The continuous fit's schedule scored on gold, leave-one-data-set-out.

Either how polished its start is (``--warmup-tol``: the warm-up's and the uniform-spam stage's
stopping tolerance, ``FitPolicy.warmup_tol``) or how many restarts race (``--restarts``:
``n_restarts``).

For each value of the grid and each real set (``../shared/data``: TREC RF10 at instance
and at query granularity, Web, adult-content2, metaphor-novelty), the default fit at seeds
0-3: the continuous fit's ``z_mean`` scored on gold (MSE), the winner's lower bound and the
sweeps of the whole fit (all restarts and stages). A looser start or fewer restarts can reach
another bound, but the bound is not the gold figure: the learned spam distribution can explain
a generous crowd as spam. For each data set left out (TREC's two fits together), the value
chosen on the others: of those whose mean MSE is within ``SLACK`` of the reference's on each
of them, the one with the fewest sweeps weighted by ratings. The left-out set is then scored with
it. The reference is the default's tolerance (``--warmup-tol``) or the most restarts of the
grid (``--restarts``: the widest search, which a cheaper count must match on gold).

``--simulated``: simulated crowds instead (``simulate_crowd``, 500 items, 30 annotators: the
defaults, half spammers, lenient and strict raters, 3 ratings an item), whose truth is known:
``z_mean``'s MSE to it, the bound and the sweeps at each value.

Usage (from the project root, ../shared beside it)::

    python benchmarks/schedule_on_gold.py --warmup-tol 1e-6,1e-4,3e-4 [--seeds 0,1,2,3]
    python benchmarks/schedule_on_gold.py --restarts 1,4,10 [--simulated]
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core import OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.io import read_gold, read_ratings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: name -> (folder, granularity); a name's part before "-" is its data set
SETS = {"trec": ("trec-rf10", "instance"), "trec-query": ("trec-rf10", "query"),
        "web": ("web-zhou2014", "instance"), "adult": ("adult-content2", "instance"),
        "metaphor": ("metaphor-novelty", "instance")}  # fmt: skip
#: name -> ``simulate_crowd`` arguments (``--simulated``)
SIMULATED = {
    "defaults": {},
    "half spammers": {"spammer_share": 0.5},
    "lenient and strict": {"bias_sd": 1.0},
    "3 ratings an item": {"ratings_per_item": 3},
}
#: a value is as good as the reference on a set when its mean MSE is within this of its
SLACK = 0.005


def fit_one(ratings: pd.DataFrame, seed: int, granularity: str, option: str, value: float):
    """The default fit of ``ratings`` with ``option`` (``warmup_tol`` or ``n_restarts``) at
    ``value``."""
    kw = {"n_restarts": int(value)} if option == "n_restarts" else {}
    if option == "warmup_tol":
        OrdinalMixture.fit_policy = dataclasses.replace(DEFAULT, warmup_tol=value)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return OrdinalMixture(random_state=seed, granularity=granularity, **kw).fit(ratings)
    finally:
        OrdinalMixture.fit_policy = DEFAULT


def load(folder: str) -> tuple[pd.DataFrame, pd.Series]:
    """A shared set's ratings and its gold (instance ID as text -> value)."""
    return read_ratings(DATA / folder / "ratings.csv"), read_gold(DATA / folder / "gold.csv")


def fits(
    ratings: pd.DataFrame,
    gold: pd.Series,
    granularity: str,
    option: str,
    value: float,
    seeds: list[int],
) -> dict:
    """At ``seeds`` with ``option`` (``warmup_tol`` or ``n_restarts``) at ``value``: each fit's
    ``z_mean`` MSE on ``gold``, the winner's bound and the sweeps; and the set's ratings."""
    out: dict = {"mse": [], "bound": [], "sweeps": [], "ratings": len(ratings)}
    for seed in seeds:
        m = fit_one(ratings, seed, granularity, option, value)
        z = m.items_["z_mean"].rename(index=str)
        rated = gold[gold.index.isin(z.index)]
        out["mse"].append(float(np.mean((z[rated.index].to_numpy() - rated.to_numpy()) ** 2)))
        out["bound"].append(float(m.lower_bound_))
        out["sweeps"].append(len(m.trace_))
    return out


def simulated(option: str, grid: list[float], seeds: list[int]) -> None:
    """``--simulated``: each crowd of ``SIMULATED`` at ``seeds`` (crowd and fit), each value."""
    print(f"{option}, simulated crowds (500 items, 30 annotators)\n")
    print("| crowd | " + " | ".join(f"{v:g}: MSE / bound / sweeps" for v in grid) + " |")
    print("|---" * (len(grid) + 1) + "|")
    for name, kw in SIMULATED.items():
        cells = []
        for v in grid:
            r: dict = {"mse": [], "bound": [], "sweeps": []}
            for seed in seeds:
                sim = simulate_crowd(500, 30, random_state=seed, **kw)
                m = fit_one(sim.ratings, seed, "instance", option, v)
                z = m.items_["z_mean"].reindex(sim.truth.index)
                r["mse"].append(float(np.mean((z - sim.truth) ** 2)))
                r["bound"].append(float(m.lower_bound_))
                r["sweeps"].append(len(m.trace_))
            cells.append(cell(r))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nmeans over seeds {seeds}; sweeps summed over them")


def chosen(table: dict, names: list[str], grid: list[float], reference: float) -> float:
    """Of the values whose mean MSE is within ``SLACK`` of ``reference``'s on every one of
    ``names``, the one with the fewest sweeps weighted by ratings there."""

    def ok(v: float) -> bool:
        return all(
            np.mean(table[n][v]["mse"]) <= np.mean(table[n][reference]["mse"]) + SLACK
            for n in names
        )

    def cost(v: float) -> float:
        return sum(np.sum(table[n][v]["sweeps"]) * table[n][v]["ratings"] for n in names)

    return min((v for v in grid if ok(v)), key=cost)


def cell(r: dict) -> str:
    return f"{np.mean(r['mse']):.3f} / {np.mean(r['bound']):,.0f} / {sum(r['sweeps']):,}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--warmup-tol", help="tolerances, e.g. 1e-6,1e-4,3e-4")
    which.add_argument("--restarts", help="restart counts, e.g. 1,4,10")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--simulated", action="store_true", help="simulated crowds instead")
    a = ap.parse_args()
    option, values = ("warmup_tol", a.warmup_tol) if a.warmup_tol else ("n_restarts", a.restarts)
    grid = [float(v) for v in values.split(",")]
    reference = float(DEFAULT.warmup_tol) if a.warmup_tol else max(grid)
    if reference not in grid:
        ap.error(f"the grid must hold the default, {reference:g}")
    seeds = [int(v) for v in a.seeds.split(",")]
    if a.simulated:
        simulated(option, grid, seeds)
        return
    table = {}
    for name, (folder, granularity) in SETS.items():
        ratings, gold = load(folder)
        table[name] = {v: fits(ratings, gold, granularity, option, v, seeds) for v in grid}
    print(f"{option}; the reference {reference:g}\n")
    print("| set | " + " | ".join(f"{v:g}: MSE / bound / sweeps" for v in grid) + " |")
    print("|---" * (len(grid) + 1) + "|")
    for name in SETS:
        print(f"| {name} | " + " | ".join(cell(table[name][v]) for v in grid) + " |")
    print("\n| left out | chosen on the others | its MSE / bound / sweeps | the reference's |")
    print("|---|---|---|---|")
    for base in dict.fromkeys(n.partition("-")[0] for n in SETS):
        v = chosen(table, [n for n in SETS if n.partition("-")[0] != base], grid, reference)
        for name in (n for n in SETS if n.partition("-")[0] == base):
            print(f"| {name} | {v:g} | {cell(table[name][v])} | "
                  f"{cell(table[name][reference])} |")  # fmt: skip
    print(f"\nmeans over seeds {seeds}; sweeps summed over them (all restarts and stages)")


if __name__ == "__main__":
    main()
