"""``choose_labels``: one label fit and the one posterior read from it, without gold, with
gold, and on a scale of more levels than the model's classes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ordmix_core.labels import calibration, confusion_model
from ordmix_core.labels.choose import (
    MAX_CLASSES,
    choose_labels,
    label_posterior,
    level_classes,
    typical_rater,
)
from ordmix_core.labels.policy import DEFAULT
from ordmix_core.labels.posterior import expected_gain


def _crowd(seed: int = 0, k: int = 4, n_items: int = 300, n_ann: int = 25, per: int = 5):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_items)
    inst = np.repeat(np.arange(n_items), per)
    ann = np.concatenate([rng.choice(n_ann, per, replace=False) for _ in range(n_items)])
    noise = rng.normal(0, np.where(ann < n_ann // 3, 0.3, 1.2), inst.size)  # a third careful
    level = np.clip(np.round(truth[inst] + noise), 0, k - 1).astype(np.int64)
    return ann, inst, level, n_ann, n_items, truth


def test_without_gold_the_posterior_is_the_latent_one_through_the_careful_report():
    ann, inst, level, n, m, truth = _crowd()
    values = np.arange(1.0, 5.0)
    res = choose_labels(ann, inst, level, n, m, values)
    fit = confusion_model.fit(ann, inst, level, n, m, 4)
    np.testing.assert_array_equal(res.fit.q, fit.q)  # the one label fit, as fitted alone
    n_ratings = np.bincount(ann, minlength=n)
    careful = calibration.reference_confusion(fit.careful, fit.rho, n_ratings, 0.35)
    report = 0.25 * np.eye(4) + 0.75 * careful
    np.testing.assert_allclose(res.report, report, rtol=1e-12)
    np.testing.assert_allclose(res.posterior.proba, fit.q @ report, rtol=1e-12, atol=1e-15)
    rater = (n_ratings[:, None, None] * fit.confusion).sum(axis=0) / n_ratings.sum()
    np.testing.assert_allclose(typical_rater(fit.confusion, n_ratings), rater, rtol=1e-12)
    np.testing.assert_allclose(
        res.posterior.gain, expected_gain(fit.q, rater, report), rtol=1e-9, atol=1e-15
    )
    assert not res.expert and res.temperature == 1.0 and res.classes is None
    votes = np.zeros((m, 4))
    np.add.at(votes, (inst, level), 1)
    majority = np.mean(votes.argmax(axis=1) != truth)
    assert np.mean(res.posterior.proba.argmax(axis=1) != truth) < majority - 0.05
    d = res.describe()
    assert d["model"].endswith("a careful annotator's answer") and d["converged"]
    assert d["report_agreement"] == pytest.approx((fit.rho * np.diag(report)).sum())


def test_the_policy_reaches_the_report():
    ann, inst, level, n, m, _ = _crowd(1)
    fit = confusion_model.fit(ann, inst, level, n, m, 4)
    values = np.arange(4.0)
    latent = label_posterior(
        fit, ann, inst, level, values, policy=replace(DEFAULT, latent_weight=1)
    )
    np.testing.assert_allclose(latent.posterior.proba, fit.q, rtol=1e-12)
    wide = label_posterior(
        fit, ann, inst, level, values, policy=replace(DEFAULT, reference_share=1)
    )
    assert not np.allclose(wide.report, label_posterior(fit, ann, inst, level, values).report)


def test_with_gold_the_experts_confusion_reports_and_gold_items_are_their_level():
    ann, inst, level, n, m, truth = _crowd(2)
    gold = np.full(m, -1)
    gold[:60] = truth[:60]
    res = choose_labels(ann, inst, level, n, m, np.arange(4.0), gold)
    assert res.expert
    np.testing.assert_array_equal(res.report, res.fit.expert)
    p = res.posterior.proba
    np.testing.assert_array_equal(p[:60], np.eye(4)[truth[:60]])
    assert (res.posterior.gain[:60] == 0).all()
    q = calibration.tempered(res.fit.q[60:], res.temperature)
    np.testing.assert_allclose(p[60:], q @ res.report, rtol=1e-12, atol=1e-15)
    assert res.describe()["model"].endswith("the expert's answer learned from gold")


def test_a_slider_is_fitted_on_classes_of_adjacent_levels_and_spread_back():
    rng = np.random.default_rng(3)
    m, n, per, k = 120, 12, 6, 101
    truth = rng.uniform(10, 90, m)
    inst = np.repeat(np.arange(m), per)
    ann = np.concatenate([rng.choice(n, per, replace=False) for _ in range(m)])
    level = np.clip(np.round(truth[inst] + rng.normal(0, 8, inst.size)), 0, 100).astype(np.int64)
    values = np.arange(101.0)
    res = choose_labels(ann, inst, level, n, m, values)
    classes = level_classes(k, MAX_CLASSES)
    np.testing.assert_array_equal(res.classes, classes)
    assert classes.max() + 1 == MAX_CLASSES and (np.diff(classes) >= 0).all()
    p = res.posterior.proba
    assert p.shape == (m, k)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # within a class, the probability is shared as the ratings are (plus 1e-3 a level)
    counts = np.bincount(level, minlength=k) + 1e-3
    in_class = classes == classes[50]
    share = p[:, in_class] / p[:, in_class].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(share, np.tile(counts[in_class] / counts[in_class].sum(), (m, 1)))
    est = res.posterior.estimates()[0]
    assert np.corrcoef(est, truth)[0, 1] > 0.9
    assert "101 levels fitted as 11 classes" in res.describe()["classes"]
