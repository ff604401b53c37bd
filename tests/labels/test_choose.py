"""``choose_labels``: one label fit and the one posterior read from it, without gold, with
gold, and on a scale of more levels than the model's classes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ordmix_core.labels import calibration, confusion_model
from ordmix_core.labels.choose import (
    MAX_CLASSES,
    LabelResult,
    choose_labels,
    fine_labels_reason,
    label_posterior,
    level_classes,
    report_map,
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
    careful = calibration.reference_confusion(fit.careful, fit.rho, n_ratings, 0.25)
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


def _slider(seed: int = 3, m: int = 120, n: int = 12, per: int = 6):
    """A 0..100 crowd whose ratings stay within 20..80: the scale's ends are never rated."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(30, 70, m)
    inst = np.repeat(np.arange(m), per)
    ann = np.concatenate([rng.choice(n, per, replace=False) for _ in range(m)])
    noise = rng.normal(0, 8, inst.size)
    level = np.clip(np.round(truth[inst] + noise), 20, 80).astype(np.int64)
    return ann, inst, level, n, m, np.arange(101.0)


def test_a_slider_with_gold_fits_the_expert_on_classes_and_gives_gold_items_their_level():
    ann, inst, level, n, m, values = _slider()
    assert level.max() < 100 and level.min() > 0  # unrated levels at both ends
    gold = np.full(m, -1)
    gold[:30] = np.r_[0, 100, np.arange(28) * 3 + 10]  # the scale's ends among them
    res = choose_labels(ann, inst, level, n, m, values, gold)
    classes = level_classes(101, MAX_CLASSES)
    coarse_gold = np.where(gold >= 0, classes[np.maximum(gold, 0)], -1)
    n_ratings = np.bincount(ann, minlength=n)

    def expert_prior(careful, rho):
        return report_map(careful, rho, n_ratings, DEFAULT)

    fit = confusion_model.fit(
        ann, inst, classes[level], n, m, MAX_CLASSES, coarse_gold, expert_prior
    )
    np.testing.assert_array_equal(res.fit.q, fit.q)  # the gold went in as classes
    assert not np.array_equal(fit.q, confusion_model.fit(ann, inst, classes[level], n, m, 11).q)
    assert res.expert and res.report.shape == (MAX_CLASSES, MAX_CLASSES)
    p = res.posterior.proba
    np.testing.assert_array_equal(p[:30], np.eye(101)[gold[:30]])
    assert (res.posterior.gain[:30] == 0).all() and (res.posterior.gain[30:] > 0).any()
    np.testing.assert_allclose(p[30:].sum(axis=1), 1.0)
    assert (p[30:, :20] > 0).all()  # an unrated level keeps a little
    # gold only at the scale's lowest level is gold all the same
    low = np.full(m, -1)
    low[:5] = 0
    p_low = choose_labels(ann, inst, level, n, m, values, low).posterior.proba
    np.testing.assert_array_equal(p_low[:5], np.eye(101)[[0] * 5])


def test_names_source_and_policy_reach_the_posterior_on_every_scale():
    ann, inst, level, n, m, _ = _crowd(4)
    names = ("G", "P", "R", "X")
    res = choose_labels(ann, inst, level, n, m, np.arange(1.0, 5.0), names=names)
    assert res.posterior.names == names and res.posterior.source == "confusion"
    ann, inst, level, n, m, values = _slider()
    many = tuple(f"v{i}" for i in range(101))
    fine = choose_labels(ann, inst, level, n, m, values, names=many)
    assert fine.posterior.names == many and fine.posterior.source == "confusion"
    latent = choose_labels(
        ann, inst, level, n, m, values, policy=replace(DEFAULT, latent_weight=1.0)
    )
    np.testing.assert_array_equal(latent.report, np.eye(MAX_CLASSES))
    # the gain is the classes' own: spreading moves no probability between classes
    classes = level_classes(101, MAX_CLASSES)
    coarse = choose_labels(ann, inst, classes[level], n, m, np.arange(11.0))
    np.testing.assert_allclose(fine.posterior.gain, coarse.posterior.gain, rtol=1e-12)


def test_annotators_without_ratings_are_accepted():
    ann, inst, level, n, m, truth = _crowd(5)
    res = choose_labels(ann, inst, level, n + 3, m, np.arange(4.0))
    assert res.fit.confusion.shape[0] == n + 3
    n_ratings = np.bincount(ann, minlength=n + 3)
    rater = (n_ratings[:, None, None] * res.fit.confusion).sum(axis=0) / n_ratings.sum()
    np.testing.assert_allclose(
        res.posterior.gain, expected_gain(res.fit.q, rater, res.report), rtol=1e-9, atol=1e-15
    )
    careful = calibration.reference_confusion(res.fit.careful, res.fit.rho, n_ratings, 0.25)
    np.testing.assert_allclose(res.report, 0.25 * np.eye(4) + 0.75 * careful, rtol=1e-12)
    gold = np.full(m, -1)
    gold[:40] = truth[:40]  # the expert's prior is the careful report of every coded annotator
    with_gold = choose_labels(ann, inst, level, n + 3, m, np.arange(4.0), gold)
    np.testing.assert_array_equal(with_gold.posterior.proba[:40], np.eye(4)[truth[:40]])


def test_the_undetermined_share_and_the_description():
    ann, inst, level, n, m, _ = _crowd(6)
    res = choose_labels(ann, inst, level, n, m, np.arange(4.0))
    assert res.undetermined_share() == np.mean(res.posterior.undetermined(DEFAULT))
    empty = replace(res, posterior=res.posterior.rows(slice(0, 0)))
    assert empty.undetermined_share() == 0.0
    d = res.describe()
    assert d["em_iterations"] == res.fit.n_iter and d["temperature"] == 1.0
    assert d["level_prior"] == [float(x) for x in res.fit.rho]
    continuous = LabelResult(res.posterior, None, None, False, DEFAULT)
    assert continuous.describe() == {
        "model": "continuous posterior over the scale's intervals (the paper's)"
    }


def test_why_a_fine_scale_takes_the_continuous_labels():
    why = fine_labels_reason(101)
    assert why.startswith(f"a scale of 101 levels (more than {MAX_CLASSES}) is a slider")
    assert why.endswith("101 x 101 answers an annotator (docs/results.md, Fine scales)")
