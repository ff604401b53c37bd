"""``label_choice``: each model's prediction of a rating from the others, and the choice."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm, truncnorm

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
    shifted = d - d.mean() + (label_choice.Z_MIN - 0.5) * se  # just short of the margin
    assert label_choice.choose(sums(shifted), n).labels == "confusion"
    over = d - d.mean() + (label_choice.Z_MIN + 0.5) * se  # just over it
    assert label_choice.choose(sums(over), n).labels == "continuous"
    assert label_choice.choose(sums(-d), n).labels == "confusion"
    assert "confusion model" in label_choice.choose(sums(-d), n).describe()
    same = label_choice.choose(np.zeros(4), n)  # equal everywhere: no evidence, confusion
    assert same.labels == "confusion" and same.z == 0.0
    # the same difference on every rating: no spread, the sign decides
    for step, z, labels in ((0.5, np.inf, "continuous"), (-0.5, -np.inf, "confusion")):
        flat = label_choice.choose(sums(np.full(n, step)), n)
        assert flat.std_error == 0.0 and flat.z == z and flat.labels == labels
    out = c.as_dict()
    assert set(out) == {"labels", "rule", "against", "log_predictive", "difference", "z", "why"}
    assert out["against"] == "alone"
    mixed = label_choice.choose(sums(-d), n, "with spam")
    assert mixed.against == "with spam" and "than the confusion model with the spam" in (
        mixed.describe()
    )
    assert min(c, mixed, key=lambda x: x.z) is mixed  # the closer comparison decides
    assert out["labels"] == "continuous" and out["why"] == c.describe()
    assert out["rule"] == (
        f"continuous labels when the continuous model predicts held-out ratings better than the "
        f"confusion model (z above {label_choice.Z_MIN:g}), alone and with the spam component"
    )
    assert out["log_predictive"]["confusion"] == pytest.approx(-1.0)
    assert out["log_predictive"]["continuous"] == pytest.approx(-1.0 + d.mean())
    assert (out["difference"], out["z"]) == (c.difference, c.z)
    assert c.describe().startswith(
        "labels from the continuous posterior: that model (a truth that is a value on the "
        "scale, each rater's leniency a term of its own) predicts each rating from the others "
        "better than the confusion model"
    )
    assert (
        label_choice.choose(sums(-d), n)
        .describe()
        .startswith(
            "labels from the ordinal confusion model (a truth that is one of the levels): the "
            "continuous model does not predict each rating from the others better"
        )
    )
    alone = label_choice.choose(sums(-d), n).describe()
    assert "better than the confusion model (" in alone
    # the continuous labels say "with the spam component" only when that comparison ran
    assert "alone and with the spam component" not in c.describe()
    both = replace(c, both=True)
    assert "better than the confusion model, alone and with the spam component (the closer: " in (
        both.describe()
    )


def test_chance_is_the_annotators_other_ratings_level_shares():
    ann = np.array([0, 0, 0, 1, 0])
    level = np.array([2, 2, 0, 1, 1])
    counts = np.zeros((2, 3))
    np.add.at(counts, (ann, level), 1.0)
    got = np.exp(label_choice.chance_log_predictive(ann, level, counts))
    # annotator 0's other three ratings with one pseudo-rating per level: (others + 1) / 6
    np.testing.assert_allclose(got, [2 / 6, 2 / 6, 1 / 6, 1 / 3, 1 / 6], rtol=1e-12)
    for n in (0, 1):  # a distribution over the levels, the held-out rating at each in turn
        total = 0.0
        for k in range(3):
            one = label_choice.chance_log_predictive(
                np.array([n]), np.array([k]), _with(counts, n, k)
            )
            total += float(np.exp(one[0]))
        assert total == pytest.approx(1.0, rel=1e-12)


def _with(counts: np.ndarray, n: int, k: int) -> np.ndarray:
    """``counts`` with one more rating of annotator ``n`` at level ``k``."""
    out = counts.copy()
    out[n, k] += 1
    return out


def test_weights_are_used_unless_they_leave_the_confusion_model_near_chance():
    n = 1000

    def sums(conf: float, chance: float) -> np.ndarray:  # per-rating means, as sums
        return np.array([0.0, conf * n, 0.0, 0.0, chance * n])

    alone = sums(-0.8, -1.1)  # gains 0.3 a rating over chance
    keep = label_choice.weights_check(alone, sums(-1.0, -1.1), n)  # keeps a third of it
    assert keep.used and keep.kept == pytest.approx(1 / 3)
    assert keep.plain_gain == pytest.approx(0.3) and keep.weighted_gain == pytest.approx(0.1)
    low = -1.1 + 0.3 * label_choice.KEEP_SHARE - 1e-6  # just under the share
    drop = label_choice.weights_check(alone, sums(low, -1.1), n)
    assert not drop.used and "every rating counts 1" in drop.describe()
    just = -1.1 + 0.3 * label_choice.KEEP_SHARE + 1e-6  # just over it
    at = label_choice.weights_check(alone, sums(just, -1.1), n)
    assert at.used and "counts in the labels for the chance" in at.describe()
    # the confusion model alone no better than chance: the weights take nothing away
    flat = label_choice.weights_check(sums(-1.2, -1.1), sums(-1.5, -1.1), n)
    assert flat.used and flat.as_dict()["kept"] is None and "nan" not in flat.describe()
    assert keep.describe() == (
        "each rating counts in the labels for the chance that it came from the truth (omega): "
        "so weighted, the confusion model still predicts the held-out ratings (+0.1000 nats a "
        "rating over chance against +0.3000 with every rating counting 1, a share of 0.33; at "
        "least 0.25 needed)"
    )
    assert flat.describe() == (
        "each rating counts in the labels for the chance that it came from the truth (omega): "
        "so weighted, the confusion model still predicts the held-out ratings (-0.4000 nats a "
        "rating over chance against -0.1000 with every rating counting 1; at least 0.25 needed)"
    )
    assert drop.describe() == (
        "every rating counts 1 in the labels: weighted by the spam fit's omega, the confusion "
        "model would predict the held-out ratings hardly better than chance (+0.0750 nats a "
        "rating over chance against +0.3000 with every rating counting 1, a share of 0.25; at "
        "least 0.25 needed), so the spam fit's judgement of which ratings are spam is not used"
    )
    # the edges: a share exactly at KEEP_SHARE keeps the weights (0.125 of 0.5, exact in
    # binary), and so does a confusion model that gains exactly nothing over chance
    edge = label_choice.weights_check(sums(-0.5, -1.0), sums(-0.875, -1.0), n)
    assert edge.weighted_gain == label_choice.KEEP_SHARE * edge.plain_gain and edge.used
    assert label_choice.weights_check(sums(-1.0, -1.0), sums(-1.5, -1.0), n).used
    out = drop.as_dict()
    assert out["weights"] == "none" and keep.as_dict()["weights"] == "omega"
    assert set(out) == {"weights", "rule", "gain", "kept", "why"} and out["why"] == drop.describe()
    assert out["gain"] == {"every rating 1": drop.plain_gain, "omega": drop.weighted_gain}
    assert f"at least {label_choice.KEEP_SHARE:g} needed" in out["why"]


def test_choose_from_two_ratings_uses_the_sample_variance():
    d = np.array([0.1, 0.3])
    c = label_choice.choose(np.array([0.0, 0.0, d.sum(), (d * d).sum()]), 2)
    assert c.std_error == pytest.approx(d.std(ddof=1) / np.sqrt(2), rel=1e-12)


def test_weighted_predictive_divides_out_the_rating_as_it_counted_and_mixes_in_spam():
    rng = np.random.default_rng(4)
    inst, ann, level, p, rho, _ = _confusion_problem(rng)
    w = rng.uniform(0.0, 1.0, inst.size)
    # the weighted model's posteriors: each rating's factor to the power of its weight
    ll = label_model.item_log_lik(np.log(p), ann, inst, level, 6, w)
    q, _ = label_model.posterior(ll, rho, None)
    eps = rng.uniform(0.3, 1.0, inst.size)
    spam = rng.uniform(0.1, 0.5, inst.size)
    got = label_choice.mixed_log_predictive(q, np.log(p), ann, inst, level, w, eps, spam)
    for i in range(inst.size):
        others = np.flatnonzero((inst == inst[i]) & (np.arange(inst.size) != i))
        post = rho * np.prod(p[ann[others], :, level[others]] ** w[others, None], axis=0)
        post /= post.sum()
        truth = post @ p[ann[i], :, level[i]]
        assert got[i] == pytest.approx(np.log(eps[i] * truth + (1 - eps[i]) * spam[i]), rel=1e-12)
    one = np.ones(inst.size)  # weight 1 and no spam: the unweighted predictive
    np.testing.assert_allclose(
        label_choice.mixed_log_predictive(q, np.log(p), ann, inst, level, one, one, 0 * one),
        label_choice.confusion_log_predictive(q, np.log(p), ann, inst, level, one),
        rtol=1e-12,
    )


def test_confusion_predictive_with_a_rating_far_in_a_tail():
    """A confusion entry of exp(-800): each rating's own shift keeps every row finite."""
    rng = np.random.default_rng(2)
    inst, ann, level, p, rho, q = _confusion_problem(rng)
    log_p = np.log(p)
    log_p[ann[0], :, level[0]] = [-800.0, -1.0, -2.0]
    got = label_choice.confusion_log_predictive(q, log_p, ann, inst, level)
    assert np.all(np.isfinite(got)) and np.all(got <= 0.0)
    i = int(np.flatnonzero(ann != ann[0])[0])  # a rating the far entry does not touch
    want = label_choice.confusion_log_predictive(q, np.log(p), ann[[i]], inst[[i]], level[[i]])
    assert got[i] == pytest.approx(want[0], rel=1e-12)


