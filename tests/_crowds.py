"""Small crowds made for tests, whose shape a test's point depends on."""

from __future__ import annotations

import numpy as np
import pandas as pd


def careless_crowd(k: int = 2, n_items: int = 300, seed: int = 1):
    """A truth that is a level; twelve annotators, each right 80% of the time and otherwise
    answering another level at random; three ratings an item. No one is a spammer, but on a
    short scale the spam fit explains almost every rating as spam."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_items)
    item = np.repeat(np.arange(n_items), 3)
    ann = np.concatenate([rng.choice(12, 3, replace=False) for _ in range(n_items)])
    wrong = (truth[item] + rng.integers(1, k, item.size)) % k
    level = np.where(rng.random(item.size) < 0.8, truth[item], wrong)
    names = np.array([f"i{i:03d}" for i in range(n_items)], dtype=object)
    ratings = pd.DataFrame(
        {"annotator": [f"a{a}" for a in ann], "instance": names[item], "rating": level}
    )
    return ratings, pd.Series(truth.astype(float), index=names)
