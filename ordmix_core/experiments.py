"""The paper's robustness experiments: fake uniform spam added to a real crowd (Figures 2, 3)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .compare import ABLATION, TABLE1, Seed, compare_methods, parse_methods
from .data import CrowdData, Scale, prepare


def add_spam(data: CrowdData, per_instance: int, rng: np.random.Generator) -> pd.DataFrame:
    """The ratings plus ``per_instance`` uniform ratings per instance from fake annotators.

    Fake annotators carry, on average, as many ratings as a real one (the paper's setup);
    an instance's fake ratings come from distinct fake annotators where there are enough.
    Returns a long ratings frame (annotator, instance, rating[, query]).
    """
    real = pd.DataFrame(
        {
            "annotator": data.annotators[data.ann],
            "instance": data.instances[data.inst],
            "rating": data.values,
        }
    )
    if data.inst_query is not None:
        real["query"] = data.inst_query[data.inst]
    if per_instance <= 0:
        return real
    m = data.n_instances
    n_fake = per_instance * m
    load = data.n_ratings / data.n_annotators
    n_ann = max(per_instance, int(np.ceil(n_fake / load)))
    # per instance, per_instance distinct fake annotators: offsets from a random base
    base = rng.integers(0, n_ann, m)
    offs = np.arange(per_instance)
    fake_ann = (base[:, None] + offs[None, :] * max(n_ann // per_instance, 1)) % n_ann
    inst = np.repeat(np.arange(m), per_instance)
    fake = pd.DataFrame(
        {
            "annotator": np.char.add("fake-spammer-", fake_ann.ravel().astype(str)).astype(object),
            "instance": data.instances[inst],
            "rating": data.scale.values[rng.integers(0, data.scale.k, n_fake)],
        }
    )
    if data.inst_query is not None:
        fake["query"] = data.inst_query[inst]
    return pd.concat([real, fake], ignore_index=True)


def spam_experiment(
    ratings: pd.DataFrame | CrowdData,
    gold: pd.Series | pd.DataFrame,
    levels: Iterable[int] = range(10),
    methods: str | Sequence[str] | None = None,
    *,
    n_restarts: int = 10,
    random_state: Seed = None,
    scale: Scale | Sequence[float] | str | None = None,
    callback: Callable[[int, str], None] | None = None,
) -> pd.DataFrame:
    """Figure 2: every method at each number of fake ratings per instance.

    Returns a long frame ``spam_level, method, mse, correlation, ndcg, seconds``.
    """
    names = parse_methods(methods, TABLE1)
    data = ratings if isinstance(ratings, CrowdData) else prepare(ratings, scale, "instance")
    rng = np.random.default_rng(random_state)
    out = []
    for level in levels:
        noisy = add_spam(data, int(level), rng)
        noisy_data = prepare(noisy, data.scale, "instance")

        def report(name: str, i: int, n: int, level: int = int(level)) -> None:
            if callback is not None:
                callback(level, name)

        table, _ = compare_methods(
            noisy_data, gold, names, n_restarts=n_restarts, random_state=rng, callback=report
        )
        table.insert(0, "spam_level", int(level))
        out.append(table)
    return pd.concat(out, ignore_index=True)


def ablation_experiment(
    ratings: pd.DataFrame | CrowdData,
    gold: pd.Series | pd.DataFrame,
    levels: Iterable[int] = range(10),
    **kw,
) -> pd.DataFrame:
    """Figure 3: the four variants (ordinal/real-valued x spam/no-spam) under the same spam."""
    return spam_experiment(ratings, gold, levels, ABLATION, **kw)
