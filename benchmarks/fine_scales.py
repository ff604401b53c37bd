"""Fine scales (more than 11 levels, a 0..100 slider): the default against the per-item mean
and median and the confusion model on 11 classes (the default before, ``labels="confusion"``),
on simulated 0..100 crowds and on Snow et al.'s six emotions (held out: nothing was chosen on
it).

Simulated crowds: ``simulate_crowd`` on the 0..100 scale, 1,000 items x 10 ratings (10,000
ratings), 50 annotators, a good rating about 10 points from the truth (``unit=10``,
``expertise=1``), 20% spammers, seeds 0..2; the variants change one thing each:

- ``default``;
- ``round``: half the good annotators answer in tens (``round_share=0.5, round_to=10``);
- ``bias``: lenient and strict annotators (``bias_sd=1``: 10 points);
- ``noisy``: a good rating about 20 points off (``expertise=0.25``);
- ``few``: 3 ratings an item (3,333 items);
- ``fav``: every spammer has a favourite answer (``favourite_share=1``);
- ``floor``: half the items at the scale's floor (a crowd drawn on -100..100, 20-point
  noise, its ratings and truths below 0 put at 0, as a slider does);
- ``floor-round-noisy``: the floor, 80% of the good annotators answering in tens, a good
  rating about 28 points off (``expertise=0.5``).

Scores against the real-valued truth (simulated) or the gold (Snow): MSE and Pearson of the
estimate; label error, exact (the label is not the truth's nearest level) and beyond 10 points
(|label - truth| > 10); ECE of the label's probability (10 bins; the exact label); the share of
truths' levels inside the label's 90% interval; seconds (wall and CPU) of ``fit``.

Usage (from the project root, ../shared beside it)::

    python benchmarks/fine_scales.py [--seeds 0,1,2] [--variants default,floor] [--no-snow]
        [--out FILE.csv]   # every fit's row (not written without --out)
    python benchmarks/fine_scales.py --write-snow DIR   # DIR/snow6.csv, DIR/snow6-gold.csv,
                                                        # DIR/snow11/ (0..10) only
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core import OrdinalMixture
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.evaluation.metrics import calibration_error, mse, nearest_level, pearson
from ordmix_core.labels.posterior import level_interval

SNOW = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "snow2008-affect"
EMOTIONS = ("anger", "disgust", "fear", "joy", "sadness", "surprise")
SLIDER = Scale(np.arange(0.0, 101.0))
BASE = {
    "n_items": 1000,
    "n_annotators": 50,
    "ratings_per_item": 10,
    "scale": SLIDER,
    "unit": 10.0,
    "expertise": 1.0,
    "spammer_share": 0.2,
}
VARIANTS = {
    "default": {},
    "round": {"round_share": 0.5, "round_to": 10.0},
    "bias": {"bias_sd": 1.0},
    "noisy": {"expertise": 0.25},
    "few": {"ratings_per_item": 3, "n_items": 3333},
    "fav": {"favourite_share": 1.0},
    "floor": {"floor": True},
    "floor-round-noisy": {"floor": True, "round_share": 0.8, "round_to": 10.0, "expertise": 0.5},
}
METHODS = ("mean", "median", "confusion-11", "default")


def simulated(variant: str, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    """The ratings (annotator, instance, rating) and real-valued truth of a variant."""
    kw = {**BASE, **VARIANTS[variant], "random_state": seed}
    if kw.pop("floor", False):  # drawn on -100..100, everything below 0 put at 0
        kw.update(scale=Scale(np.arange(-100.0, 101.0)), unit=20.0)
        crowd = simulate_crowd(**kw)
        ratings = crowd.ratings.assign(rating=crowd.ratings["rating"].clip(lower=0.0))
        return ratings[["annotator", "instance", "rating"]], crowd.truth.clip(lower=0.0)
    crowd = simulate_crowd(**kw)
    return crowd.ratings[["annotator", "instance", "rating"]], crowd.truth


def snow() -> tuple[pd.DataFrame, pd.Series]:
    """Snow et al.'s six emotions as one file: annotator ``!amt_worker_ids``, instance
    ``<emotion>:<orig_id>``, rating ``response``; the gold by instance."""
    parts = []
    for emotion in EMOTIONS:
        t = pd.read_csv(SNOW / "raw" / f"{emotion}.standardized.tsv", sep="\t")
        parts.append(
            pd.DataFrame({
                "annotator": t["!amt_worker_ids"].astype(str),
                "instance": emotion + ":" + t["orig_id"].astype(str),
                "rating": t["response"].astype(float),
                "gold": t["gold"].astype(float),
            })
        )  # fmt: skip
    r = pd.concat(parts, ignore_index=True)
    gold = r.groupby("instance")["gold"].first()
    return r[["annotator", "instance", "rating"]], gold


def fitted(ratings: pd.DataFrame, method: str) -> dict:
    """A method's estimates (Series by instance), level probabilities (M, K) or None, the
    scale's values and the seconds (wall, CPU) its fit took."""
    values = np.sort(ratings["rating"].unique())
    if method in ("mean", "median"):
        est = ratings.groupby("instance")["rating"].agg(method)
        return {"estimate": est, "proba": None, "values": values, "wall": 0.0, "cpu": 0.0}
    params = {"labels": "confusion"} if method == "confusion-11" else {}
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OrdinalMixture(random_state=0, **params).fit(ratings)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "estimate": model.items_["estimate"],
        "proba": model.label_result_.posterior.proba,
        "values": np.asarray(model.scale_.values, float),
        "wall": wall,
        "cpu": cpu,
        "index": model.items_.index,
    }


