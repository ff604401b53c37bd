"""One posterior a manager can trust: every item column read from one posterior, every
annotator's reliability inside its own interval and on its flag's side, one variational fit
and one label fit per fit, and the warnings a user needs."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from ordmix_core import OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.errors import SpamWarning, UndeterminedWarning
from ordmix_core.labels import confusion_model
from ordmix_core.results import decisions, outputs


@pytest.fixture(scope="module")
def fitted():
    crowd = simulate_crowd(n_items=200, n_annotators=25, random_state=7, bias_sd=0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OrdinalMixture(random_state=0, n_restarts=3).fit(crowd.ratings)
    return model, crowd


def test_every_item_column_is_read_from_the_one_posterior(fitted):
    model, _ = fitted
    items = outputs.items_table(model).set_index("instance")
    values = model.scale_.values
    p = items[decisions.level_columns(values)].to_numpy()
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    decided = items["flag"] != "undetermined"
    top = values[p.argmax(axis=1)]
    assert (items["label"].to_numpy(float)[decided] == top[decided]).all()
    at_label = p[np.arange(len(p)), np.searchsorted(values, items["label"].to_numpy(float))]
    np.testing.assert_allclose(items["p_wrong"], 1 - at_label, atol=1e-12)
    np.testing.assert_allclose(items["estimate"], p @ values, atol=1e-9)
    assert items["estimate"].between(values[0], values[-1]).all()
    lo, hi = items["lower_90"].to_numpy(float), items["upper_90"].to_numpy(float)
    assert ((lo <= items["label"]) & (items["label"] <= hi)).all()
    # labels_ and probas_ (crowd-kit's) are the same decision
    proba = model.probas_
    assert (model.labels_ == proba.columns[proba.to_numpy().argmax(axis=1)]).all()


def test_reliability_is_the_point_of_its_own_posterior(fitted):
    model, _ = fitted
    ann = outputs.annotators_table(model)
    r, lo, hi = (ann[c].to_numpy(float) for c in ("reliability", "reliability_lower",
                                                   "reliability_upper"))  # fmt: skip
    assert ((lo <= r + 1e-9) & (r <= hi + 1e-9)).all()
    ok = ann["flag"] == "ok"
    bad = ann["flag"] == "unreliable"
    assert (ann.loc[ok, "reliability"] >= 0.5).all()
    assert (ann.loc[bad, "reliability"] < 0.5).all()
    np.testing.assert_array_equal(model.skills_.to_numpy(), model.annotators_["reliability"])


def test_one_variational_fit_and_one_label_fit(monkeypatch):
    crowd = simulate_crowd(n_items=120, n_annotators=15, random_state=3)
    calls = {"race": 0, "labels": 0}
    race, fit = OrdinalMixture._race, confusion_model.fit

    def counted_race(self, *a, **k):
        calls["race"] += 1
        return race(self, *a, **k)

    def counted_fit(*a, **k):
        calls["labels"] += 1
        return fit(*a, **k)

    monkeypatch.setattr(OrdinalMixture, "_race", counted_race)
    monkeypatch.setattr(confusion_model, "fit", counted_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OrdinalMixture(random_state=0, n_restarts=2).fit(crowd.ratings)
    assert calls == {"race": 1, "labels": 1}


def test_mostly_spam_says_so_in_one_warning():
    crowd = simulate_crowd(n_items=150, n_annotators=20, spammer_share=0.6, random_state=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = OrdinalMixture(random_state=0, n_restarts=2).fit(crowd.ratings)
    spam = [w for w in caught if issubclass(w.category, SpamWarning)]
    share = 1 - decisions.truth_share(model)
    assert share > decisions.SPAM_WARNING_SHARE and not model.collapsed_
    assert len(spam) == 1
    assert f"{share:.0%}" in str(spam[0].message) and "ordmix next --review" in str(spam[0].message)
    assert str(spam[0].message) in model.warnings_  # the Fit page shows warnings_


def test_a_clean_crowd_gets_no_spam_warning(fitted):
    model, _ = fitted
    assert 1 - decisions.truth_share(model) < decisions.SPAM_WARNING_SHARE
    assert not any("spam" in w for w in model.warnings_)


def test_many_ties_say_so_in_one_warning():
    # every item rated once high and once low by two equally good raters: every label a tie
    n = 40
    ratings = pd.DataFrame(
        {
            "annotator": ["a", "b"] * n,
            "instance": np.repeat([f"i{i}" for i in range(n)], 2),
            "rating": [1, 3] * n,
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = OrdinalMixture(random_state=0, n_restarts=2).fit(ratings)
    und = [w for w in caught if issubclass(w.category, UndeterminedWarning)]
    share = float((decisions.item_decisions(model)["flag"] == "undetermined").mean())
    assert share > decisions.UNDETERMINED_WARNING_SHARE
    assert len(und) == 1 and "ordmix next" in str(und[0].message)


def test_what_a_manager_reads_does_not_depend_on_the_restarts():
    """The label fit reads the ratings alone, so the default races the data start alone
    (``planned_restarts``): more restarts move only the continuous fit's own columns (here
    a random restart wins by 8.9 nats and moves ``z_mean`` by up to 1.9)."""
    crowd = simulate_crowd(n_items=200, n_annotators=25, random_state=4, bias_sd=0.3,
                           spammer_share=0.3, favourite_share=0.5)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = OrdinalMixture(random_state=0).fit(crowd.ratings)
        raced = OrdinalMixture(random_state=0, n_restarts=4).fit(crowd.ratings)
    assert (len(alone.restarts_), len(raced.restarts_)) == (1, 4)
    assert raced.lower_bound_ > alone.lower_bound_ + 5.0
    assert (raced.items_["z_mean"] - alone.items_["z_mean"]).abs().max() > 1.0
    values = raced.scale_.values
    read = ["label", "p_wrong", "estimate", "sd", "lower_90", "upper_90", "expected_gain",
            "flag", *decisions.level_columns(values)]  # fmt: skip
    pd.testing.assert_frame_equal(
        outputs.items_table(alone)[read], outputs.items_table(raced)[read]
    )
    read = ["reliability", "reliability_lower", "reliability_upper", "p_unreliable", "flag"]
    pd.testing.assert_frame_equal(
        outputs.annotators_table(alone)[read], outputs.annotators_table(raced)[read]
    )
