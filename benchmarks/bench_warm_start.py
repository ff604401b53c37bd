"""Daily refits: a warm start from yesterday's fit against a fit from scratch.

10% of the ratings arrive late: the last 10% in file order (``file``), or a random 10%
(``random``, seed 1). Yesterday: the extended model's fit with ten restarts
(``OrdinalMixture(random_state=0, n_restarts=10)``: the default races the data start alone,
and its refit yesterday's start alone) of the other 90%, written as an ``ordmix fit`` folder.
Today, on all the ratings: the same fit from scratch; the refit ``init_from=<yesterday's
folder>`` (= ``ordmix fit ... --warm-start DIR``: the race of ``warm.refit_starts``); the same with
``n_restarts=1`` (yesterday's start alone); and a control refit from today's own folder (no
new ratings). Sweeps count every sweep of every restart and stage, on both sides; a refit
"reaches" the from-scratch bound when its bound is at least that bound minus ``tol`` (relative:
``tol * |bound|`` nats).

Reports bounds, sweeps (in all, per start, and until the refit first reaches the from-scratch
bound: ``sweeps_to_reach``), wall seconds with the load average (the machine may be shared:
times are noisy, sweeps are not), gold MSE, and how far each answer is from yesterday's and
from today's fit from scratch: annotators on the other side of reliability 1/2, the
correlation of the estimates, their largest and mean difference. The control refits from
today's own folder (``control``: the race; ``control_alone``: ``n_restarts=1``, which
continues the from-scratch answer itself) show what a refit costs with no new ratings.
``--sim`` adds simulated crowds (``simulate_crowd`` with bias and favourite-answer spammers, a
random 10% late).

    python benchmarks/bench_warm_start.py [--split file random] [--sim] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core import io as oio
from ordmix_core.data.crowd import prepare
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators import refit as warm
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.fit import restarts
from ordmix_core.results.outputs import write_fit_outputs

ROOT = Path(__file__).resolve().parents[1]
RATINGS = ROOT / "demo_data" / "trec-rf10-ratings.csv"
GOLD = ROOT / "demo_data" / "trec-rf10-gold.csv"
#: the simulated crowds of ``--sim``: (items, annotators, seed); the first is the larger one
SIM_CROWDS = [(2000, 60, 7), *(((600, 30) if s % 2 else (1500, 50)) + (s,) for s in range(1, 9))]


def late_split(ratings: pd.DataFrame, how: str, late: float = 0.1, seed: int = 1) -> pd.DataFrame:
    """The ratings known yesterday: all but the last ``late`` share in file order (``file``)
    or all but a random ``late`` share (``random``), in file order."""
    n = int(round((1.0 - late) * len(ratings)))
    if how == "file":
        return ratings.iloc[:n]
    keep = np.sort(np.random.default_rng(seed).permutation(len(ratings))[:n])
    return ratings.iloc[keep]


def gold_mse(model: OrdinalMixture, gold: pd.Series) -> float:
    est = model.estimates_.reindex(gold.index).dropna()
    return float(((est - gold.reindex(est.index)) ** 2).mean())


def timed_fit(ratings: pd.DataFrame, **kw) -> tuple[OrdinalMixture, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = OrdinalMixture(random_state=0, **{"n_restarts": 10, **kw}).fit(ratings)
    return m, time.perf_counter() - t0


def save(model: OrdinalMixture, folder: Path) -> str:
    folder.mkdir(parents=True)
    write_fit_outputs(model, folder, settings={})
    return str(folder)


def sweeps_to_reach(model: OrdinalMixture, target: float) -> int | None:
    """Sweeps of all the model's restarts until the first of them reaches ``target`` (they
    race in lockstep rounds: when one reaches it at its sweep k, each has run at most k; as
    ``tests/estimators/test_refit.py``'s ``_sweeps_to_reach``); None if none does."""
    per = [g.loc[g["stage"] == g["stage"].iloc[-1], "lower_bound"].to_numpy()
           for _, g in model.trace_.groupby("restart")]  # fmt: skip
    hits = [int(np.argmax(f >= target)) + 1 for f in per if (f >= target).any()]
    if not hits:
        return None
    earlier = len(model.trace_) - sum(len(f) for f in per)  # warm-up, uniform stage
    return earlier + sum(min(len(f), min(hits)) for f in per)


