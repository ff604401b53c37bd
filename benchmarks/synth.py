"""Large simulated crowds built directly as arrays (memory O(L)), for the benchmarks.

``simulate.simulate_crowd`` draws raters from a dense items x annotators matrix, fine for tests
but not for 10M ratings; this module draws the same generative process (truth uniform over the
scale, Zipf-like annotator loads, 30% uniform spammers, per-query difficulty) without it, and
optionally a share of biased raters (each rating half a level to a level high, or low).
Raters of one item may repeat (as TREC RF10 allows); that does not change the per-rating cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ordmix_core.data.crowd import CrowdData
from ordmix_core.data.scale import Scale


def synth_arrays(
    n_ratings: int,
    ratings_per_item: int = 5,
    n_annotators: int | None = None,
    n_queries: int = 1000,
    k: int = 5,
    spammer_share: float = 0.3,
    seed: int = 0,
    biased_share: float = 0.0,
) -> dict[str, np.ndarray]:
    """Codes ``ann, inst, level`` (L,) and ``query_of_inst, truth`` (M,), each int32, of a
    simulated crowd; ``truth`` is each item's true level (0-based), for scoring labels.

    ``biased_share`` of the annotators add a bias of 0.5 to 1 level, up or down, to every
    rating; it is drawn from a generator of its own, so that a crowd without biased raters is
    the same crowd as before it existed."""
    rng = np.random.default_rng(seed)
    m = max(n_ratings // ratings_per_item, 1)
    n = n_annotators or max(n_ratings // 500, 20)
    scale = Scale(np.arange(1.0, k + 1.0))
    b = scale.thresholds
    z = rng.uniform(b[0] + 0.25, b[-1] - 0.25, m)
    query = rng.integers(0, n_queries, m).astype(np.int32)
    delta = np.exp(rng.normal(0.0, 0.5, n_queries))
    tau = rng.gamma(4.0, 1.0, n)
    spam = rng.random(n) < spammer_share
    load = 1.0 / np.arange(1, n + 1) ** 0.5
    cdf = np.cumsum(rng.permutation(load / load.sum()))
    inst = (np.arange(n_ratings) // ratings_per_item).astype(np.int32) % m
    ann = np.minimum(np.searchsorted(cdf, rng.random(n_ratings)), n - 1).astype(np.int32)
    x = z[inst] + rng.standard_normal(n_ratings) / np.sqrt(tau[ann] * delta[query[inst]])
    if biased_share > 0:
        side = np.random.default_rng([seed, 1])
        shift = side.uniform(0.5, 1.0, n) * side.choice([-1.0, 1.0], n)
        x += np.where(side.random(n) < biased_share, shift, 0.0)[ann]
    level = np.clip(np.searchsorted(b, x, side="right") - 1, 0, k - 1).astype(np.int32)
    del x
    sp = spam[ann]
    level[sp] = rng.integers(0, k, int(sp.sum()))
    truth = np.clip(np.searchsorted(b, z, side="right") - 1, 0, k - 1).astype(np.int32)
    return {"ann": ann, "inst": inst, "query_of_inst": query, "level": level, "truth": truth}


def synth_crowd(n_ratings: int, granularity: str = "query", seed: int = 0, **kw) -> CrowdData:
    """A :class:`CrowdData` of ``n_ratings`` simulated ratings (no string IDs: fast, small)."""
    a = synth_arrays(n_ratings, seed=seed, **kw)
    n = int(a["ann"].max()) + 1
    m = int(a["inst"].max()) + 1
    k = kw.get("k", 5)
    data = CrowdData(
        scale=Scale(np.arange(1.0, k + 1.0)),
        ann=a["ann"],
        inst=a["inst"],
        level=a["level"],
        annotators=np.arange(n),
        instances=np.arange(m),
        inst_query=a["query_of_inst"],
    )
    return data.with_granularity(granularity)


def synth_frame(n_ratings: int, seed: int = 0, **kw) -> pd.DataFrame:
    """The same crowd as a ratings table ``annotator, instance, rating, query`` (for CSVs)."""
    a = synth_arrays(n_ratings, seed=seed, **kw)
    return pd.DataFrame(
        {
            "annotator": a["ann"],
            "instance": a["inst"],
            "rating": a["level"] + 1,
            "query": a["query_of_inst"][a["inst"]],
        }
    )