class _Data:
    """The rating arrays and the item count that ``held_out_sums`` reads from a CrowdData."""

    def __init__(self, ann, inst, cat, level, n_instances):
        self.ann, self.inst, self.cat, self.level = ann, inst, cat, level
        self.n_instances = n_instances


def _held_out_problem(seed: int = 5):
    rng = np.random.default_rng(seed)
    n_items, n_ann, k, per_item = 7, 5, 3, 4
    inst, ann, level, p, _, q = _confusion_problem(rng, n_items, n_ann, k, per_item)
    data = _Data(ann, inst, inst.copy(), level, n_items)  # a category per item
    per_ann = {
        "expertise": rng.uniform(0.5, 4.0, n_ann),
        "reliability": rng.uniform(0.5, 1.0, n_ann),
        "bias": rng.normal(0.0, 0.3, n_ann),
        "bias_var": rng.uniform(0.0, 0.1, n_ann),
    }
    difficulty = rng.uniform(0.5, 2.0, n_items)
    estimate = rng.uniform(1.0, 3.0, n_items)
    omega = rng.uniform(0.2, 1.0, inst.size)
    table = rng.dirichlet(np.ones(k), n_ann)
    hyper = {"thresholds": T, "mu": 2.0, "lambda": 0.1, "spam_table": table, "phi": 2.0,
             "eta": 1.0, "estimate_var": rng.uniform(0.01, 0.2, n_items)}  # fmt: skip
    return data, omega, per_ann, difficulty, estimate, hyper, q, np.log(p)


