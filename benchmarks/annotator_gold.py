"""What the annotator table tells a manager, measured on gold: which annotators answer the
expert's level.

For each shared set with gold (``validate_default.FOLDERS``), every annotator with at
least ``--min-gold`` ratings of gold items gets their gold accuracy (the share of those
ratings equal to the expert's level). Printed: Spearman's rank correlation of that accuracy
with each column of ``ordmix fit``'s ``annotators.csv`` that ranks annotators
(``reliability`` and ``p_unreliable`` negated, one posterior judged against the label fit's
items; ``expertise`` and ``agreement``), and with the label fit's own view of each annotator
(``labels/confusion_model``): the share of answers that are the item's latent level,
``sum_c rho_c P(c | c)`` (``label_accuracy``), and its mean over levels
(``label_balanced``); then the mean gold accuracy of the annotators of each flag.

``--simulated``: simulated crowds instead (3, 5 and 11 levels, no spammers or 30%), whose
gold is the rounded truth: Spearman's rho of the reliability with gold accuracy, and of the
reliability judged against the continuous fit's q(z) instead (``evidence.continuous_evidence``);
the spammers flagged ``unreliable``, and the gold accuracy of the careful annotators flagged so.

Usage (from the project root, ../shared beside it)::

    python benchmarks/annotator_gold.py [--sets trec,web,adult,metaphor] [--min-gold 5]
    python benchmarks/annotator_gold.py --simulated
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validate_default import DATA, FOLDERS, LabelScores, load  # noqa: E402

from ordmix_core.data.scale import Scale  # noqa: E402
from ordmix_core.data.simulate import simulate_crowd  # noqa: E402
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture  # noqa: E402
from ordmix_core.results import evidence, reliability  # noqa: E402

#: the annotators.csv columns that rank annotators, with the sign that makes higher better
COLUMNS = {"reliability": 1, "expertise": 1, "agreement": 1, "p_unreliable": -1}


def gold_accuracy(ratings: pd.DataFrame, gold: pd.Series, min_gold: int) -> pd.DataFrame:
    """Each annotator's ``n`` gold-item ratings and ``accuracy`` on them (those with at least
    ``min_gold``), indexed by annotator ID as text."""
    g = gold.rename(index=str)
    inst = ratings["instance"].astype(str)
    on_gold = inst.isin(g.index)
    hit = ratings.loc[on_gold, "rating"].to_numpy(float) == g.loc[inst[on_gold]].to_numpy(float)
    per = pd.DataFrame({"annotator": ratings.loc[on_gold, "annotator"].astype(str), "hit": hit})
    out = per.groupby("annotator")["hit"].agg(n="size", accuracy="mean")
    return out[out["n"] >= min_gold]


def label_view(ratings: pd.DataFrame, gold: pd.Series) -> pd.DataFrame:
    """The label fit's accuracy of each annotator (prior-weighted and balanced over levels),
    from ``validate_default``'s label fit of the set."""
    scores = LabelScores(ratings, gold)
    fit = scores.fit
    diag = np.einsum("nkk->nk", fit.confusion)
    return pd.DataFrame(
        {"label_accuracy": diag @ fit.rho, "label_balanced": diag.mean(axis=1)},
        index=pd.Index(scores.data.annotators.astype(str), name="annotator"),
    )


def fit_table(folder: Path, work: Path) -> pd.DataFrame:
    """``annotators.csv`` of the default ``ordmix fit`` (seed 0), indexed by ID as text."""
    out = work / folder.name
    subprocess.run(
        ["ordmix", "fit", str(folder / "ratings.csv"), "--seed", "0", "--quiet", "--out",
         str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return pd.read_csv(out / "annotators.csv", dtype={"annotator": str}).set_index("annotator")


def simulated(k: int, spammer_share: float) -> str:
    """One simulated crowd's line (``--simulated``): 600 items, 30 annotators, seed 2."""
    scale = Scale(np.arange(1, k + 1, dtype=float))
    crowd = simulate_crowd(600, 30, scale=scale, spammer_share=spammer_share, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = OrdinalMixture(n_restarts=3, random_state=0).fit(crowd.ratings)
    d, ann = m.data_, m.annotators_
    r = crowd.ratings
    hit = r["rating"].astype(float).to_numpy() == r["instance"].map(crowd.gold).to_numpy(float)
    acc = pd.Series(hit).groupby(r["annotator"].to_numpy()).mean().reindex(ann.index)
    log_r = evidence.continuous_evidence(m)
    against_z = reliability.reliability_posterior(d.ann, log_r, d.n_annotators)["median"]
    spam = crowd.spammers.reindex(ann.index).to_numpy(bool)
    flag = m.annotator_flags_["flag"].to_numpy()
    careful = acc[~spam & (flag == "unreliable")]
    return (
        f"| {k} | {spammer_share:.0%} | {spearmanr(ann['reliability'], acc).statistic:.2f} | "
        f"{spearmanr(against_z.to_numpy(), acc).statistic:.2f} | "
        f"{int((flag[spam] == 'unreliable').sum())} / {int(spam.sum())} | "
        f"{', '.join(f'{a:.2f}' for a in careful) or '-'} |"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(FOLDERS))
    ap.add_argument("--min-gold", type=int, default=5)
    ap.add_argument("--simulated", action="store_true", help="simulated crowds instead")
    args = ap.parse_args(argv)
    if args.simulated:
        print("| levels | spam | reliability | against q(z) | spammers unreliable | careful "
              "annotators flagged: gold accuracy |\n|---|---|---|---|---|---|")  # fmt: skip
        for k in (3, 5, 11):
            for share in (0.0, 0.3):
                print(simulated(k, share))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            ratings, gold = load(name)
            acc = gold_accuracy(ratings, gold, args.min_gold)
            table = fit_table(DATA / FOLDERS[name], Path(tmp)).join(label_view(ratings, gold))
            j = acc.join(table, how="inner")
            signs = {**COLUMNS, "label_accuracy": 1, "label_balanced": 1}
            rho = {c: spearmanr(s * j[c], j["accuracy"]).statistic for c, s in signs.items()}
            flags = j.groupby("flag")["accuracy"].agg(["size", "mean"])
            print(f"{name} ({len(j)} annotators with >= {args.min_gold} gold ratings)")
            print("  Spearman with gold accuracy: "
                  + ", ".join(f"{c} {r:.3f}" for c, r in rho.items()))  # fmt: skip
            print("  gold accuracy by flag: " + ", ".join(
                f"{f} {row['mean']:.3f} ({int(row['size'])})" for f, row in flags.iterrows()
            ))  # fmt: skip


if __name__ == "__main__":
    main()
