"""The label model's shifts (``labels/confusion_shift.py``): the array functions against direct
computations, and a crowd with lenient and strict raters, whose shifts the fit finds and whose
labels they make right."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ordmix_core.labels import confusion_model as lm
from ordmix_core.labels import confusion_shift as cs


def test_shifted_tables_move_each_truth_row_to_its_shifted_truth():
    rng = np.random.default_rng(0)
    t = rng.random((3, 5, 5))
    for s in (-1, 0, 1, 2):
        want = np.zeros_like(t)
        for c in range(5):
            np.add.at(want, (slice(None), min(max(c + s, 0), 4)), t[:, c])
        np.testing.assert_allclose(cs.shifted_tables(t, s), want, rtol=0, atol=1e-15)
        # nothing is lost: each annotator's rating counts are the same
        np.testing.assert_allclose(cs.shifted_tables(t, s).sum(axis=1), t.sum(axis=1), rtol=1e-14)


def test_a_shifted_confusion_reads_the_truth_one_level_over():
    rng = np.random.default_rng(1)
    p = rng.random((3, 4, 4))
    shift = np.array([0, 1, -1])
    out = cs.shifted_confusion(p, shift)
    for n, b in enumerate(shift):
        for c in range(4):
            np.testing.assert_array_equal(out[n, c], p[n, min(max(c + b, 0), 3)])


def test_penalised_is_the_log_likelihood_less_the_prior_pull():
    rng = np.random.default_rng(2)
    t, log_p = rng.random((4, 3, 3)), np.log(rng.random((4, 3, 3)))
    a, a_bar = rng.normal(size=(4, 4)), rng.normal(size=4)
    m = rng.normal(size=(4, 4))
    lam = m @ m.T + np.eye(4)
    want = [np.sum(t[n] * log_p[n]) - 0.5 * (a[n] - a_bar) @ lam @ (a[n] - a_bar) for n in range(4)]
    np.testing.assert_allclose(cs.penalised(t, log_p, a, a_bar, lam), want, rtol=1e-12)
    # an empty cell adds nothing where the confusion is 0
    t[0, 0, 0], log_p[0, 0, 0] = 0.0, -np.inf
    assert np.isfinite(cs.penalised(t, log_p, a, a_bar, lam)).all()


@pytest.mark.parametrize("largest", [1, 2])
@pytest.mark.parametrize("prior", [0.02, 0.3])
def test_the_shifts_prior_is_a_distribution_with_0_first(prior, largest, monkeypatch):
    monkeypatch.setattr(cs, "MAX_SHIFT", largest)
    tried = cs.shifts(5, prior)
    assert tried[0] == 0 and sorted(tried) == list(range(-largest, largest + 1))
    assert math.fsum(math.exp(cs.log_prior(s, prior)) for s in tried) == pytest.approx(1.0)
    assert math.exp(cs.log_prior(0, prior)) == pytest.approx(1.0 - prior)
    # from 3 levels up; on 2 the adjacent-category confusion is any 2 x 2 one already
    assert cs.shifts(3, prior) == tried and cs.shifts(2, prior) == [0]
    assert cs.shifts(5, 0.0) == [0]


def _lenient_crowd(rng, k=7, n_items=600, n_ann=12, per_item=6, lenient=(0, 1), strict=(2,)):
    """Items with a truth uniform on 0..K-1 rated by ``per_item`` of ``n_ann`` annotators, each
    answering the truth (kept on the scale) or a neighbour with probability 0.1 each; the
    ``lenient`` ones answer one level up, the ``strict`` ones one down."""
    truth = rng.integers(0, k, n_items)
    off = np.zeros(n_ann, dtype=int)
    off[list(lenient)], off[list(strict)] = 1, -1
    ann = np.concatenate([rng.choice(n_ann, per_item, replace=False) for _ in range(n_items)])
    inst = np.repeat(np.arange(n_items), per_item)
    noise = rng.choice([-1, 0, 1], size=ann.size, p=[0.1, 0.8, 0.1])
    rating = np.clip(truth[inst] + off[ann] + noise, 0, k - 1)
    return ann, inst, rating, truth, off


def test_the_fit_finds_lenient_and_strict_raters_and_reads_them_right():
    """Four of twelve raters one level off (two lenient, two strict): the fit shifts exactly
    them, and its labels are wrong about half as often as with the shifts off (an adjacent-category
    confusion cannot express a rater one level off)."""
    ann, inst, rating, truth, off = _lenient_crowd(np.random.default_rng(3), strict=(2, 3))
    fit = lm.fit(ann, inst, rating, 12, 600, 7)
    np.testing.assert_array_equal(fit.shift, off)
    err = np.mean(fit.q.argmax(axis=1) != truth)
    unshifted = lm.fit(ann, inst, rating, 12, 600, 7, shift_prior=0.0)
    assert (unshifted.shift == 0).all()
    assert err < 0.6 * np.mean(unshifted.q.argmax(axis=1) != truth)  # 0.023 against 0.047
    # the careful confusions are of the truth: a lenient rater's most likely answer is c + 1
    lenient = np.flatnonzero(off == 1)[0]
    assert (fit.careful[lenient, :6].argmax(axis=1) == np.arange(1, 7)).all()


def test_a_crowd_without_lenient_raters_is_not_shifted():
    ann, inst, rating, truth, _ = _lenient_crowd(np.random.default_rng(4), lenient=(), strict=())
    fit = lm.fit(ann, inst, rating, 12, 600, 7)
    assert (fit.shift == 0).all()
    assert np.mean(fit.q.argmax(axis=1) != truth) < 0.05


@pytest.mark.parametrize(("prior", "want"), [(cs.SHIFT_PRIOR, 0), (0.9, -1)])
def test_an_annotator_without_ratings_takes_the_priors_shift(prior, want):
    """No ratings, so every shift's step scores the same but for its prior: unshifted under a
    small prior; under one that makes a shift more likely than none, the first shift tried
    (ties go to the first)."""
    k = 4
    prev = lm.first_parameters(2, k)
    _, _, shift, _ = lm.shifted_step(prev, np.zeros((2, k, k)), lm.design(k), prior)
    assert (shift == want).all()
