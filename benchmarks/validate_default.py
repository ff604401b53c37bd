"""The default against the baselines on every real set with gold, and its chosen constants
leave-one-data-set-out, in one command.

Sets: every set in ``../shared/data`` whose gold is on its scale of levels (``trec``
= trec-rf10, ``web`` = web-zhou2014, ``adult`` = adult-content2, ``metaphor`` =
metaphor-novelty) and their fake-rating variants (``trec+5``, ``web+3`` as
``../shared/checks/science-targets.sh`` makes them; ``adult+3``, ``metaphor+3`` the same way).

For each set it runs ``compare_methods`` (seed 0; mean, majority, dawid-skene, glad, the
paper's model at instance granularity and the default) and checks the targets of the default:
label error <= the best of majority, Dawid-Skene, GLAD and the paper's model + 0.005 (Web:
<= 0.10); MSE <= the lower of the mean's and the paper's + 0.005; calibration error <=
max(0.05, majority's); p_wrong's AUROC >= majority's.

Leave-one-data-set-out: the label policy's two chosen constants (``reference_share``,
``latent_weight``) are picked on a grid from the other data sets (a set and its variants leave
together): the pair that meets the most targets there, ties broken by the smaller summed excess
over them; the left-out set is then scored with that pair. Both figures are printed, and the
shipped pair's. The label fit does not depend on the two constants, so it is fitted once a set.
The label model's shift prior (``confusion_shift.SHIFT_PRIOR``) is picked the same way over
``SHIFT_PRIORS``, each set's label fit refitted at each, scored at the shipped pair.

``--gold``: 10% of each set's gold given to the fit in five draws; the label error and
calibration error on the other 90%, with and without the gold; then what gold could reach
(``gold_ceiling``: the best expert map of all the gold, a calibrated posterior's ECE).

``--small N``: small crowds, as a team that has rated only N items has: N of each set's
rated gold items with all their ratings (and no other ratings), five draws; every method's
mean over the draws and how many draws meet each of the default's targets.

``--simulated``: simulated crowds (``simulate_crowd``, seeds 0-2), where the truth is known:
the label error with the shifts off and on, the calibration error of the latent and the
reported posterior, and the AUROC of ``p_wrong`` against majority vote's.

Usage (from the project root, ../shared beside it)::

    python benchmarks/validate_default.py [--sets trec,web,...] [--gold] [--small 120]
        [--no-baselines] [--simulated]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import warnings
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd

from ordmix_core import OrdinalMixture
from ordmix_core.data.crowd import prepare
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.evaluation.compare import compare_methods
from ordmix_core.evaluation.metrics import calibration_error, p_wrong_auroc
from ordmix_core.io import read_gold, read_ratings
from ordmix_core.labels import confusion_model
from ordmix_core.labels.choose import label_posterior
from ordmix_core.labels.confusion_shift import SHIFT_PRIOR
from ordmix_core.labels.policy import DEFAULT
from ordmix_core.results.agreement import level_counts

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"
FAKE = SHARED / "checks" / "add_fake_spam.py"
WORK = Path(tempfile.gettempdir()) / "ordmix-validate"
FOLDERS = {
    "trec": "trec-rf10",
    "web": "web-zhou2014",
    "adult": "adult-content2",
    "metaphor": "metaphor-novelty",
}
SETS = ["trec", "trec+5", "web", "web+3", "adult", "adult+3", "metaphor", "metaphor+3"]
METHODS = "mean,majority,dawid-skene,glad,odm-paper-instance,odm"
#: the grid of the label policy's two chosen constants
SHARES = (0.15, 0.25, 0.35, 0.5, 0.75, 1.0)
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: the grid of the label model's shift prior (``labels/confusion_shift.py``)
SHIFT_PRIORS = (0.0, 0.02, 0.1, 0.4)


def load(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """(ratings, gold) of one of ``SETS``: a shared set, or one with ``k`` fake uniform ratings
    per item (``../shared/checks/add_fake_spam.py``)."""
    base, _, k = name.partition("+")
    folder = DATA / FOLDERS[base]
    gold = read_gold(folder / "gold.csv")
    if not k:
        return read_ratings(folder / "ratings.csv"), gold
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"{base}+{k}.csv"
    if not out.exists():
        subprocess.run(
            [sys.executable, str(FAKE), str(folder / "ratings.csv"), str(out), k], check=True
        )
    return read_ratings(out), gold


def targets(t: pd.DataFrame, name: str) -> dict[str, float]:
    """The default's bounds on this set from the baselines' rows (``t`` indexed by method)."""
    best = min(t.loc[m, "label_error"] for m in ("majority", "dawid-skene", "glad",
                                                 "odm-paper-instance"))  # fmt: skip
    return {
        "label_error": 0.10 if name.startswith("web") else best + 0.005,
        "mse": min(t.loc["mean", "mse"], t.loc["odm-paper-instance", "mse"]) + 0.005,
        "calibration_error": max(0.05, t.loc["majority", "calibration_error"]),
        "p_wrong_auroc": t.loc["majority", "p_wrong_auroc"],
    }


def excess(scores: dict[str, float], bound: dict[str, float]) -> dict[str, float]:
    """How far each score is past its target (0 when met; AUROC: below it)."""
    out = {k: max(scores[k] - bound[k], 0.0) for k in ("label_error", "mse", "calibration_error")}
    out["p_wrong_auroc"] = max(bound["p_wrong_auroc"] - scores["p_wrong_auroc"], 0.0)
    return out


class LabelScores:
    """One set's label fit, scored under any label policy against its gold."""

    def __init__(
        self, ratings: pd.DataFrame, gold: pd.Series, shift_prior: float | None = None
    ) -> None:
        d = prepare(ratings, None, "instance")
        self.data = d
        self.fit = confusion_model.fit(
            d.ann, d.inst, d.level, d.n_annotators, d.n_instances, d.scale.k,
            shift_prior=shift_prior,
        )  # fmt: skip
        ids = pd.Index(d.instances.astype(str))
        g = gold.rename(index=str).reindex(ids).to_numpy(float)
        self.known = np.isfinite(g) & np.isin(g, d.scale.values)
        self.truth = np.searchsorted(d.scale.values, g[self.known])

    def score(self, share: float, weight: float) -> dict[str, float]:
        policy = replace(DEFAULT, reference_share=share, latent_weight=weight)
        d = self.data
        post = label_posterior(self.fit, d.ann, d.inst, d.level, d.scale.values, None, policy)
        p = post.posterior.proba[self.known]
        est = post.posterior.estimates()[0][self.known]
        return {
            "label_error": float(np.mean(p.argmax(axis=1) != self.truth)),
            "mse": float(np.mean((est - d.scale.values[self.truth]) ** 2)),
            "calibration_error": calibration_error(p, self.truth),
            "p_wrong_auroc": p_wrong_auroc(p, self.truth),
        }


