"""The default model against the paper's and the baselines on more than TREC and Web.

The default must be validated on clean data AND on data with injected spam, and must cost no
accuracy on a crowd without bias. This runs ``compare_methods`` (seed 0) on:

- ``trec``, ``web``: the shared sets; ``trec+5``, ``web+3``: the same with 5 / 3 fake uniform
  ratings per item (``../shared/checks/add_fake_spam.py``, as the science targets do);
- ``snow4``, ``snow4+3``: Snow et al. 2008's affect ratings (0..100, valence -100..100) cut into
  4 equal levels, responses and gold alike, a query per emotion; +3 fake ratings per item;
- ``sim-clean``: ``simulate_crowd`` without spammers and without bias (the extension must
  cost nothing here); ``sim-spam``: 30% uniform spammers; ``sim-spam+3``: plus 3 fake ratings
  per item; ``sim-bias``: biased raters (sd 0.5 level) and spammers with a favourite answer;
- ``careless:K/PER_ITEM/ANNOTATORS/ACCURACY`` (not in the default sets): a truth on K levels,
  raters right with that accuracy and otherwise at any other level (``careless``).

Usage (from the project root, ../shared beside it)::

    python benchmarks/validate_default.py [--sets trec,web,...] [--methods ...] [--restarts N]

Prints one markdown table per data set (MSE, Pearson, NDCG, label error) and a verdict line:
which methods the default beats on MSE and Pearson; ``--evidence``: the share of ratings given
by annotators judged unreliable in the spam fit, which decides the default's spam component.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core.data.crowd import prepare
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.estimators.spam_decision import SPAM_EVIDENCE, spam_evidence
from ordmix_core.evaluation.compare import compare_methods
from ordmix_core.evaluation.experiments import add_spam
from ordmix_core.io import read_gold, read_ratings

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"
FAKE = SHARED / "checks" / "add_fake_spam.py"
WORK = Path(tempfile.gettempdir()) / "ordmix-validate"
SETS = [
    "trec", "trec+5", "web", "web+3", "snow4", "snow4+3",
    "sim-clean", "sim-spam", "sim-spam+3", "sim-bias",
]  # fmt: skip
METHODS = ["mean", "dawid-skene", "odm-paper-instance", "odm"]


def with_fake(name: str, k: int) -> pd.DataFrame:
    """The shared set ``name`` with ``k`` fake uniform ratings per item (the shared script)."""
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"{name}+{k}.csv"
    if not out.exists():
        src = DATA / name / "ratings.csv"
        subprocess.run([sys.executable, str(FAKE), str(src), str(out), str(k)], check=True)
    return read_ratings(out)


def add_fake(ratings: pd.DataFrame, k: int, seed: int = 99) -> pd.DataFrame:
    """``k`` uniform ratings per item from fake annotators (``experiments.add_spam``, the
    paper's Figure 2 setup)."""
    return add_spam(prepare(ratings, None, "instance"), k, np.random.default_rng(seed))


def snow(levels: int = 4) -> tuple[pd.DataFrame, pd.Series]:
    """Snow 2008 affect: each emotion's 0..100 scale (valence -100..100) in ``levels`` bins."""
    frames = []
    for f in sorted((DATA / "snow2008-affect" / "raw").iterdir()):
        emotion = f.name.split(".")[0]
        t = pd.read_csv(f, sep="\t")
        v, g = t["response"].astype(float), t["gold"].astype(float)
        if emotion == "valence":
            v, g = (v + 100) / 2, (g + 100) / 2

        def binned(x: pd.Series) -> np.ndarray:
            return np.clip((x / 100 * levels).astype(int), 0, levels - 1) + 1

        frames.append(
            pd.DataFrame(
                {
                    "annotator": t["!amt_worker_ids"].astype(str),
                    "instance": emotion + ":" + t["orig_id"].astype(str),
                    "rating": binned(v),
                    "query": emotion,
                    "gold": binned(g),
                }
            )
        )
    r = pd.concat(frames, ignore_index=True)
    gold = r.drop_duplicates("instance").set_index("instance")["gold"].astype(float)
    return r[["annotator", "instance", "rating", "query"]], gold.rename("truth")


def careless(
    k: int, per_item: int, n_annotators: int, accuracy: float, n_items: int = 1000, seed: int = 1
) -> tuple[pd.DataFrame, pd.Series]:
    """A crowd of careless raters: a truth that is one of ``k`` levels, each rating right with
    probability ``accuracy`` and otherwise another level at random, ``per_item`` annotators an
    item drawn from ``n_annotators``; no spammers. (ratings, gold)."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for i in range(n_items):
        t = int(rng.integers(0, k))
        truth[f"t{i}"] = float(t)
        for a in rng.choice(n_annotators, per_item, replace=False):
            wrong = [lev for lev in range(k) if lev != t]
            r = t if rng.random() < accuracy else int(rng.choice(wrong))
            rows.append((f"w{a}", f"t{i}", r))
    ratings = pd.DataFrame(rows, columns=["annotator", "instance", "rating"])
    return ratings, pd.Series(truth, name="truth")


def load(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """(ratings, gold) of one of ``SETS``, or ``careless:K/PER_ITEM/ANNOTATORS/ACCURACY``."""
    if name.startswith("careless:"):
        k, per, n_ann, acc = name.removeprefix("careless:").split("/")
        return careless(int(k), int(per), int(n_ann), float(acc))
    shared = {"trec": "trec-rf10", "web": "web-zhou2014"}
    base, _, k = name.partition("+")
    if base in shared:
        gold = read_gold(DATA / shared[base] / "gold.csv")
        if k:
            return with_fake(shared[base], int(k)), gold
        return read_ratings(DATA / shared[base] / "ratings.csv"), gold
    if base == "snow4":
        r, gold = snow(4)
        return (add_fake(r, int(k)) if k else r), gold
    sim = {
        "sim-clean": dict(spammer_share=0.0, random_state=4),
        "sim-spam": dict(random_state=3),
        "sim-bias": dict(bias_sd=0.5, favourite_share=1.0, spammer_share=0.2, random_state=5),
    }
    c = simulate_crowd(n_items=1500, n_annotators=60, **sim[base])
    return (add_fake(c.ratings, int(k)) if k else c.ratings), c.gold


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--restarts", type=int, default=None, help="default: the estimator's")
    ap.add_argument(
        "--evidence", action="store_true", help="also print the spam decision's evidence share"
    )
    args = ap.parse_args(argv)
    print(f"# load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores)")
    for name in args.sets.split(","):
        ratings, gold = load(name)
        t0 = time.perf_counter()
        table, _ = compare_methods(
            ratings, gold, args.methods, n_restarts=args.restarts, random_state=0
        )
        secs = time.perf_counter() - t0
        t = table.set_index("method")
        print(
            f"\n**{name}** ({len(ratings):,} ratings, {int(t['n_gold'].iloc[0]):,} gold, "
            f"{secs:.0f} s)\n"
        )
        print("| method | MSE | Pearson | NDCG | label error |\n|---|---|---|---|---|")
        for m, row in t.iterrows():
            print(
                f"| {m} | {row.mse:.4f} | {row.correlation:.4f} | {row.ndcg:.4f} | "
                f"{row.label_error:.4f} |"
            )
        if args.evidence:
            m = OrdinalMixture(random_state=0, n_restarts=args.restarts or 10, spam=True)
            share = spam_evidence(m.fit(ratings))
            keep = "kept" if share >= SPAM_EVIDENCE else "left out"
            print(
                f"\nspam evidence (ratings by annotators judged unreliable in the spam fit): "
                f"{share:.3f} -> the default's spam component is {keep}"
            )
        if "odm" in t.index:
            d = t.loc["odm"]
            others = [m for m in t.index if m != "odm"]
            beats = [
                m
                for m in others
                if d.mse < t.at[m, "mse"] and d.correlation > t.at[m, "correlation"]
            ]
            loses = [m for m in others if m not in beats]
            print(
                f"\nodm beats on MSE and Pearson: {', '.join(beats) or 'none'}; "
                f"not: {', '.join(loses) or 'none'}"
            )


if __name__ == "__main__":
    main()
