"""``gold_map``: what gold items teach about every other item's level."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.results import gold_map


def _lenient_crowd(rng: np.random.Generator, n: int, k: int = 3, shift: int = 1):
    """Posteriors of a crowd that puts every item ``shift`` levels above its truth (clipped)
    and is right about the rest: ``(truth (n,), log posterior (n, K))``."""
    truth = rng.integers(0, k, n)
    said = np.minimum(truth + shift, k - 1)
    q = np.full((n, k), 0.1 / (k - 1))
    q[np.arange(n), said] = 0.9
    return truth, np.log(q)


def _objective(base, x, gold, w, ridge):
    z = base + x @ w
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(gold)), gold].sum() + 0.5 * ridge * (w * w).sum()


def test_evidence_columns() -> None:
    base = np.log(np.full((4, 3), 1 / 3))
    est = np.array([1.0, 2.0, 3.0, 4.0])
    x = gold_map.evidence(base, base + 1.0, est)
    assert x.shape == (4, 3 + 3 + 1 + 1)
    np.testing.assert_array_equal(x[:, :3], base)
    np.testing.assert_array_equal(x[:, 3:6], base + 1.0)
    assert x[:, 6].mean() == pytest.approx(0.0) and x[:, 6].std() == pytest.approx(1.0)
    np.testing.assert_array_equal(x[:, 7], 1.0)
    small = gold_map.evidence(base, None, est / 100.0)[:, 3]  # a spread below 1 is one too
    np.testing.assert_allclose(small, x[:, 6])
    # left out when not given; a constant estimate says nothing
    assert gold_map.evidence(base).shape == (4, 4)
    np.testing.assert_array_equal(gold_map.evidence(base, None, np.full(4, 2.0))[:, 3], 0.0)


def test_the_map_learns_where_the_crowd_sits_against_the_gold() -> None:
    rng = np.random.default_rng(0)
    truth, base = _lenient_crowd(rng, 2000)
    x = gold_map.evidence(base)
    gold = slice(0, 300)
    learned = gold_map.fit(base[gold], x[gold], truth[gold])
    assert learned.weights is not None
    assert learned.describe() == (
        "300 gold items taught every other item's label and level probabilities "
        "(a map of 12 weights)"
    )
    p = np.exp(learned.log_proba(base, x))
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    rest = slice(300, None)
    before = np.mean(base[rest].argmax(axis=1) != truth[rest])
    after = np.mean(p[rest].argmax(axis=1) != truth[rest])
    assert before > 0.6 and after < 0.4  # the top level is ambiguous; the rest move down


def test_the_fitted_map_is_the_penalised_likelihood_s_minimum() -> None:
    """No step along any weight lowers the objective (its gradient is right)."""
    rng = np.random.default_rng(1)
    truth, base = _lenient_crowd(rng, 400)
    base = base + 0.3 * rng.standard_normal(base.shape)
    x = gold_map.evidence(base, None, rng.standard_normal(400))
    w = gold_map.fit(base, x, truth).weights
    f0 = _objective(base, x, truth, w, gold_map.RIDGE)
    for i in np.ndindex(w.shape):
        for h in (1e-3, -1e-3):
            step = np.zeros_like(w)
            step[i] = h
            assert _objective(base, x, truth, w + step, gold_map.RIDGE) >= f0 - 1e-6


def test_a_strong_ridge_leaves_the_posterior_as_it_is() -> None:
    rng = np.random.default_rng(2)
    truth, base = _lenient_crowd(rng, 300)
    x = gold_map.evidence(base)
    learned = gold_map.fit(base, x, truth, ridge=1e12)
    z = base - base.max(axis=1, keepdims=True)
    want = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(learned.log_proba(base, x), want, atol=1e-8)


def test_enough_gold_is_counted_per_weight_and_per_level() -> None:
    per_weight = int(gold_map.GOLD_PER_WEIGHT * 4 * 3)  # 4 columns of evidence, 3 levels
    assert gold_map.uses_map(np.array([per_weight - 20, 10, 10]), 4)
    assert not gold_map.uses_map(np.array([per_weight - 21, 10, 10]), 4)
    assert not gold_map.uses_map(np.array([per_weight, 9, 10]), 4)
    assert not gold_map.uses_map(np.array([per_weight, 0, 10]), 4)


@pytest.mark.parametrize("n, missing", [(int(gold_map.GOLD_PER_WEIGHT * 12) - 1, None), (400, 2)])
def test_too_little_gold_learns_a_temperature_and_keeps_every_label(n, missing) -> None:
    """With fewer than GOLD_PER_WEIGHT gold items per weight of the map, or a level with
    fewer than MIN_PER_LEVEL, only a temperature: it undoes over-confidence and changes no
    item's most probable level."""
    rng = np.random.default_rng(3)
    true_p = np.full((n, 3), 0.2)
    true_p[np.arange(n), rng.integers(0, 3, n)] = 0.6
    gold = np.array([rng.choice(3, p=row) for row in true_p])
    if missing is not None:
        gold[gold == missing] = 0
    q = true_p**2 / (true_p**2).sum(axis=1, keepdims=True)  # twice as confident as it should
    base = np.log(q)
    x = gold_map.evidence(base)
    learned = gold_map.fit(base, x, gold)
    assert learned.weights is None
    assert learned.describe() == (
        f"{n} gold items calibrated the level probabilities but move no label: the map of 12 "
        f"weights needs {int(gold_map.GOLD_PER_WEIGHT * 12)} gold items, "
        f"{gold_map.MIN_PER_LEVEL} of them at each level"
    )
    p = np.exp(learned.log_proba(base, x))
    np.testing.assert_array_equal(p.argmax(axis=1), q.argmax(axis=1))
    if missing is None:
        assert np.exp(learned.log_temperature) == pytest.approx(0.5, abs=0.2)
        assert p.max(axis=1).mean() < q.max(axis=1).mean()


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(2, 5),
    n=st.integers(1, 300),
    seed=st.integers(0, 2**16),
    spread=st.floats(0.0, 50.0),
    with_estimate=st.booleans(),
)
def test_any_gold_gives_probabilities_without_a_numpy_warning(k, n, seed, spread, with_estimate):
    """Whatever the posteriors (up to a point mass: log 1e-300) and the gold levels (some
    levels absent), the learned map gives finite probabilities summing to 1, and no numpy
    warning reaches the user."""
    rng = np.random.default_rng(seed)
    base = np.maximum(-spread * rng.random((n, k)), np.log(1e-300))
    base -= np.log(np.exp(base).sum(axis=1, keepdims=True))
    gold = rng.integers(0, rng.integers(1, k + 1), n)
    est = rng.normal(size=n) if with_estimate else None
    with np.errstate(all="raise"):
        x = gold_map.evidence(base, base[::-1].copy(), est)
        learned = gold_map.fit(base, x, gold)
        logp = learned.log_proba(base, x)
    assert np.isfinite(logp).all()
    np.testing.assert_allclose(np.exp(logp).sum(axis=1), 1.0)


