"""Daily refits: a warm start from yesterday's fit against a fit from scratch (issue 12).

TREC RF10 with its last 10% of ratings (in file order) arriving late: fit the first 90% from
scratch (yesterday), then the 100% twice: warm-started from yesterday's output folder
(``init_from`` / ``ordmix fit --warm-start``) and from scratch. Reports bounds, sweeps (the
from-scratch fit's in total and along its winning restart), sweeps until the refit first
reaches the from-scratch bound within ``tol``, gold MSE, and how many annotators change side
(reliability over or under one half) between the two answers. A control refit starts from the
100% fit's own folder (no new ratings); a backcast refits the 90% from the 100% fit's folder
(today's optimum on yesterday's ratings). Times are wall clock on a shared machine: noisy.

    python benchmarks/bench_warm_start.py [--granularity instance query] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core import io as oio
from ordmix_core.model import OrdinalMixture
from ordmix_core.outputs import write_fit_outputs

ROOT = Path(__file__).resolve().parents[1]
RATINGS = ROOT / "demo_data" / "trec-rf10-ratings.csv"
GOLD = ROOT / "demo_data" / "trec-rf10-gold.csv"


def late_split(ratings: pd.DataFrame, late: float = 0.1) -> pd.DataFrame:
    """The ratings known yesterday: all but the last ``late`` share, in file order."""
    return ratings.iloc[: int(round((1.0 - late) * len(ratings)))]


def sweeps_to_reach(trace: pd.DataFrame, target: float, tol: float) -> int | None:
    """Sweeps (all stages, in order) until the bound first reaches ``target - tol``."""
    f = trace["lower_bound"].to_numpy()
    hit = np.flatnonzero(f >= target - tol)
    return int(hit[0]) + 1 if hit.size else None


def gold_mse(model: OrdinalMixture, gold: pd.Series) -> float:
    est = model.estimates_.reindex(gold.index).dropna()
    return float(((est - gold.reindex(est.index)) ** 2).mean())


def timed_fit(ratings: pd.DataFrame, **kw) -> tuple[OrdinalMixture, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = OrdinalMixture(random_state=0, **kw).fit(ratings)
    return m, time.perf_counter() - t0


def save(model: OrdinalMixture, folder: Path) -> str:
    folder.mkdir(parents=True)
    write_fit_outputs(model, folder, settings={})
    return str(folder)


def run(granularity: str, ratings: pd.DataFrame, gold: pd.Series, folder: Path) -> dict:
    yesterday, _ = timed_fit(late_split(ratings), granularity=granularity)
    before = save(yesterday, folder / f"yesterday-{granularity}")
    scratch, t_scratch = timed_fit(ratings, granularity=granularity)
    today = save(scratch, folder / f"today-{granularity}")
    warm, t_warm = timed_fit(ratings, granularity=granularity, init_from=before)
    control, _ = timed_fit(ratings, granularity=granularity, init_from=today)
    # today's optimum carried back to yesterday's ratings: is it better there too?
    backcast, _ = timed_fit(late_split(ratings), granularity=granularity, init_from=today)
    best = scratch.restarts_.loc[scratch.best_restart_]
    side_w = warm.annotators_["reliability"] >= 0.5
    side_s = scratch.annotators_["reliability"].reindex(side_w.index) >= 0.5
    tol = scratch.tol
    return {
        "granularity": granularity,
        "scratch_bound": scratch.lower_bound_,
        "scratch_sweeps_total": len(scratch.trace_),
        "scratch_sweeps_winner": int(best["n_iter"] + best["warmup_iter"]),
        "scratch_seconds": t_scratch,
        "scratch_mse": gold_mse(scratch, gold),
        "yesterday_bound": yesterday.lower_bound_,
        "backcast_bound": backcast.lower_bound_,
        "warm_bound": warm.lower_bound_,
        "warm_sweeps": len(warm.trace_),
        "warm_converged": bool(warm.converged_),
        "warm_reach": sweeps_to_reach(warm.trace_, scratch.lower_bound_, tol),
        "warm_seconds": t_warm,
        "warm_mse": gold_mse(warm, gold),
        "annotators_changing_side": int((side_w != side_s).sum()),
        "estimate_correlation": float(
            np.corrcoef(warm.estimates_, scratch.estimates_.reindex(warm.estimates_.index))[0, 1]
        ),
        "control_bound": control.lower_bound_,
        "control_sweeps": len(control.trace_),
        "control_reach": sweeps_to_reach(control.trace_, scratch.lower_bound_, tol),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--granularity", nargs="+", default=["instance", "query"])
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    ratings = pd.read_csv(RATINGS, dtype=str)
    gold = oio.read_gold(GOLD)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for g in args.granularity:
            rows.append(run(g, ratings, gold, Path(tmp)))
            print(json.dumps(rows[-1], indent=1), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
