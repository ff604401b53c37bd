"""Ordinal minimax conditional entropy (Zhou, Liu, Platt & Meek, ICML 2014) on the shared sets.

The best published label error on web-zhou2014 (10.33%) is this method's. Its annotator model
is the label model's adjacent-category confusion (``labels/confusion_model.py``): the log-odds
of a rating ``k`` given the truth ``c`` add, over each threshold ``s``, a term that depends on
which side of ``s`` the truth and the rating lie. Its regulariser differs: an L2 pull of every
annotator's terms (``--pull``) and every item's (``--item-pull``; 0: no item terms) towards
zero, a uniform confusion, with a uniform class prior, where ours learns the annotators' prior
(its mean anchored at an unbiased annotator) and the class prior. Fitted by EM: the M-step is
L-BFGS on all terms, the E-step each item's posterior; started from the vote shares.

    python benchmarks/minimax_entropy.py --pulls 1,3,10,30
    python benchmarks/minimax_entropy.py --pulls 30 --item-pull 10 --sets web-zhou2014

Prints the label error on gold (the posterior's most probable level) for each set and pull.
Minutes a set: a measurement, not a method of the package.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ordmix_core.io.readers import read_gold, read_ratings  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = ("web-zhou2014", "trec-rf10", "adult-content2", "metaphor-novelty")


def features(k: int) -> np.ndarray:
    """(K, K, 4(K-1)): for each threshold s, one indicator for each of the four ways truth c
    and rating k lie about it (both at or above, c only, k only, both below)."""
    c = np.arange(k)[:, None, None]
    r = np.arange(k)[None, :, None]
    s = np.arange(1, k)[None, None, :]
    a, b = c >= s, r >= s
    f = np.stack([a & b, a & ~b, ~a & b, ~a & ~b], axis=-1).astype(float)
    return f.reshape(k, k, 4 * (k - 1))


def fit(ann, inst, lev, n_ann, n_inst, k, pull, item_pull, rounds=30, tol=1e-4):
    """(M, K) each item's posterior over the levels. ``ann``, ``inst``, ``lev`` (R,) codes."""
    f = features(k)
    nf = f.shape[2]
    rows = np.arange(len(lev))
    fk = f[:, lev, :].transpose(1, 0, 2)  # (R, K, F): the features of each rating's level
    n_item = n_inst if item_pull > 0 else 0
    q = np.zeros((n_inst, k))
    np.add.at(q, (inst, lev), 1.0)
    q /= q.sum(1, keepdims=True)

    def terms(x):
        t = x[n_item * nf :].reshape(n_ann, nf)
        w = t[ann]
        if n_item:
            s = x[: n_item * nf].reshape(n_item, nf)
            w = w + s[inst]
        theta = np.einsum("ckf,rf->rck", f, w)  # (R, K, K)
        log_z = logsumexp(theta, axis=2)
        return theta, log_z

    def objective(x, q):
        theta, log_z = terms(x)
        ll = theta[rows, :, lev] - log_z  # (R, K): log P(rating | truth c)
        p = np.exp(theta - log_z[..., None])
        qr = q[inst]
        g_r = np.einsum("rc,rcf->rf", qr, fk - np.einsum("rck,ckf->rcf", p, f))
        t = x[n_item * nf :].reshape(n_ann, nf)
        gt = np.zeros((n_ann, nf))
        np.add.at(gt, ann, g_r)
        value = -(qr * ll).sum() + pull / 2 * (t**2).sum()
        grads = [(-gt + pull * t).ravel()]
        if n_item:
            s = x[: n_item * nf].reshape(n_item, nf)
            gs = np.zeros((n_item, nf))
            np.add.at(gs, inst, g_r)
            value += item_pull / 2 * (s**2).sum()
            grads.insert(0, (-gs + item_pull * s).ravel())
        return value, np.concatenate(grads)

    x = np.zeros((n_item + n_ann) * nf)
    for _ in range(rounds):
        x = minimize(objective, x, args=(q,), jac=True, method="L-BFGS-B",
                     options={"maxiter": 100}).x  # fmt: skip
        theta, log_z = terms(x)
        lq = np.zeros((n_inst, k))
        np.add.at(lq, inst, theta[rows, :, lev] - log_z)
        new = np.exp(lq - logsumexp(lq, axis=1, keepdims=True))
        moved, q = np.abs(new - q).max(), new
        if moved < tol:
            break
    return q


def label_error(name: str, pull: float, item_pull: float) -> float:
    ratings = read_ratings(DATA / name / "ratings.csv")
    gold = read_gold(DATA / name / "gold.csv")
    values = np.sort(ratings["rating"].unique())
    lev = np.searchsorted(values, ratings["rating"].to_numpy())
    annotators, ann = np.unique(ratings["annotator"].to_numpy(), return_inverse=True)
    items, inst = np.unique(ratings["instance"].to_numpy(), return_inverse=True)
    q = fit(ann, inst, lev, len(annotators), len(items), len(values), pull, item_pull)
    label = dict(zip(items, values[q.argmax(1)], strict=True))
    scored = [(label[i], t) for i, t in gold.items() if i in label]
    return float(np.mean([a != b for a, b in scored]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--pulls", default="1,3,10,30", help="the annotators' L2 pulls")
    ap.add_argument("--item-pull", type=float, default=0.0, help="0: no item terms")
    args = ap.parse_args(argv)
    for name in args.sets.split(","):
        for pull in (float(p) for p in args.pulls.split(",")):
            err = label_error(name, pull, args.item_pull)
            print(f"{name}  pull {pull:g}  item pull {args.item_pull:g}  label error {err:.4f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
