"""The default fit's winner against the same fit with tighter tolerances (a stopping-rule check).

    python benchmarks/tighter_tolerance.py [ratings.csv] [--seed S] [--granularity G]
        [--policy FIELD=VALUE ...]

Default: the demo TREC RF10 ratings, seed 0, instance granularity; ``--policy`` changes a
field of the fit's ``FitPolicy`` in both fits (``reliability_share=0``: the stopping rule
without its annotators' half). The default's alternative (its still-moving
annotators carried the way they were going) and the items it marks unstable; for each tighter
setting, the winning restart's mixture sweeps and bound, whether its trace starts with the
default's (the same path), how far its items' means are from the default's, and how many of
the items it moves by more than 0.1 the default marks unstable.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import numpy as np

from ordmix_core import OrdinalMixture
from ordmix_core.fit import restarts
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.io import read_ratings

DEMO = Path(__file__).resolve().parents[1] / "demo_data" / "trec-rf10-ratings.csv"
SELECT = restarts.select
TIGHTER = {
    "100x": dict(tol=1e-8, tol_estimate=3e-4),
    "300x estimates": dict(tol=1e-8, tol_estimate=1e-4),
}


def fit(df, seed: int, **kw) -> tuple[OrdinalMixture, dict]:
    """The fit and its restarts' final runs, by restart."""
    seen: dict = {}

    def spy(results, *args, **kwargs):
        seen.update({run.restart: run for run in results})
        return SELECT(results, *args, **kwargs)

    restarts.select = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return OrdinalMixture(random_state=seed, **kw).fit(df), seen
    finally:
        restarts.select = SELECT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ratings", nargs="?", default=str(DEMO))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--granularity", default="instance")
    ap.add_argument("--policy", nargs="*", default=[], metavar="FIELD=VALUE")
    a = ap.parse_args()
    fields = dict(item.split("=", 1) for item in a.policy)
    kinds = {f.name: f.type for f in dataclasses.fields(DEFAULT)}
    OrdinalMixture.fit_policy = dataclasses.replace(
        DEFAULT, **{k: (int if kinds[k] in (int, "int") else float)(v) for k, v in fields.items()}
    )
    df = read_ratings(a.ratings)
    m, runs = fit(df, a.seed, granularity=a.granularity)
    b = m.best_restart_
    run = runs[b]
    print(f"default: winner {b}, {len(run.trace)} mixture sweeps, bound {run.lower_bound:.2f}")
    alt = m.alternative_
    unstable = m.items_["unstable"].to_numpy()
    if alt is None:
        print("  no alternative (no annotator still moving)")
    else:
        print(
            f"  alternative: {len(alt['annotators'])} still-moving annotator(s) "
            f"({', '.join(map(str, alt['annotators'][:5]))}), {alt['n_iter']} sweeps, bound "
            f"{alt['bound_above_winner']:+.2f} against the winner's, near-tied "
            f"{alt['near_tied']}"
        )
    print(f"  unstable: {unstable.sum()} of {len(unstable)} items")
    for name, kw in TIGHTER.items():
        mt, rt = fit(df, a.seed, granularity=a.granularity, max_iter=5000, **kw)
        t = rt[b]
        d = np.abs(run.state.mu_m - t.state.mu_m)
        same = t.trace[: len(run.trace)] == run.trace
        print(
            f"{name} {kw}: winner {mt.best_restart_}, {len(t.trace)} mixture sweeps, bound "
            f"{t.lower_bound:.2f}, same path {same}; items moved > 0.1: {(d > 0.1).sum()}, "
            f"> 0.01: {(d > 0.01).sum()}, largest {d.max():.3f}; of those > 0.1 marked "
            f"unstable by the default: {(unstable & (d > 0.1)).sum()}"
        )


if __name__ == "__main__":
    main()