def estimate_diff(model: OrdinalMixture, other: OrdinalMixture) -> dict:
    """How far ``model``'s estimates are from ``other``'s on the items both have: the largest
    and the mean absolute difference, and how many items differ by more than 0.1."""
    d = (model.estimates_ - other.estimates_.reindex(model.estimates_.index)).abs().dropna()
    return {"max": round(float(d.max()), 4), "mean": round(float(d.mean()), 4),
            "over_0.1": int((d > 0.1).sum())}  # fmt: skip


def moved(model: OrdinalMixture, other: OrdinalMixture) -> tuple[int, float]:
    """How far ``model``'s answer is from ``other``'s: annotators (of ``other``'s) on the
    other side of reliability 1/2, correlation of the estimates of ``other``'s items."""
    ann = other.annotators_.index
    side = model.annotators_["reliability"].reindex(ann) >= 0.5
    side_o = other.annotators_["reliability"] >= 0.5
    est = model.estimates_.reindex(other.estimates_.index)
    corr = float(np.corrcoef(est, other.estimates_)[0, 1])
    return int((side != side_o).sum()), round(corr, 4)


#: starts tried for the refit and not kept (one run each, alone): what each changes in
#: ``warm.warm_state``'s start
TRIED = {
    "previous": "yesterday's posteriors (= n_restarts=1)",
    "eps-0.99": "every eps at 0.99 (the from-scratch mixture's start)",
    "eps-0.99-new": "eps at 0.99 for annotators with new ratings",
    "eps-flip": "eps < 0.5 set to 0.9 (spammers given a second chance)",
    "z-new-bias-corrected": "new items' q(z) from their raters' bias-corrected ratings, "
    "weighted by yesterday's eps E[tau] E[delta]",
    "z-all-bias-corrected": "every item's q(z) so",
    "z-data": "every item's q(z) from the data (a start the race keeps)",
    "eps-0.99+z-data": "both",
}


def tried(ratings: pd.DataFrame, yesterday_ratings: pd.DataFrame, before: str, scratch:
          OrdinalMixture, gold: pd.Series) -> dict:  # fmt: skip
    """One run from each ``TRIED`` start: bound minus the from-scratch bound, sweeps, MSE."""
    m = OrdinalMixture(random_state=0, init_from=before)
    data = prepare(ratings, None, granularity=m.granularity)
    p, _ = m._problem(data.scale, np.bincount(data.ann), data.n_categories)
    p = p.with_ratings(data.ann, data.inst, data.cat, data.level, data.n_instances)
    _, fresh = m._initial_state(data, p, 0, np.random.default_rng(0))
    prev = warm.load_previous(before)
    base = warm.warm_state(prev, data, p, fresh)
    late = ratings.loc[ratings.index.difference(yesterday_ratings.index), "annotator"]
    with_new = np.zeros(data.n_annotators, bool)
    with_new[pd.Index(data.annotators).astype(str).get_indexer(late.astype(str))] = True
    new_items = ~pd.Index(data.instances).astype(str).isin(prev.items.index)
    out = {}
    for name in TRIED:
        s = base.copy()
        if name.startswith("eps-0.99"):
            s.eps[with_new if name == "eps-0.99-new" else slice(None)] = 0.99
        if name == "eps-flip":
            s.eps = np.where(s.eps < 0.5, 0.9, s.eps)
        if name.endswith("z-data"):
            s.mu_m, s.lam_m = fresh.mu_m.copy(), fresh.lam_m.copy()
        if name.endswith("bias-corrected"):
            w = s.eps[data.ann] * (s.tau_shape / s.tau_rate)[data.ann]
            w = w * (s.delta_shape / s.delta_rate)[data.cat]
            x = data.scale.values[data.level] - s.bias_mean[data.ann]
            lam = p.lam + np.bincount(data.inst, weights=w, minlength=data.n_instances)
            mu = (p.mu * p.lam + np.bincount(data.inst, w * x, data.n_instances)) / lam
            at = new_items if name.startswith("z-new") else slice(None)
            s.mu_m[at], s.lam_m[at] = mu[at], lam[at]
        one = restarts.RestartRun(0, name, s)
        with warnings.catch_warnings(), np.errstate(over="ignore", under="ignore"):
            warnings.simplefilter("ignore")
            m._race(p, [one], None)
        est = pd.Series(one.state.mu_m, index=pd.Index(data.instances).astype(str))
        est = est.reindex(gold.index).dropna()
        out[name] = {
            "minus_scratch": round(one.lower_bound - scratch.lower_bound_, 1),
            "sweeps": len(one.trace),
            "gold_mse": round(float(((est - gold.reindex(est.index)) ** 2).mean()), 4),
        }
    return out


