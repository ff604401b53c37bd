"""Cross-check ordmix's Dawid-Skene, GLAD and majority vote against crowd-kit on a shared set.

Not a test and not a dependency: crowd-kit lives in its own venv::

    python -m venv /tmp/ckvenv
    /tmp/ckvenv/bin/pip install crowd-kit numpy scipy pandas
    /tmp/ckvenv/bin/pip install -e /work/main --no-deps
    /tmp/ckvenv/bin/python benchmarks/crowdkit_agreement.py [--data DIR]

``DIR`` holds ``ratings.csv`` (annotator, instance, rating[, query]) and ``gold.csv``
(instance, truth); default ``<repo>/../shared/data/trec-rf10``. Prints, per method pair, the
share of identical MAP labels and the correlation of the posterior-expected values, then each
fit's MSE / Pearson / NDCG on gold (posterior-expected value and MAP label as estimates) and
the label error of the labels each library ships (``labels_``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from crowdkit.aggregation import GLAD as CkGLAD
from crowdkit.aggregation import DawidSkene as CkDawidSkene
from crowdkit.aggregation import MajorityVote as CkMajorityVote

from ordmix_core.estimators.baselines import GLAD, DawidSkene, MajorityVote
from ordmix_core.evaluation.metrics import evaluate

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trec-rf10"


def ours(est, ratings: pd.DataFrame) -> tuple[pd.Series, pd.Series, float]:
    """MAP label value and posterior-expected value per instance, and seconds to fit."""
    t = time.perf_counter()
    est.fit(ratings)
    sec = time.perf_counter() - t
    post = est.posterior_
    values = post.columns.to_numpy(dtype=float)
    map_value = pd.Series(values[est.map_level_], index=post.index)
    return map_value, pd.Series(post.to_numpy() @ values, index=post.index), sec


def theirs(
    agg, ck: pd.DataFrame, cache: Path | None, name: str
) -> tuple[pd.Series, pd.Series, float, int]:
    """As :func:`ours` for a crowd-kit aggregator, plus its EM iterations (0 if not EM).

    Reuses ``cache/crowdkit-<name>.csv`` if present.
    """
    file = cache / f"crowdkit-{name}.csv" if cache else None
    if file is not None and file.exists():
        probas = pd.read_csv(file, index_col=0, dtype={0: str})
        sec = float(probas.pop("seconds").iloc[0])
        n_iter = int(probas.pop("n_iter").iloc[0]) if "n_iter" in probas else 0
        labels = probas.pop("map").astype(float)  # crowd-kit's own tie breaking
        probas.columns = probas.columns.astype(float)
        values = probas.columns.to_numpy(dtype=float)
        expected = pd.Series(probas.to_numpy() @ values, index=probas.index)
        return labels, expected, sec, n_iter
    t = time.perf_counter()
    agg.fit(ck)
    sec = time.perf_counter() - t
    probas = agg.probas_.sort_index(axis=1)
    n_iter = len(getattr(agg, "loss_history_", []))
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        extra = {"map": agg.labels_.reindex(probas.index), "seconds": sec, "n_iter": n_iter}
        probas.assign(**extra).to_csv(file)
    values = probas.columns.to_numpy(dtype=float)
    labels = agg.labels_.astype(float)
    labels.index = labels.index.astype(str)
    expected = pd.Series(probas.to_numpy() @ values, index=probas.index.astype(str))
    return labels, expected, sec, n_iter


def agreement(a_map, a_exp, b_map, b_exp) -> str:
    a_map, a_exp = a_map.reindex(b_map.index), a_exp.reindex(b_exp.index)
    same = float(np.mean(a_map.to_numpy() == b_map.to_numpy()))
    corr = float(np.corrcoef(a_exp.to_numpy(), b_exp.to_numpy())[0, 1])
    maxdiff = float(np.max(np.abs(a_exp.to_numpy() - b_exp.to_numpy())))
    return (
        f"identical MAP labels {same:.4f}   corr(expected) {corr:.5f}   "
        f"max |diff expected| {maxdiff:.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--methods",
        default="dawid-skene,glad,majority",
        help="comma-separated subset (crowd-kit's GLAD takes tens of minutes on TREC)",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="directory to keep crowd-kit's posteriors in, so a rerun does not refit crowd-kit",
    )
    args = ap.parse_args()
    ratings = pd.read_csv(args.data / "ratings.csv", dtype=str)
    ratings["rating"] = ratings["rating"].astype(int)
    gold = pd.read_csv(args.data / "gold.csv", dtype={"instance": str})
    gold = gold.set_index("instance")["truth"].astype(float)
    queries = ratings.groupby("instance")["query"].first() if "query" in ratings else None
    ck = ratings.rename(columns={"annotator": "worker", "instance": "task", "rating": "label"})
    ck = ck[["worker", "task", "label"]]

    pairs = {
        "dawid-skene": (DawidSkene(), CkDawidSkene(n_iter=100)),
        "glad": (GLAD(), CkGLAD(n_iter=100)),
        "majority": (MajorityVote(), CkMajorityVote()),
    }
    wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(wanted) - set(pairs))
    if unknown:
        ap.error(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(pairs)}")
    pairs = {k: v for k, v in pairs.items() if k in wanted}
    print(
        f"{args.data.name}: {len(ratings)} ratings, {ratings['instance'].nunique()} instances, "
        f"{len(gold)} gold items\n"
    )
    rows = []
    for name, (mine, other) in pairs.items():
        m_map, m_exp, m_sec = ours(mine, ratings)
        c_map, c_exp, c_sec, c_iter = theirs(other, ck, args.cache, name)
        print(f"{name:23s} {agreement(m_map, m_exp, c_map, c_exp)}")
        for who, mp, ex, sec in (
            ("ordmix", m_map, m_exp, m_sec),
            ("crowd-kit", c_map, c_exp, c_sec),
        ):
            for kind, s in (("expected", ex), ("MAP", mp)):
                r = evaluate(s, gold, queries)
                rows.append((name, who, kind, r["mse"], r["correlation"], r["ndcg"], sec))
            shipped = mine.labels_ if who == "ordmix" else mp
            g = gold.reindex(shipped.index.astype(str)).dropna()
            err = float(np.mean(shipped.rename(index=str).reindex(g.index).astype(float) != g))
            rows.append((name, who, "label error of labels_", err, np.nan, np.nan, sec))
    print("\nmethod                  library    estimate     MSE  Pearson   NDCG  fit seconds")
    for name, who, kind, mse, cor, ndcg, sec in rows:
        print(f"{name:23s} {who:10s} {kind:8s} {mse:7.4f}  {cor:7.4f} {ndcg:6.4f}  {sec:8.2f}")


if __name__ == "__main__":
    main()
