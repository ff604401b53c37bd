import argparse
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

from ordmix_core import InputError
from ordmix_core.cli import build_parser
from ordmix_core.data import GRANULARITIES, Scale
from ordmix_core.model import OrdinalMixture
from ordmix_core.options import (
    MAX_ITER,
    MAX_RESTARTS,
    OPTIONS,
    add_fit_options,
    check_kwargs,
    dashboard_options,
    option,
    options_for,
    spam_distribution,
    to_estimator_kwargs,
    validate_params,
)
from ordmix_core.simulate import simulate_crowd

SIGNATURE = {
    k: p.default
    for k, p in inspect.signature(OrdinalMixture.__init__).parameters.items()
    if k != "self"
}


@pytest.fixture(scope="module")
def ratings():
    return simulate_crowd(30, 5, 3, random_state=1).ratings


def test_one_entry_per_estimator_parameter_with_the_estimators_default():
    assert sorted(o.name for o in OPTIONS) == sorted(SIGNATURE)
    for o in OPTIONS:
        assert o.default == SIGNATURE[o.name] or (o.default is None and SIGNATURE[o.name] is None)
        assert o.group in ("basic", "advanced") and o.label and o.help
        assert "`" not in o.help
    # the front ends use seed 0 (two runs agree); every other default is the estimator's
    assert [o.name for o in OPTIONS if o.ui_default is not o.default] == ["random_state"]
    assert option("random_state").ui_default == 0
    assert option("granularity").kind.choices == GRANULARITIES


def test_defaults_are_read_from_the_signature_not_restated(monkeypatch):
    import ordmix_core.options as options_mod

    monkeypatch.setattr(
        options_mod, "_signature_defaults", lambda: {**SIGNATURE, "tol": 0.25, "n_restarts": 7}
    )
    assert option("tol").default == 0.25
    p = argparse.ArgumentParser()
    add_fit_options(p, "fit")
    assert p.parse_args([]).tol == 0.25 and p.parse_args([]).n_restarts == 7


def test_every_default_is_valid():
    for o in OPTIONS:
        assert o.kind.check(o.default) == o.default or o.default is None
        o.kind.check(o.ui_default)
    OrdinalMixture()._check_params(5)


# the Python API cases of issue 13, and the class each stands for
BAD_PARAMS = [
    ({"tol": None}, "tol must be a number >= 0, not None"),
    ({"tol": -1}, "tol must be a number >= 0"),
    ({"tol": float("inf")}, "tol must be a number >= 0"),
    ({"phi": "a"}, "phi must be a positive number up to 1e+06, not 'a'"),
    ({"phi": 1e308}, "phi must be a positive number"),
    ({"eta": 0}, "eta must be a positive number"),
    ({"lam": float("nan")}, "lam must be a positive number"),
    ({"random_state": -1}, "random_state must be a whole number >= 0 or a numpy Generator"),
    ({"random_state": "abc"}, "random_state must be a whole number >= 0"),
    ({"random_state": 1.5}, "random_state must be a whole number >= 0"),
    ({"n_jobs": "two"}, "n_jobs must be a whole number >= 1 (or None: the cores"),
    ({"n_jobs": 0}, "n_jobs must be a whole number >= 1"),
    ({"prune_start": -3}, "prune_start must be a whole number from 1 to 100,000, not -3"),
    ({"prune_start": 0}, "prune_start must be a whole number from 1 to 100,000, not 0"),
    ({"mu": float("nan")}, "mu must be a number from -1e+150 to 1e+150"),
    ({"mu": 1e308}, "mu must be a number from -1e+150 to 1e+150"),
    ({"n_restarts": 99999999999999999999}, "n_restarts must be a whole number from 1 to 1,000"),
    ({"n_restarts": 0}, "n_restarts must be a whole number from 1 to 1,000, not 0"),
    ({"n_restarts": 2.0}, "n_restarts must be a whole number"),
    ({"n_restarts": True}, "n_restarts must be a whole number"),
    ({"max_iter": 10**9}, "max_iter must be a whole number from 1 to 100,000"),
    ({"ordinal": "yes"}, "ordinal must be True or False, not 'yes'"),
    ({"spam": "yes"}, "spam must be True or False"),
    ({"updates": "fast"}, "updates must be one of exact, paper, not 'fast'"),
    ({"collapse_threshold": 2}, "collapse_threshold must be a number from 0 to 1"),
    ({"pi": "abc"}, "pi must be positive finite numbers"),
    ({"pi": [1, -1, 1]}, "pi must be positive finite numbers"),
    ({"scale": 5}, "scale must be finite numbers, strictly increasing without repeats"),
    ({"scale": [3, 2, 1]}, "scale must be finite numbers, strictly increasing without repeats"),
    ({"scale": "1,2,1e308,-1e308"}, "scale must be finite numbers, strictly increasing"),
    ({"scale": [-1e308, 0, 1e308]}, "must span at most 1e+150"),
]


