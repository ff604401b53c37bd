"""The paper's robustness experiments: fake uniform spam added to a real crowd (Figures 2, 3)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..data.coding import id_array
from ..data.crowd import CrowdData, prepare
from ..data.scale import Scale
from ..errors import InputError
from .compare import ABLATION, TABLE1, Seed, compare_methods, select_methods

#: resource bounds: fake ratings per instance (the paper goes to 9) and levels per run
MAX_SPAM_LEVEL = 100
MAX_LEVELS = 100


def check_levels(levels: Iterable[Any] | str) -> list[int]:
    """Spam levels from ``"0,1,2"`` or an iterable: whole numbers 0..MAX_SPAM_LEVEL.

    InputError otherwise: each level adds that many ratings per instance, so a huge one would
    allocate without bound.
    """
    items = (
        [t.strip() for t in levels.split(",") if t.strip()]
        if isinstance(levels, str)
        else list(levels)
    )
    out = []
    for x in items:
        try:
            v = int(x) if isinstance(x, str) else x
        except ValueError:
            v = None
        if (
            not isinstance(v, (int, np.integer))
            or isinstance(v, bool)
            or not (0 <= v <= MAX_SPAM_LEVEL)
        ):
            raise InputError(
                f"spam levels must be whole numbers from 0 to {MAX_SPAM_LEVEL} (fake ratings "
                f"per instance), like 0,1,2; not {str(x)[:40]!r}"
            )
        out.append(int(v))
    if not out or len(out) > MAX_LEVELS:
        raise InputError(f"give from 1 to {MAX_LEVELS} spam levels, like 0,1,2 (got {len(out)})")
    return out


def add_spam(data: CrowdData, per_instance: int, rng: np.random.Generator) -> pd.DataFrame:
    """The ratings plus ``per_instance`` uniform ratings per instance from fake annotators.

    Fake annotators carry, on average, as many ratings as a real one (the paper's setup);
    an instance's fake ratings come from distinct fake annotators where there are enough.
    Returns a long ratings frame (annotator, instance, rating[, query]).
    """
    # the ratings as the scale writes them: its values, or the names of named levels
    written = data.scale.values if data.scale.names is None else data.scale.labels
    real = pd.DataFrame(
        {
            "annotator": data.annotators[data.ann],
            "instance": id_array(data.instances)[data.inst],
            "rating": written[data.level],
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
            "instance": id_array(data.instances)[inst],
            "rating": written[rng.integers(0, data.scale.k, n_fake)],
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
    n_restarts: int | None = None,
    random_state: Seed = None,
    scale: Scale | Sequence[float] | str | None = None,
    granularity: str | None = None,
    params: Mapping[str, Any] | None = None,
    callback: Callable[[int, str], None] | None = None,
    default: Sequence[str] = TABLE1,
) -> pd.DataFrame:
    """Figure 2: every method at each number of fake ratings per instance.

    ``granularity``, ``params``: as :func:`~ordmix_core.evaluation.compare.compare_methods`;
    ``default``: the methods run when none are named. Returns a long frame ``spam_level, method,
    mse, correlation, ndcg, label_error, seconds, n_gold``.
    """
    levels = check_levels(levels)
    data = ratings if isinstance(ratings, CrowdData) else prepare(ratings, scale, "instance")
    names = select_methods(methods, granularity, data.inst_query is not None, default)
    rng = np.random.default_rng(random_state)
    out = []
    for level in levels:
        noisy = add_spam(data, int(level), rng)
        noisy_data = prepare(noisy, data.scale, "instance")

        def report(name: str, i: int, n: int, level: int = int(level)) -> None:
            if callback is not None:
                callback(level, name)

        table, _ = compare_methods(
            noisy_data,
            gold,
            names,
            n_restarts=n_restarts,
            random_state=rng,
            granularity=granularity,
            params=params,
            callback=report,
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
    """Figure 3: the four variants (ordinal/real-valued x spam/no-spam) under the same spam,
    at ``granularity`` (default global, as the paper's figure)."""
    return spam_experiment(ratings, gold, levels, None, default=ABLATION, **kw)