def run(name: str, ratings: pd.DataFrame, yesterday_ratings: pd.DataFrame, gold: pd.Series,
        folder: Path, control: bool = True, try_starts: bool = False) -> dict:  # fmt: skip
    load0 = os.getloadavg()[0]
    yesterday, _ = timed_fit(yesterday_ratings)
    before = save(yesterday, folder / f"yesterday-{name}")
    scratch, t_scratch = timed_fit(ratings)
    refit, t_refit = timed_fit(ratings, init_from=before)
    alone, t_alone = timed_fit(ratings, init_from=before, n_restarts=1)
    target = scratch.lower_bound_ - scratch.tol * abs(scratch.lower_bound_)  # tol: relative
    n = len(scratch.trace_)

    def row(m: OrdinalMixture, t: float) -> dict:
        return {
            "bound": round(m.lower_bound_, 1),
            "minus_scratch": round(m.lower_bound_ - scratch.lower_bound_, 1),
            "reaches": bool(m.lower_bound_ >= target),
            "sweeps": len(m.trace_),
            "share_of_scratch_sweeps": round(len(m.trace_) / n, 3),
            "sweeps_to_reach": sweeps_to_reach(m, target),
            "sweeps_per_start": [
                f"{r.init}:{r.n_iter}" + (" (pruned)" if r.dropped else "")
                for r in m.restarts_.itertuples()
            ],
            "estimates_vs_scratch": estimate_diff(m, scratch),
            "winner": str(m.restarts_.loc[m.best_restart_, "init"]),
            "seconds": round(t, 1),
            "gold_mse": round(gold_mse(m, gold), 4),
            "sides_changed_vs_yesterday": moved(m, yesterday)[0],
            "correlation_vs_yesterday": moved(m, yesterday)[1],
            "sides_differing_from_scratch": moved(m, scratch)[0],
            "correlation_with_scratch": moved(m, scratch)[1],
        }

    out = {
        "split": name,
        "n_ratings": len(ratings),
        "n_late": len(ratings) - len(yesterday_ratings),
        "scratch": row(scratch, t_scratch),
        "refit": row(refit, t_refit),
        "refit_alone": row(alone, t_alone),
        "yesterday_bound": round(yesterday.lower_bound_, 1),
    }
    if control:
        today = save(scratch, folder / f"today-{name}")
        same, _ = timed_fit(ratings, init_from=today)
        f = same.trace_.loc[same.trace_["restart"] == 0, "lower_bound"].to_numpy()
        hit = np.flatnonzero(f >= target)
        out["control_restart0_reach"] = int(hit[0]) + 1 if hit.size else None
        # no new ratings: what a refit from today's own answer costs, and where it goes
        for key, m in (("control", same), ("control_alone", timed_fit(
                ratings, init_from=today, n_restarts=1)[0])):  # fmt: skip
            out[key] = {
                "sweeps": len(m.trace_),
                "minus_scratch": round(m.lower_bound_ - scratch.lower_bound_, 1),
                "estimates_vs_scratch": estimate_diff(m, scratch),
            }
    if try_starts:
        out["tried"] = tried(ratings, yesterday_ratings, before, scratch, gold)
    out["load_average"] = [round(load0, 1), round(os.getloadavg()[0], 1)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", nargs="*", default=["file", "random"], choices=["file", "random"])
    ap.add_argument("--sim", action="store_true", help="also the simulated crowds")
    ap.add_argument("--tried", action="store_true", help="also the starts tried (TRIED)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.split:
            ratings = pd.read_csv(RATINGS, dtype=str)
            gold = oio.read_gold(GOLD)
        for how in args.split:
            y = late_split(ratings, how)
            rows.append(run(f"trec-{how}", ratings, y, gold, Path(tmp), True, args.tried))
            print(json.dumps(rows[-1]), flush=True)
        for n_items, n_ann, seed in SIM_CROWDS if args.sim else []:
            c = simulate_crowd(n_items, n_ann, 5, spammer_share=0.3, bias_sd=0.3,
                               favourite_share=0.5, random_state=seed)  # fmt: skip
            r = c.ratings.astype(str)
            gold = c.gold.set_axis(c.gold.index.astype(str))
            y = late_split(r, "random", seed=1 if seed == 7 else seed)
            name = f"sim-{n_items}x{n_ann}-seed{seed}"
            rows.append(run(name, r, y, gold, Path(tmp), False, args.tried and seed == 7))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
