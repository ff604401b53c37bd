"""``label_choice``: each model's prediction of a rating from the others, and the choice."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from ordmix_core.results import label_choice, label_model

T = np.array([0.5, 1.5, 2.5, 3.5])  # a 3-level scale's thresholds


def _confusion_problem(rng: np.random.Generator, n_items=6, n_ann=4, k=3, per_item=4):
    inst = np.repeat(np.arange(n_items), per_item)
    ann = np.concatenate([rng.choice(n_ann, per_item, replace=False) for _ in range(n_items)])
    level = rng.integers(0, k, inst.size)
    p = rng.dirichlet(np.ones(k), size=(n_ann, k))
    rho = rng.dirichlet(np.ones(k))
    ll = label_model.item_log_lik(np.log(p), ann, inst, level, n_items)
    q, _ = label_model.posterior(ll, rho, None)
    return inst, ann, level, p, rho, q


def test_confusion_predictive_is_the_item_posterior_without_the_rating():
    rng = np.random.default_rng(0)
    inst, ann, level, p, rho, q = _confusion_problem(rng)
    got = label_choice.confusion_log_predictive(q, np.log(p), ann, inst, level)
    for i in range(inst.size):  # each rating: the item's posterior from the other ratings
        others = np.flatnonzero((inst == inst[i]) & (np.arange(inst.size) != i))
        post = rho * np.prod(p[ann[others], :, level[others]], axis=0)
        post /= post.sum()
        assert got[i] == pytest.approx(np.log(post @ p[ann[i], :, level[i]]), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_confusion_predictive_sums_to_one_over_the_levels(seed):
    rng = np.random.default_rng(seed)
    inst, ann, level, p, rho, q = _confusion_problem(rng)
    i = int(rng.integers(inst.size))
    total = 0.0
    for k in range(3):  # the rating's level replaced by each level, the item's q with it
        lev = level.copy()
        lev[i] = k
        ll = label_model.item_log_lik(np.log(p), ann, inst, lev, q.shape[0])
        qk, _ = label_model.posterior(ll, rho, None)
        total += np.exp(label_choice.confusion_log_predictive(qk, np.log(p), ann, inst, lev)[i])
    assert total == pytest.approx(1.0, rel=1e-10)


def test_continuous_predictive_is_the_spam_mixture_of_the_level_on_the_scale():
    level = np.array([0, 1, 2, 2])
    mean = np.array([1.2, 2.0, 3.4, 0.7])
    prec = np.array([2.0, 0.5, 8.0, 1.0])
    rho = np.array([4.0, 1.0, 0.3, 2.0])
    bias = np.array([0.0, 0.3, -0.4, 0.1])
    bias_var = np.array([0.0, 0.05, 0.2, 0.01])
    eps = np.array([1.0, 0.8, 0.6, 0.9])
    spam = np.array([0.2, 0.5, 0.3, 0.3])
    got = label_choice.continuous_log_predictive(
        level, mean, prec, rho, bias, bias_var, eps, spam, T
    )
    s = np.sqrt(1 / prec + 1 / rho + bias_var)
    c = mean + bias

    def cdf(x):
        return norm.cdf((x - c) / s)

    truth = (cdf(T[level + 1]) - cdf(T[level])) / (cdf(T[-1]) - cdf(T[0]))
    np.testing.assert_allclose(got, np.log(eps * truth + (1 - eps) * spam), rtol=1e-10)


@settings(max_examples=30, deadline=None)
@given(
    st.floats(-3, 6),
    st.floats(0.01, 50),
    st.floats(0.01, 50),
    st.floats(0, 1),
    st.floats(-1, 1),
)
def test_continuous_predictive_sums_to_one_over_the_levels(mean, prec, rho, eps, bias):
    levels = np.arange(3)
    one = np.ones(3)
    spam = np.array([0.2, 0.3, 0.5])
    p = np.exp(
        label_choice.continuous_log_predictive(
            levels, mean * one, prec * one, rho * one, bias * one, 0.0 * one, eps * one, spam, T
        )
    )
    assert np.all(p > 0) and p.sum() == pytest.approx(1.0, rel=1e-9)


def test_choose_needs_the_continuous_model_clearly_better():
    n = 400
    d = np.full(n, 0.01) + np.random.default_rng(1).normal(0, 0.05, n)  # mean 0.01, se ~0.0025

    def sums(diff):
        return np.array([-n * 1.0 + diff.sum(), -n * 1.0, diff.sum(), (diff * diff).sum()])

    c = label_choice.choose(sums(d), n)
    se = d.std(ddof=1) / np.sqrt(n)
    assert c.difference == pytest.approx(d.mean()) and c.std_error == pytest.approx(se)
    assert c.z == pytest.approx(d.mean() / se) and c.z > label_choice.Z_MIN
    assert c.labels == "continuous" and "continuous posterior" in c.describe()
    assert f"{c.difference:+.4f} nats a rating, {c.z:+.1f} standard errors" in c.describe()
    shifted = d - d.mean() + 0.5 * label_choice.Z_MIN * se  # better, but not clearly
    assert label_choice.choose(sums(shifted), n).labels == "confusion"
    assert label_choice.choose(sums(-d), n).labels == "confusion"
    assert "confusion model" in label_choice.choose(sums(-d), n).describe()
    same = label_choice.choose(np.zeros(4), n)  # equal everywhere: no evidence, confusion
    assert same.labels == "confusion" and same.z == 0.0
    out = c.as_dict()
    assert out["labels"] == "continuous" and out["why"] == c.describe()
    assert out["log_predictive"]["confusion"] == pytest.approx(-1.0)


def test_held_out_sums_are_the_same_a_chunk_at_a_time(monkeypatch):
    from ordmix_core.data.simulate import simulate_crowd
    from ordmix_core.estimators.level_fit import choose
    from ordmix_core.estimators.ordinal_mixture import OrdinalMixture

    crowd = simulate_crowd(n_items=120, n_annotators=12, bias_sd=0.5, random_state=3)
    m = OrdinalMixture(n_restarts=1, random_state=0).fit(crowd.ratings)
    d = m.data_
    plain = label_model.fit_levels(d.ann, d.inst, d.level, d.n_annotators, d.n_instances, d.scale.k)
    whole = choose(m, d, plain)
    monkeypatch.setattr(label_choice, "CHUNK", 97)
    parts = choose(m, d, plain)
    assert parts.difference == pytest.approx(whole.difference, rel=1e-9)
    assert parts.z == pytest.approx(whole.z, rel=1e-9)