def test_the_temperature_is_the_penalised_likelihood_s_minimum() -> None:
    rng = np.random.default_rng(4)
    truth, base = _lenient_crowd(rng, 40)  # sure of a level that is mostly wrong; too few
    learned = gold_map.fit(base, gold_map.evidence(base), truth)
    assert learned.weights is None  # 40 gold items: a temperature only
    t = learned.log_temperature

    def objective(u):
        z = base * np.exp(u)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return -logp[np.arange(len(truth)), truth].sum() + 0.5 * gold_map.TEMPERATURE_RIDGE * u * u

    assert t < -0.2  # over-confident posteriors: flattened
    for h in (1e-3, -1e-3):
        assert objective(t + h) >= objective(t) - 1e-7


def test_far_apart_logits_give_finite_probabilities() -> None:
    """Each item's logits are shifted by its own largest before the exponential: items whose
    logits sit a thousand apart, or at a thousand, still get probabilities summing to 1."""
    base = np.log(np.full((3, 2), 0.5))
    x = np.array([[1000.0], [-1000.0], [0.0]])
    learned = gold_map.GoldMap(np.array([[1.0, 0.0]]))
    p = np.exp(learned.log_proba(base, x))
    np.testing.assert_allclose(p, [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], atol=1e-12)


def test_scipy_optimize_only_loaded_by_a_fit_with_gold() -> None:
    """A tenth of a second of every process's import: neither the estimator nor the CLI loads it."""
    code = (
        "import sys, ordmix_core.cli.main, ordmix_core.estimators.ordinal_mixture;"
        "sys.exit('scipy.optimize' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