def scores(fit: dict, truth: pd.Series, rows: np.ndarray | None = None) -> dict:
    """The figures of one method on the items ``rows`` (positions in its estimates; all)."""
    est = fit["estimate"]
    pick = np.arange(len(est)) if rows is None else rows
    e = est.to_numpy(float)[pick]
    t = truth.reindex(est.index).to_numpy(float)[pick]
    values = fit["values"]
    level = np.searchsorted(values, nearest_level(t, values))
    out = {"mse": mse(e, t), "pearson": pearson(e, t)}
    if fit["proba"] is None:
        label = nearest_level(e, values)
        out["label_error"] = float(np.mean(label != values[level]))
        out["off_by_10"] = float(np.mean(np.abs(label - t) > 10))
        return out
    p = np.asarray(fit["proba"], float)[pick]
    best = p.argmax(axis=1)
    lo, hi = level_interval(p, best, 0.9)
    out["label_error"] = float(np.mean(best != level))
    out["off_by_10"] = float(np.mean(np.abs(values[best] - t) > 10))
    out["ece"] = calibration_error(p, level)
    out["mean_p_wrong"] = float(np.mean(1.0 - p.max(axis=1)))
    out["covered_90"] = float(np.mean((level >= lo) & (level <= hi)))
    return out


def run_simulated(variants: list[str], seeds: list[int]) -> list[dict]:
    rows = []
    for variant in variants:
        for seed in seeds:
            ratings, truth = simulated(variant, seed)
            for method in METHODS:
                fit = fitted(ratings, method)
                rows.append({
                    "set": variant, "seed": seed, "items": "all", "method": method,
                    **scores(fit, truth), "wall": fit["wall"], "cpu": fit["cpu"],
                })  # fmt: skip
            print(f"simulated {variant} seed {seed}", flush=True)
    return rows


def run_snow() -> list[dict]:
    ratings, gold = snow()
    rows = []
    for method in METHODS:
        fit = fitted(ratings, method)
        emotion = fit["estimate"].index.str.split(":").str[0]
        for part in ("pooled", *EMOTIONS):
            pick = None if part == "pooled" else np.flatnonzero(emotion == part)
            rows.append({
                "set": "snow", "seed": 0, "items": part, "method": method,
                **scores(fit, gold, pick), "wall": fit["wall"], "cpu": fit["cpu"],
            })  # fmt: skip
        print(f"snow {method}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-snow", action="store_true")
    ap.add_argument("--no-simulated", action="store_true")
    ap.add_argument("--out", help="write every fit's row to this CSV (a new file)")
    ap.add_argument("--write-snow", metavar="DIR", help="write Snow's six emotions as one file")
    args = ap.parse_args()
    if args.out is not None and Path(args.out).exists():  # before the fits: never overwrite
        sys.exit(f"fine_scales.py: {args.out} exists; name a new file with --out")
    if args.write_snow:  # the file `ordmix fit` is timed on (docs/benchmarks.md)
        ratings, gold = snow()
        out = Path(args.write_snow)
        out.mkdir(parents=True, exist_ok=True)
        ratings.to_csv(out / "snow6.csv", index=False)
        gold.rename("gold").reset_index().to_csv(out / "snow6-gold.csv", index=False)
        # the same binned to 0..10 (numpy's round, half to even), the emotion as the query:
        # an 11-level real crowd on the coarse path (docs/results.md, "Eleven levels")
        eleven = out / "snow11"
        eleven.mkdir(exist_ok=True)
        binned = ratings.assign(rating=np.round(ratings["rating"] / 10).astype(int))
        binned["query"] = binned["instance"].str.split(":").str[0]
        binned.to_csv(eleven / "ratings.csv", index=False)
        truth = np.round(gold / 10).astype(int).rename("truth").reset_index()
        truth.to_csv(eleven / "gold.csv", index=False)
        return
    rows = []
    if not args.no_simulated:
        seeds = [int(s) for s in args.seeds.split(",")]
        rows += run_simulated(args.variants.split(","), seeds)
    if not args.no_snow:
        rows += run_snow()
    table = pd.DataFrame(rows)
    if args.out is not None:
        table.to_csv(args.out, index=False)
    cols = ["mse", "pearson", "label_error", "off_by_10", "ece", "covered_90", "wall", "cpu"]
    summary = table.groupby(["set", "items", "method"], sort=False)[cols].mean()
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(summary.round(3).to_string())


if __name__ == "__main__":
    main()
