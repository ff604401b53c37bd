"""Simulated crowds with known truth: for tests, benchmarks and the teaching simulator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..numerics import libm
from .scale import Scale


@dataclass
class SimulatedCrowd:
    """``ratings`` (annotator, instance, rating, query), ``truth`` (Series by instance,
    the real-valued z), ``gold`` (Series by instance, z rounded to the nearest level) and
    ``spammers`` (Series by annotator, True for spammers), ``bias`` (Series by annotator,
    the bias b_n each good annotator adds to the truth; zeros without ``bias_sd``) and
    ``favourite`` (Series by annotator: the level a favourite-answer spammer prefers, NaN
    for the others)."""

    ratings: pd.DataFrame
    truth: pd.Series
    gold: pd.Series
    spammers: pd.Series
    bias: pd.Series | None = None
    favourite: pd.Series | None = None


def _favourite_answers(
    rng: np.random.Generator,
    spam: np.ndarray,
    ann: np.ndarray,
    noise_level: np.ndarray,
    k: int,
    share: float,
    weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """A ``share`` of the spammers (``spam`` (N,) bool) gets a favourite level, drawn uniformly;
    each of their ratings (``ann`` (L,)) is it with probability ``weight``, else their uniform
    ``noise_level`` (L,). Returns the favourites (N,: NaN for none) and the spam levels (L,)."""
    fav = np.full(spam.size, np.nan)
    if share <= 0:
        return fav, noise_level
    spam_ids = np.flatnonzero(spam)
    n_fav = int(round(share * spam_ids.size))
    fav_ids = rng.choice(spam_ids, n_fav, replace=False) if n_fav else spam_ids[:0]
    fav[fav_ids] = rng.integers(0, k, n_fav)
    pick = np.isfinite(fav[ann]) & (rng.random(ann.size) < weight)
    return fav, np.where(pick, np.nan_to_num(fav[ann]).astype(int), noise_level)


def simulate_crowd(
    n_items: int = 500,
    n_annotators: int = 40,
    ratings_per_item: int = 5,
    spammer_share: float = 0.3,
    difficulty_spread: float = 0.5,
    scale: Scale | None = None,
    n_queries: int = 20,
    expertise: float = 4.0,
    random_state: int | np.random.Generator | None = None,
    bias_sd: float = 0.0,
    favourite_share: float = 0.0,
    favourite_weight: float = 0.7,
    unit: float | None = None,
    round_share: float = 0.0,
    round_to: float | None = None,
) -> SimulatedCrowd:
    """Draw a crowd from the ordinal-discrete-mixture's generative process.

    Truth z ~ uniform over the scale's span; good annotators rate ``x ~ N(z, 1/(tau*delta))``
    thresholded to the scale, with tau ~ Gamma(4, 4/expertise); spammers rate uniformly at
    random. Each query's inverse difficulty delta is ``exp(N(0, difficulty_spread))``.
    Annotator loads are uneven (Zipf-like), each item gets ``ratings_per_item`` distinct raters.
    With ``bias_sd > 0`` good annotators rate ``x ~ N(z + b_n, ...)``, ``b_n ~ N(0,
    (bias_sd step)^2)`` (lenient > 0, strict < 0). A share ``favourite_share`` of the spammers
    has a favourite answer: each of their ratings is their favourite level (drawn uniformly)
    with probability ``favourite_weight``, else uniform.

    ``unit``: the distance on the scale that ``expertise`` and ``bias_sd`` are measured in
    (default the scale's step): a 0..100 slider rated as roughly as a 1..11 scale is
    ``unit=10`` (a typical good rating then lands about 5 points from the truth). A share
    ``round_share`` of the good annotators round each answer to the nearest multiple of
    ``round_to`` (default ``unit``), as people do on a slider (0, 10, 50, 100). The defaults
    draw exactly the crowd they drew before these options existed (the extra draws come
    after).
    """
    rng = np.random.default_rng(random_state)
    scale = scale or Scale(np.arange(1.0, 6.0))
    n_ratings_item = min(ratings_per_item, n_annotators)
    b = scale.thresholds
    z = rng.uniform(b[0] + 0.25 * scale.step, b[-1] - 0.25 * scale.step, n_items)
    query = rng.integers(0, max(n_queries, 1), n_items)
    delta = libm.exp(rng.normal(0.0, difficulty_spread, max(n_queries, 1)))
    unit = scale.step if unit is None else float(unit)
    tau = rng.gamma(4.0, expertise / 4.0, n_annotators) / unit**2
    n_spam = int(round(spammer_share * n_annotators))
    spam = np.zeros(n_annotators, dtype=bool)
    spam[rng.choice(n_annotators, n_spam, replace=False)] = True
    load = 1.0 / np.arange(1, n_annotators + 1) ** 0.5
    load = rng.permutation(load / load.sum())
    # each item: distinct annotators drawn with probability proportional to load
    keys = libm.power(rng.random((n_items, n_annotators)), 1.0 / load)
    raters = np.argsort(-keys, axis=1)[:, :n_ratings_item]
    item = np.repeat(np.arange(n_items), n_ratings_item)
    ann = raters.ravel()
    x = rng.normal(z[item], 1.0 / np.sqrt(tau[ann] * delta[query[item]]))
    noise_level = rng.integers(0, scale.k, ann.size)
    bias = np.zeros(n_annotators)
    if bias_sd > 0:
        bias = np.where(spam, 0.0, rng.normal(0.0, bias_sd * unit, n_annotators))
        x = x + bias[ann]
    fav, noise_level = _favourite_answers(
        rng, spam, ann, noise_level, scale.k, favourite_share, favourite_weight
    )
    if round_share > 0:  # after every other draw: the crowd without rounding is unchanged
        step = unit if round_to is None else float(round_to)
        rounds = (rng.random(n_annotators) < round_share) & ~spam
        x = np.where(rounds[ann], np.round(x / step) * step, x)
    level = np.clip(np.searchsorted(b, x, side="right") - 1, 0, scale.k - 1)
    level = np.where(spam[ann], noise_level, level)
    return _as_crowd(scale, z, query, item, ann, level, spam, bias, fav)


def _as_crowd(
    scale: Scale,
    z: np.ndarray,
    query: np.ndarray,
    item: np.ndarray,
    ann: np.ndarray,
    level: np.ndarray,
    spam: np.ndarray,
    bias: np.ndarray,
    fav: np.ndarray,
) -> SimulatedCrowd:
    """The drawn crowd as frames: ``z``, ``query`` (M,) each item's truth and query; ``item``,
    ``ann``, ``level`` (R,) each rating's codes and level index; ``spam``, ``bias``, ``fav``
    (N,) each annotator's spammer flag, bias and favourite level index (NaN: none)."""
    names_i = np.array([f"item{i:05d}" for i in range(z.size)], dtype=object)
    names_a = np.array([f"worker{j:03d}" for j in range(spam.size)], dtype=object)
    ratings = pd.DataFrame(
        {
            "annotator": names_a[ann],
            "instance": names_i[item],
            "rating": scale.values[level],
            "query": np.array([f"q{q:03d}" for q in query], dtype=object)[item],
        }
    )
    idx = pd.Index(names_i, name="instance")
    nearest = np.abs(z[:, None] - scale.values[None, :]).argmin(axis=1)
    return SimulatedCrowd(
        ratings=ratings,
        truth=pd.Series(z, index=idx, name="truth"),
        gold=pd.Series(scale.values[nearest], index=idx, name="truth"),
        spammers=pd.Series(spam, index=pd.Index(names_a, name="annotator"), name="spammer"),
        bias=pd.Series(bias, index=pd.Index(names_a, name="annotator"), name="bias"),
        favourite=pd.Series(
            np.where(np.isfinite(fav), scale.values[np.nan_to_num(fav).astype(int)], np.nan),
            index=pd.Index(names_a, name="annotator"),
            name="favourite",
        ),
    )