@pytest.mark.parametrize(("kw", "message"), BAD_PARAMS, ids=[str(k) for k, _ in BAD_PARAMS])
def test_bad_parameter_is_an_input_error_naming_it(kw, message):
    with pytest.raises(InputError) as err:
        validate_params(OrdinalMixture(**kw))
    assert message in str(err.value)
    assert str(err.value).startswith(next(iter(kw)))  # names the parameter first


@pytest.mark.parametrize(
    "kw",
    [
        {"tol": None},
        {"phi": "a"},
        {"random_state": -1},
        {"random_state": "abc"},
        {"n_jobs": "two"},
        {"prune_start": -3},
        {"prune_start": 0},
        {"mu": float("nan")},
        {"mu": 1e308},
        {"n_restarts": 99999999999999999999},
    ],
    ids=str,
)
def test_fit_raises_input_error_not_a_raw_numpy_error(ratings, kw):
    with pytest.raises(InputError):
        OrdinalMixture(**kw).fit(ratings)


def test_mu_is_bounded_by_the_scale():
    sc = Scale(np.array([1.0, 2, 3, 4, 5]))
    validate_params(OrdinalMixture(mu=0.5), sc)  # the outer thresholds are allowed
    validate_params(OrdinalMixture(mu=5.5), sc)
    for mu in (0.4, 5.6, 100.0, -1e6):
        with pytest.raises(InputError, match=r"mu must lie within the scale's outer thresholds"):
            validate_params(OrdinalMixture(mu=mu), sc)
    # with the scale given as a parameter the estimator checks it before any data is seen
    with pytest.raises(InputError, match=r"0\.5 to 5\.5 \(the scale is 1,2,3,4,5\)"):
        validate_params(OrdinalMixture(mu=100.0, scale=[1, 2, 3, 4, 5]))


def test_mu_outside_the_scale_refused_by_fit_with_a_given_scale(ratings):
    with pytest.raises(InputError, match="mu must lie within"):
        OrdinalMixture(mu=100.0, scale=[1, 2, 3, 4, 5]).fit(ratings)


def test_good_values_of_every_kind_pass():
    kw = dict(
        n_restarts=np.int64(3),
        max_iter=MAX_ITER,
        tol=0,
        phi=np.float32(2.5),
        mu=3,
        random_state=np.random.default_rng(0),
        n_jobs=None,
        pi=[1, 2, 3, 4, 5],
        scale="1,2,3,4,5",
        ordinal=np.bool_(True),
        prune_start=1,
        collapse_threshold=0.0,
    )
    m = OrdinalMixture(**kw)
    validate_params(m)
    assert check_kwargs({"n_restarts": MAX_RESTARTS})["n_restarts"] == MAX_RESTARTS
    np.testing.assert_allclose(m._check_params(5), np.arange(1, 6) / 15)
    for seed in (0, 2**100, np.random.SeedSequence(1), np.random.PCG64(1)):
        validate_params(OrdinalMixture(random_state=seed))


def test_spam_distribution():
    np.testing.assert_allclose(spam_distribution(None, 4), [0.25] * 4)
    np.testing.assert_allclose(spam_distribution([1, 3], 2), [0.25, 0.75])
    with pytest.raises(InputError, match="pi must be 3 positive numbers"):
        spam_distribution([1, 1], 3)


