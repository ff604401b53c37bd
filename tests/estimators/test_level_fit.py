"""``level_fit``: which model a fit's level probabilities come from, and what goes with them."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _crowds import careless_crowd

from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators import level_fit
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.results import decisions, label_choice, label_model

DEMO = Path(__file__).resolve().parents[2] / "demo_data"


def _fit(ratings, gold=None, **kw) -> OrdinalMixture:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OrdinalMixture(n_restarts=2, random_state=0, **kw).fit(ratings, gold=gold)


@pytest.fixture(scope="module")
def lenient_strict():
    """A crowd whose truth is a value and whose raters are lenient or strict (half a level)."""
    return simulate_crowd(n_items=400, n_annotators=30, bias_sd=0.5, spammer_share=0.0,
                          random_state=1)  # fmt: skip


@pytest.fixture(scope="module")
def trec_part() -> pd.DataFrame:
    """Ten queries of TREC RF10 (the demo's copy): relevance grades, a truth that is a level."""
    r = pd.read_csv(DEMO / "trec-rf10-ratings.csv", dtype={"query": str})
    return r[r["query"].isin(sorted(r["query"].unique())[:10])]


def test_continuous_labels_where_the_continuous_model_predicts_the_ratings_better(lenient_strict):
    m = _fit(lenient_strict.ratings)
    chose = m.model_["label_choice"]
    assert chose["labels"] == m.model_["labels"] == "continuous"
    assert chose["z"] > label_choice.Z_MIN and chose["difference"] > 0
    want = decisions.level_probabilities(
        m.items_["estimate"].to_numpy(float),
        m.items_["sd"].to_numpy(float),
        np.asarray(m.hyperparams_["thresholds"]),
    )
    assert m.level_proba_.tobytes() == want.tobytes()
    # the label is the most probable level, unless trusted raters agree on one
    clear = m.items_["clear_majority"]
    top = m.scale_.values[want.argmax(axis=1)]
    shipped = m.labels_.to_numpy(float)
    free = clear.isna().to_numpy()
    np.testing.assert_array_equal(shipped[free], top[free])
    np.testing.assert_array_equal(shipped[~free], clear[~free].to_numpy(float))
    # and the choice was right here: the continuous labels beat the confusion model's
    gold = lenient_strict.gold.reindex(m.estimates_.index).to_numpy(float)
    d = m.data_
    conf = label_model.level_posterior(
        d.ann, d.inst, d.level, d.n_annotators, d.n_instances, d.scale.k, weight=m.omega_
    )[0]
    assert np.mean(top != gold) < np.mean(m.scale_.values[conf.argmax(axis=1)] != gold) - 0.03


def test_confusion_labels_where_the_confusion_model_predicts_them_better(trec_part):
    m = _fit(trec_part)
    chose = m.model_["label_choice"]
    assert chose["labels"] == m.model_["labels"] == "confusion" and chose["z"] < 0
    d = m.data_
    want, _ = label_model.level_posterior(
        d.ann, d.inst, d.level, d.n_annotators, d.n_instances, d.scale.k, weight=m.omega_
    )
    assert m.level_proba_.tobytes() == want.tobytes()
    assert m.model_["gold_labels"] is None


def _dawid_skene_crowd(seed: int = 1, n_items: int = 1500, n_ann: int = 60, k: int = 5):
    """A truth that is a level; each annotator a confusion matrix whose errors land on any
    level (Dawid-Skene's process), 20% uniform spammers; five ratings an item."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_items)
    item = np.repeat(np.arange(n_items), 5)
    load = 1 / np.arange(1, n_ann + 1) ** 0.5
    ann = np.concatenate([rng.choice(n_ann, 5, replace=False, p=load / load.sum())
                          for _ in range(n_items)])  # fmt: skip
    conf = rng.dirichlet(np.ones(k), size=(n_ann, k)) + 7 * np.eye(k)
    conf /= conf.sum(axis=2, keepdims=True)
    level = np.array([rng.choice(k, p=conf[a, truth[i]]) for a, i in zip(ann, item, strict=True)])
    spam = rng.random(n_ann) < 0.2
    level = np.where(spam[ann], rng.integers(0, k, item.size), level)
    names = np.array([f"i{i:04d}" for i in range(n_items)], dtype=object)
    ratings = pd.DataFrame(
        {"annotator": [f"a{a}" for a in ann], "instance": names[item], "rating": level + 1}
    )
    return ratings, pd.Series(truth + 1.0, index=names)


def _label_errors(m: OrdinalMixture, gold: pd.Series) -> tuple[float, float]:
    """Label error of the shipped labels and of the continuous posterior's levels."""
    g = gold.reindex(m.estimates_.index).to_numpy(float)
    cont = decisions.level_probabilities(
        m.items_["estimate"].to_numpy(float),
        m.items_["sd"].to_numpy(float),
        np.asarray(m.hyperparams_["thresholds"]),
    )
    shipped = float(np.mean(m.labels_.to_numpy(float) != g))
    return shipped, float(np.mean(m.scale_.values[cont.argmax(axis=1)] != g))


def test_a_dawid_skene_crowd_gets_the_confusion_models_labels():
    """Errors that land on any level: the confusion model, its careless share included,
    predicts the ratings better than the continuous model, and its labels are better."""
    ratings, gold = _dawid_skene_crowd()
    m = _fit(ratings)
    chose = m.model_["label_choice"]
    assert chose["labels"] == "confusion" and chose["z"] < -label_choice.Z_MIN
    shipped, continuous = _label_errors(m, gold)
    assert shipped < continuous - 0.05


def test_the_continuous_model_must_also_beat_the_confusion_model_with_spam():
    """Careless raters on five levels, the spam component kept: it predicts their any-level
    errors better than the confusion model alone, but not better than the confusion model
    with the same spam component; and there the confusion model's labels are the better."""
    ratings, gold = careless_crowd(k=5, n_items=600)
    m = _fit(ratings, spam=True)
    chose = m.model_["label_choice"]
    assert chose["labels"] == "confusion" and chose["against"] == "with spam"
    d = m.data_
    plain = label_model.fit_levels(d.ann, d.inst, d.level, d.n_annotators, d.n_instances,
                                   d.scale.k)  # fmt: skip
    alone = label_choice.choose(level_fit.held_out(m, d, [(plain, None)])[0], len(d.ann))
    assert alone.z > label_choice.Z_MIN  # alone, the continuous labels would have shipped
    shipped, continuous = _label_errors(m, gold)
    assert shipped < continuous - 0.1


def test_weights_of_a_spam_fit_that_sees_no_items_are_not_used(monkeypatch):
    """Careless raters on a two-level scale: every restart of the spam fit explains the
    ratings as spam, so its omega would erase every item's evidence; the labels then count
    every rating 1 and are as good as the majority's. With the weights forced (a share of 0
    kept is enough) the labels are no better than a coin."""
    ratings, gold = careless_crowd()
    m = _fit(ratings, spam=True)
    check = m.model_["label_weights"]
    assert check["weights"] == "none" and check["kept"] < label_choice.KEEP_SHARE
    assert m.model_["labels"] == "confusion" and m.omega_.mean() < 0.1
    d = m.data_
    plain = label_model.fit_levels(d.ann, d.inst, d.level, d.n_annotators, d.n_instances,
                                   d.scale.k)  # fmt: skip
    assert m.level_proba_.tobytes() == plain.q.tobytes()
    g = gold.reindex(m.estimates_.index).to_numpy(float)
    votes = ratings.groupby("instance")["rating"].agg(lambda r: r.value_counts().idxmax())
    majority = np.mean(votes.reindex(m.estimates_.index).to_numpy(float) != g)
    shipped = np.mean(m.labels_.to_numpy(float) != g)
    assert shipped <= majority + 0.02
    monkeypatch.setattr(label_choice, "KEEP_SHARE", 0.0)
    forced = _fit(ratings, spam=True)
    assert forced.model_["label_weights"]["weights"] == "omega"
    assert np.mean(forced.labels_.to_numpy(float) != g) > shipped + 0.1


def test_the_labels_option_names_the_model_and_skips_the_choice(lenient_strict):
    forced = _fit(lenient_strict.ratings, labels="confusion")
    assert forced.model_["labels"] == "confusion" and "label_choice" not in forced.model_
    paper = _fit(lenient_strict.ratings, labels="continuous")
    assert paper.level_proba_ is None and "label_choice" not in paper.model_
    assert paper.model_["labels"] == "continuous"


def test_gold_items_keep_their_level_under_the_continuous_labels(lenient_strict):
    gold = lenient_strict.gold.iloc[::10]
    m = _fit(lenient_strict.ratings, gold=gold)
    assert m.model_["labels"] == "continuous"
    assert m.model_["gold_labels"].startswith(f"{len(gold)} gold items anchored the continuous")
    got = m.labels_.reindex(gold.index).to_numpy(float)
    np.testing.assert_array_equal(got, gold.to_numpy(float))
    # a gold item's label is its gold even where its trusted raters agree on another level
    # (one such item here), under either model
    plain = _fit(lenient_strict.ratings)
    overruled = plain.items_["clear_majority"].reindex(gold.index).to_numpy(float)
    assert (overruled != gold.to_numpy(float))[np.isfinite(overruled)].any()
    assert m.items_["clear_majority"].reindex(gold.index).isna().all()
    conf = _fit(lenient_strict.ratings, gold=gold, labels="confusion")
    got = conf.labels_.reindex(gold.index).to_numpy(float)
    np.testing.assert_array_equal(got, gold.to_numpy(float))


def _count_plain_fits(monkeypatch) -> list:
    """Every call of the labels' EM with every rating counting 1 and no gold, recorded."""
    calls, fit = [], label_model.fit_levels

    def counted(*args, **kw):
        if kw.get("weight") is None and kw.get("gold") is None:
            calls.append(args[0].size)
        return fit(*args, **kw)

    monkeypatch.setattr(label_model, "fit_levels", counted)
    return calls


def test_the_plain_confusion_fit_is_made_once_a_fit_even_with_a_refit(monkeypatch):
    """It depends on the ratings alone: the fit starts it beside the spam decision and every
    ``fit_levels`` of the fit uses it, the one after an explained-away refit too."""
    ratings, _ = careless_crowd()
    calls = _count_plain_fits(monkeypatch)
    m = _fit(ratings)  # the spam fit explains the items away: refitted without spam
    assert "explained the items away" in m.model_["spam_choice"]["why"]
    assert calls == [len(ratings)]
    calls.clear()
    _fit(ratings, labels="continuous")  # no confusion model: none made
    assert calls == []


@pytest.mark.parametrize("mode", ["choose", "confusion"])
@pytest.mark.parametrize("spam", [True, False])
def test_levels_from_the_shared_plain_fit_are_those_fitted_on_the_spot(trec_part, mode, spam):
    """``fit_levels`` given the plain fit on its way (a future) ships the bits it ships when it
    fits the plain model itself."""
    m = _fit(trec_part, spam=spam, labels=mode)
    shared = m.level_proba_.copy()
    m.annotator_flags_ = None
    level_fit.fit_levels(m, m.data_, None, mode)
    np.testing.assert_array_equal(m.level_proba_, shared)


@pytest.mark.parametrize("mode", ["choose", "confusion"])
@pytest.mark.parametrize("spam", [True, False])
@pytest.mark.parametrize("with_gold", [False, True])
def test_the_plain_fit_is_started_only_where_fit_levels_uses_it(
    trec_part, monkeypatch, mode, spam, with_gold
):
    """``plain_fit_used`` says what ``fit_levels`` does: given no plain fit on its way, it fits
    the plain confusion model (every rating 1, no gold) exactly where that says so."""
    gold = None
    if with_gold:
        items = sorted(trec_part["instance"].unique())[::10]
        gold = pd.Series(1.0, index=pd.Index(items, name="instance"))
    m = _fit(trec_part, gold=gold, spam=spam, labels=mode)
    m.annotator_flags_ = None
    calls = _count_plain_fits(monkeypatch)
    gold_m = None if gold is None else m._gold_vector(gold, m.data_)
    level_fit.fit_levels(m, m.data_, gold_m, mode)
    assert bool(calls) == level_fit.plain_fit_used(mode, spam, with_gold)