def _one_fit(data, omega, a, difficulty, estimate, hyper, q, log_p, weight=None):
    """``held_out_sums`` of one confusion fit: its (5,) sums."""
    return label_choice.held_out_sums(
        data, omega, a, difficulty, estimate, hyper, [(q, log_p, weight)]
    )[0]


@pytest.mark.parametrize("ordinal", [True, False])
def test_held_out_sums_are_every_ratings_predictions_from_the_others(ordinal):
    """Ordinal: each rating an interval (its truncated-normal mean the observation of the item
    posterior); else each rating its value, as the fit saw it."""
    data, omega, a, difficulty, estimate, hyper, q, log_p = _held_out_problem()
    hyper = dict(hyper, ordinal=ordinal, scale=np.array([1.0, 2.0, 3.0]))
    got = _one_fit(data, omega, a, difficulty, estimate, hyper, q, log_p)
    # each rating by hand: its truncated-normal mean, then its item's posterior without it
    ann, inst, lev = data.ann, data.inst, data.level
    b = a["bias"][ann]
    rho = a["expertise"][ann] * difficulty[inst]
    centre, s = estimate[inst] + b, 1 / np.sqrt(rho)
    lo, hi = (T[lev] - centre) / s, (T[lev + 1] - centre) / s
    ex = centre + s * (norm.pdf(lo) - norm.pdf(hi)) / (norm.cdf(hi) - norm.cdf(lo)) - b
    if not ordinal:
        ex = hyper["scale"][lev] - b
    w = omega * rho
    # S = E[(x - z - b)^2] of each rating, x its truncated normal (its value when not ordinal)
    var_x = truncnorm.var(lo, hi, loc=centre, scale=s) if ordinal else np.zeros(inst.size)
    x = ex + b if ordinal else hyper["scale"][lev]
    big_s = var_x + (x - centre) ** 2 + hyper["estimate_var"][inst] + a["bias_var"][ann]
    cont = np.empty(inst.size)
    for i in range(inst.size):
        others = (inst == inst[i]) & (np.arange(inst.size) != i)
        prec = hyper["lambda"] + w[others].sum()
        mean = (hyper["mu"] * hyper["lambda"] + (w * ex)[others].sum()) / prec
        # the item's difficulty from its other ratings: its Gamma posterior without this one
        shape = hyper["phi"] + 0.5 * omega[others].sum()
        tau = a["expertise"][ann]
        full_rate = (hyper["phi"] + 0.5 * omega[inst == inst[i]].sum()) / difficulty[inst[i]]
        rate = max(full_rate - 0.5 * omega[i] * tau[i] * big_s[i], hyper["eta"])
        rho_out = tau[i] * shape / rate
        sd = np.sqrt(1 / prec + 1 / rho_out + a["bias_var"][ann[i]])
        c = mean + b[i]
        truth = (norm.cdf((T[lev[i] + 1] - c) / sd) - norm.cdf((T[lev[i]] - c) / sd)) / (
            norm.cdf((T[-1] - c) / sd) - norm.cdf((T[0] - c) / sd)
        )
        e = a["reliability"][ann[i]]
        cont[i] = np.log(e * truth + (1 - e) * hyper["spam_table"][ann[i], lev[i]])
    conf = label_choice.confusion_log_predictive(q, log_p, ann, inst, lev)
    d = cont - conf
    k = log_p.shape[1]
    chance = np.empty(inst.size)  # each rating from its annotator's other ratings alone
    for i in range(inst.size):
        others = (ann == ann[i]) & (np.arange(inst.size) != i)
        chance[i] = np.log(((lev[others] == lev[i]).sum() + 1) / (others.sum() + k))
    want = [cont.sum(), conf.sum(), d.sum(), (d * d).sum(), chance.sum()]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # against the confusion model with the spam component: the same continuous side
    mixed = label_choice.mixed_log_predictive(
        q, log_p, ann, inst, lev, omega, a["reliability"][ann], hyper["spam_table"][ann, lev]
    )
    got = _one_fit(data, omega, a, difficulty, estimate, hyper, q, log_p, omega)
    d = cont - mixed
    want = [cont.sum(), mixed.sum(), d.sum(), (d * d).sum(), chance.sum()]
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize("chunk", [5, 14, 27])  # many chunks, exactly two, one short of all
def test_held_out_sums_are_the_same_a_chunk_at_a_time(monkeypatch, chunk):
    args = _held_out_problem()
    whole = _one_fit(*args)
    monkeypatch.setattr(label_choice, "CHUNK", chunk)
    np.testing.assert_allclose(_one_fit(*args), whole, rtol=1e-12)