def lodo(scores: dict[str, LabelScores], bounds: dict[str, dict]) -> None:
    """Each data set left out with its variants: the grid's best pair on the others, then the
    left-out set scored with it; the shipped pair's figures beside them."""
    grid = list(product(SHARES, WEIGHTS))
    table = {
        name: {pair: s.score(*pair) for pair in grid} for name, s in scores.items()
    }  # fmt: skip
    shipped = (DEFAULT.reference_share, DEFAULT.latent_weight)
    print_lodo("the label policy's reference_share and latent_weight", table, bounds, grid, shipped)


def lodo_shift(names: list[str], bounds: dict[str, dict]) -> None:
    """The shift prior left one data set out: each set's label fit at each of ``SHIFT_PRIORS``,
    scored at the shipped policy."""
    pair = (DEFAULT.reference_share, DEFAULT.latent_weight)
    table = {}
    for name in names:
        ratings, gold = load(name)
        table[name] = {
            p: LabelScores(ratings, gold, shift_prior=p).score(*pair) for p in SHIFT_PRIORS
        }
    print_lodo("the label model's shift prior", table, bounds, list(SHIFT_PRIORS), SHIFT_PRIOR)


def print_lodo(what: str, table: dict, bounds: dict[str, dict], grid: list, shipped) -> None:
    """``table[set][choice]``'s scores: for each data set left out with its variants, the
    choice that meets the most targets on the others (ties: the smaller summed excess), then
    the left-out sets scored with it; the shipped choice's targets met, set by set."""
    print(f"\n## Leave-one-data-set-out: {what}\n")
    print("| left out | chosen on the others (met / of) | set | label error | ECE | AUROC | MSE "
          "| targets met |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    for base in sorted({n.partition("+")[0] for n in table}):
        inside = [n for n in table if n.partition("+")[0] != base]
        left = [n for n in table if n.partition("+")[0] == base]

        def rank(choice, names=inside):
            ex = [excess(table[n][choice], bounds[n]) for n in names]
            return (-sum(sum(v == 0 for v in e.values()) for e in ex), sum(sum(e.values())
                    for e in ex))  # fmt: skip

        best = min(grid, key=rank)
        met = -rank(best)[0]
        for n in left:
            s, e = table[n][best], excess(table[n][best], bounds[n])
            print(f"| {base} | {best} ({met} / {4 * len(inside)}) | {n} | {s['label_error']:.3f}"
                  f" | {s['calibration_error']:.3f} | {s['p_wrong_auroc']:.3f} | {s['mse']:.3f} "
                  f"| {sum(v == 0 for v in e.values())} / 4 |")  # fmt: skip
    print(f"\nThe shipped {shipped} meets, set by set: " + ", ".join(
        f"{n} {sum(v == 0 for v in excess(table[n][shipped], bounds[n]).values())}/4"
        for n in table))  # fmt: skip


def rated_gold(ratings: pd.DataFrame, gold: pd.Series) -> pd.Series:
    """The gold of the items the ratings rate (the draws below are taken among them)."""
    return gold[gold.index.astype(str).isin(set(ratings["instance"].astype(str)))]


def gold_draws(name: str, ratings: pd.DataFrame, gold: pd.Series, draws: int = 5) -> None:
    """10% of the gold given to the fit, five draws: label error and calibration error on the
    other 90%, without and with it."""
    rated = rated_gold(ratings, gold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = OrdinalMixture(random_state=0).fit(ratings)
    rows = []
    for draw in range(draws):
        order = np.random.default_rng(draw).permutation(len(rated))
        given = rated.iloc[order[: round(0.1 * len(rated))]]
        rest = rated.iloc[order[round(0.1 * len(rated)) :]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            taught = OrdinalMixture(random_state=0).fit(ratings, gold=given)
        row = []
        for m in (plain, taught):
            p = m.probas_.rename(index=str).reindex(rest.index.astype(str)).to_numpy(float)
            truth = np.searchsorted(m.scale_.values, rest.to_numpy(float))
            row += [float(np.mean(p.argmax(axis=1) != truth)), calibration_error(p, truth)]
        rows.append(row)
    r = np.array(rows)
    print(f"| {name} | {len(rated) // 10} | " + " | ".join(
        f"{a:.3f} -> {b:.3f}" for a, b in zip(r[:, 0], r[:, 2], strict=True)) +
        f" | {r[:, 3].min():.3f}-{r[:, 3].max():.3f} |")  # fmt: skip


def gold_ceiling(name: str, s: LabelScores, draws: int = 400) -> None:
    """What gold could reach, whatever the fit does with it: the label error of the no-gold
    fit's latent posterior read through the expert map learned from *all* the gold (the
    rows ``sum_m q[m, c] [gold_m = k]``, normalised: the best any map can do, in-sample), and
    the calibration error a perfectly calibrated posterior shows on 90% of the gold items
    (truths drawn from the shipped posterior itself, ``draws`` times): its mean and the
    share of draws above 0.05. ``s``: the set's label fit and gold (``LabelScores``)."""
    d, truth = s.data, s.truth
    post = label_posterior(s.fit, d.ann, d.inst, d.level, d.scale.values)
    q, p = s.fit.q[s.known], post.posterior.proba[s.known]
    best = np.stack([np.bincount(truth, weights=q[:, c], minlength=d.scale.k)
                     for c in range(d.scale.k)]) + 1e-3  # fmt: skip
    best /= best.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(0)
    n = round(0.9 * len(p))
    eces = []
    for _ in range(draws):
        rows = rng.choice(len(p), n, replace=False)
        drawn = (np.cumsum(p[rows], axis=1) < rng.random(n)[:, None]).sum(axis=1)
        eces.append(calibration_error(p[rows], np.minimum(drawn, d.scale.k - 1)))
    e = np.array(eces)
    print(f"| {name} | {np.mean(p.argmax(axis=1) != truth):.3f} | "
          f"{np.mean((q @ best).argmax(axis=1) != truth):.3f} | {n} | {e.mean():.3f} | "
          f"{np.mean(e > 0.05):.2f} |")  # fmt: skip


def small_crowds(
    name: str, ratings: pd.DataFrame, gold: pd.Series, n_items: int, draws: int = 5
) -> None:
    """``n_items`` of the set's rated gold items with all their ratings, ``draws`` draws
    (``numpy.random.default_rng(draw).permutation``): each method's mean label error, ECE,
    AUROC and MSE over the draws, and the draws where the default meets each target."""
    ids = ratings["instance"].astype(str)
    rated = rated_gold(ratings, gold)
    tables, met = [], np.zeros(4, int)
    for draw in range(draws):
        pick = set(rated.index.astype(str)[np.random.default_rng(draw).permutation(len(rated))
                                           [:n_items]])  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, _ = compare_methods(ratings[ids.isin(pick)], rated[rated.index.astype(str)
                                   .isin(pick)], METHODS, random_state=0)  # fmt: skip
        t = t.set_index("method")
        tables.append(t)
        odm = t.loc["odm"]
        scores = {
            "label_error": odm.label_error,
            "mse": odm.mse,
            "calibration_error": odm.calibration_error,
            "p_wrong_auroc": odm.p_wrong_auroc,
        }
        met += np.array([v == 0 for v in excess(scores, targets(t, name)).values()])
    cols = ["label_error", "calibration_error", "p_wrong_auroc", "mse"]
    mean = sum(t[cols] for t in tables) / draws
    print(f"\n**{name}**, {n_items} items, {draws} draws: mean label error / ECE / AUROC / MSE; "
          f"draws where the default meets the label, MSE, ECE, AUROC targets: "
          + " / ".join(str(m) for m in met) + "\n")  # fmt: skip
    print("| method | label error | ECE | AUROC | MSE |\n|---|---|---|---|---|")
    for m, row in mean.iterrows():
        print(f"| {m} | {row.label_error:.3f} | {row.calibration_error:.3f} | "
              f"{row.p_wrong_auroc:.3f} | {row.mse:.3f} |")  # fmt: skip


#: the simulated crowds of ``--simulated``: ``simulate_crowd``'s arguments past the seed
SIMULATED = {
    "defaults (500 items, 5 levels)": {"n_items": 500},
    "50% spammers": {"n_items": 500, "spammer_share": 0.5},
    "favourite-answer spammers": {"n_items": 500, "favourite_share": 1.0},
    "3 ratings an item": {"n_items": 500, "ratings_per_item": 3},
    "lenient and strict raters (bias_sd=1)": {"n_items": 500, "bias_sd": 1.0},
    "the same, 1,500 items, 60 annotators": {"n_items": 1500, "n_annotators": 60, "bias_sd": 1.0},
    "11 levels": {"n_items": 500, "scale": Scale(np.arange(11.0))},
    "11 levels, bias_sd=1, 1,500 items, 60 annotators": {
        "n_items": 1500, "n_annotators": 60, "bias_sd": 1.0, "scale": Scale(np.arange(11.0))
    },
}  # fmt: skip


def simulated_crowds(seeds: int = 3) -> None:
    """Each of ``SIMULATED``'s crowds, seeds 0..``seeds - 1``: means of the label error
    without and with the shifts, the ECE of the latent (``latent_weight`` 1) and the reported
    posterior, ``p_wrong``'s AUROC and majority vote's, and the annotators shifted."""
    print("\n## Simulated crowds (seeds 0-2, means)\n")
    print("| crowd | label error, shifts off -> on | ECE latent / reported | AUROC / majority's "
          "| shifted |\n|---|---|---|---|---|")  # fmt: skip
    latent = replace(DEFAULT, latent_weight=1.0)
    for name, kw in SIMULATED.items():
        rows = []
        for seed in range(seeds):
            crowd = simulate_crowd(**kw, random_state=seed)
            d = prepare(crowd.ratings, kw.get("scale"), "instance")
            truth = np.searchsorted(d.scale.values, crowd.gold.reindex(
                d.instances.astype(str)).to_numpy(float))  # fmt: skip
            row = []
            for prior in (0.0, None):
                fit = confusion_model.fit(d.ann, d.inst, d.level, d.n_annotators,
                                          d.n_instances, d.scale.k, shift_prior=prior)  # fmt: skip
                p = label_posterior(fit, d.ann, d.inst, d.level, d.scale.values).posterior.proba
                row.append(np.mean(p.argmax(axis=1) != truth))
            q = label_posterior(fit, d.ann, d.inst, d.level, d.scale.values, None, latent)
            counts = level_counts(d)
            votes = counts / counts.sum(axis=1, keepdims=True)
            rows.append(row + [calibration_error(q.posterior.proba, truth),
                               calibration_error(p, truth), p_wrong_auroc(p, truth),
                               p_wrong_auroc(votes, truth), np.sum(fit.shift != 0)])  # fmt: skip
        m = np.mean(rows, axis=0)
        print(f"| {name} | {m[0]:.3f} -> {m[1]:.3f} | {m[2]:.3f} / {m[3]:.3f} | {m[4]:.3f} / "
              f"{m[5]:.3f} | {m[6]:.1f} |", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--gold", action="store_true", help="also the 10%% gold draws")
    ap.add_argument("--no-baselines", action="store_true", help="the LODO table only")
    ap.add_argument("--small", type=int, metavar="N", help="only the small crowds of N items")
    ap.add_argument("--simulated", action="store_true", help="only the simulated crowds")
    args = ap.parse_args(argv)
    if args.simulated:
        simulated_crowds()
        return
    names = args.sets.split(",")
    if args.small:
        for name in names:
            if "+" not in name:
                small_crowds(name, *load(name), args.small)
        return
    bounds, scores = {}, {}
    for name in names:
        ratings, gold = load(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, _ = compare_methods(ratings, gold, METHODS, random_state=0)
        t = t.set_index("method")
        bounds[name] = targets(t, name)
        scores[name] = LabelScores(ratings, gold)
        if not args.no_baselines:
            print(f"\n**{name}** ({len(ratings):,} ratings, {int(t['n_gold'].iloc[0]):,} gold)\n")
            print("| method | label error | ECE | AUROC | MSE | Pearson | NDCG |\n"
                  "|---|---|---|---|---|---|---|")  # fmt: skip
            for m, row in t.iterrows():
                print(f"| {m} | {row.label_error:.3f} | {row.calibration_error:.3f} | "
                      f"{row.p_wrong_auroc:.3f} | {row.mse:.3f} | {row.correlation:.3f} | "
                      f"{row.ndcg:.4f} |")  # fmt: skip
            b = bounds[name]
            print(
                f"\ntargets: label error <= {b['label_error']:.3f}, MSE <= {b['mse']:.3f}, "
                f"ECE <= {b['calibration_error']:.3f}, AUROC >= {b['p_wrong_auroc']:.3f}"
            )
    lodo(scores, bounds)
    lodo_shift(names, bounds)
    if args.gold:
        print("\n## 10% of the gold given (five draws): label error on the other 90%, without "
              "-> with, and the calibration error with\n")  # fmt: skip
        print("| set | gold given | draw 0 | 1 | 2 | 3 | 4 | ECE with |\n"
              "|---|---|---|---|---|---|---|---|")  # fmt: skip
        for name in names:
            if "+" not in name:
                gold_draws(name, *load(name))
        print("\n## What gold could reach: the best expert map, and a calibrated posterior's ECE"
              "\n\n| set | label error without gold | through the best map of all the gold | "
              "items scored | calibrated ECE, mean | share of draws > 0.05 |\n"
              "|---|---|---|---|---|---|")  # fmt: skip
        for name in names:
            if "+" not in name:
                gold_ceiling(name, scores[name])


if __name__ == "__main__":
    main()