def test_to_estimator_kwargs_from_cli_flags_and_from_a_dashboard_dict():
    args = build_parser().parse_args(
        ["fit", "r.csv", "--out", "o", "--spam", "off", "--paper-updates", "--restarts", "3"]
    )
    kw = to_estimator_kwargs(args)
    assert set(kw) == {o.name for o in options_for("fit")}
    assert kw["spam"] is False and kw["updates"] == "paper" and kw["n_restarts"] == 3
    assert kw["ordinal"] is True and kw["random_state"] == 0 and kw["scale"] is None
    OrdinalMixture(**kw)  # every key is a parameter
    dash = {"granularity": "query", "n_restarts": 4, "seed": 0, "mu": None, "lam": 0.2}
    assert to_estimator_kwargs(dash) == {
        "granularity": "query",
        "n_restarts": 4,
        "random_state": 0,
        "mu": None,
        "lam": 0.2,
    }
    with pytest.raises(InputError, match="unknown fit option"):
        to_estimator_kwargs({"restarts": 4})
    with pytest.raises(InputError, match="n_restarts must be"):
        to_estimator_kwargs({"n_restarts": 0})


def test_flags_come_from_the_table():
    fit = {o.name for o in options_for("fit")}
    assert fit == {
        "granularity",
        "scale",
        "n_restarts",
        "max_iter",
        "tol",
        "tol_estimate",
        "schedule",
        "random_state",
        "ordinal",
        "spam",
        "model",
        "bias",
        "spam_dist",
        "updates",
        "phi",
        "eta",
        "lam",
        "mu",
        "init_from",
    }
    # each method of compare fixes these itself (its rows name the model: odm, odm-paper-*);
    # a warm start is the fit's alone
    assert fit - {o.name for o in options_for("compare")} == {
        "ordinal", "spam", "model", "bias", "spam_dist", "init_from",
    }  # fmt: skip
    p = argparse.ArgumentParser()
    add_fit_options(p, "fit")
    args = p.parse_args([])
    for o in options_for("fit"):
        assert getattr(args, o.name) == o.ui_default
    with pytest.raises(ValueError):
        options_for("bogus")


def test_dashboard_metadata():
    basic = [o.name for o in dashboard_options("basic")]
    assert basic == [
        "granularity", "scale", "n_restarts", "max_iter", "tol", "random_state", "model",
    ]  # fmt: skip
    adv = [o.name for o in dashboard_options("advanced")]
    assert adv == ["tol_estimate", "ordinal", "spam", "updates", "phi", "eta", "lam", "mu"]
    for o in dashboard_options():
        assert o.widget in ("select", "int", "number", "toggle", "text")
        lo = o.widget_args.get("min_value")
        if lo is not None:  # the widget's bounds are valid values
            o.kind.check(type(o.default)(lo) if o.default is not None else lo)
        if o.widget == "select":
            assert o.kind.choices


def test_cli_parse_matches_python_check():
    o = option("tol")
    assert o.cli_type("0.5") == 0.5
    for text in ("nan", "inf", "-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be a number >= 0"):
            o.cli_type(text)
    assert option("random_state").cli_type(" 7 ") == 7
    assert option("scale").cli_type("-2,-1,0,1,2") == "-2,-1,0,1,2"
    assert math.isclose(option("mu").cli_type("-1.5"), -1.5)


def test_warm_start_option():
    o = option("init_from")
    assert o.flag == "--warm-start" and o.widget == "none" and o.default is None
    assert o.cli_type("yesterday/") == "yesterday/"
    assert o.check(None) is None and o.check(Path("x")) == Path("x")
    fitted = OrdinalMixture()
    assert o.check(fitted) is fitted  # read (and its fit checked) by warm.load_previous
    for bad in ("", "  ", 3, [1]):
        with pytest.raises(InputError, match="init_from must be the output folder"):
            o.check(bad)
    args = build_parser().parse_args(["fit", "r.csv", "--out", "o", "--warm-start", "prev"])
    assert to_estimator_kwargs(args)["init_from"] == "prev"