@pytest.mark.parametrize("chunk", [5, 1 << 20])  # several chunks, one
def test_held_out_sums_of_several_fits_are_each_fits_own(monkeypatch, chunk):
    """The continuous and chance predictions made once serve every fit: each row is the
    fit's own sums alone, to the bit, whatever the fits' order."""
    monkeypatch.setattr(label_choice, "CHUNK", chunk)
    data, omega, a, difficulty, estimate, hyper, q, log_p = _held_out_problem()
    common = (data, omega, a, difficulty, estimate, hyper)
    other_q = np.roll(q, 1, axis=1)  # another fit: other posteriors, other confusions
    other_log_p = np.log(np.exp(log_p)[::-1].copy())
    fits = [(q, log_p, None), (other_q, other_log_p, omega), (q, log_p, omega)]
    got = label_choice.held_out_sums(*common, fits)
    assert got.shape == (3, 5)
    for row, (fq, flp, w) in zip(got, fits, strict=True):
        np.testing.assert_array_equal(row, _one_fit(*common, fq, flp, w))
    assert not np.array_equal(got[0], got[1])  # the fits' own columns differ ...
    np.testing.assert_array_equal(got[:, [0, 4]], got[[0, 0, 0]][:, [0, 4]])  # ... not these
    np.testing.assert_array_equal(label_choice.held_out_sums(*common, fits[::-1]), got[::-1])
