import argparse
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

from ordmix_core import InputError
from ordmix_core.cli.main import build_parser
from ordmix_core.data.crowd import GRANULARITIES
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.option_frontends import (
    add_fit_options,
    dashboard_options,
    options_for,
    to_estimator_kwargs,
)
from ordmix_core.estimators.options import (
    MAX_ITER,
    MAX_RESTARTS,
    OPTIONS,
    check_kwargs,
    option,
    spam_distribution,
    validate_params,
)
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture

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
    from ordmix_core.estimators import option_kinds

    monkeypatch.setattr(
        option_kinds, "_signature_defaults", lambda: {**SIGNATURE, "tol": 0.25, "n_restarts": 7}
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


# bad parameters through the Python API, each standing for a class of bad values
BAD_PARAMS = [
    ({"tol": None}, "tol must be a number >= 0, not None"),
    ({"tol": -1}, "tol must be a number >= 0"),
    ({"tol": float("inf")}, "tol must be a number >= 0"),
    (
        {"phi": "a"},
        "phi must be a positive number up to 1e+06 (or None: the model's, paper 10, "
        "extended 2), not 'a'",
    ),
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
    (
        {"n_restarts": 0},
        "n_restarts must be a whole number from 1 to 1,000 (or None: as the labels need), not 0",
    ),
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
        "random_state",
        "ordinal",
        "spam",
        "model",
        "bias",
        "spam_dist",
        "labels",
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
        "ordinal", "spam", "model", "bias", "spam_dist", "labels", "init_from",
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


# --- each kind of value: what its message says it accepts is what it accepts (these pin the
# messages, the boundaries and the parsers of every kind, so that a mutation fails a test)


def _message(kind, value) -> str:
    with pytest.raises(ValueError) as err:
        kind.check(value)
    return str(err.value)


def test_each_real_range_is_described_as_it_is_checked():
    from ordmix_core.estimators.option_kinds import Real

    cases = [  # (kind, its description, a value just inside, a value just outside)
        (Real(), "a finite number", -1e300, float("inf")),
        (Real(0.0, lo_open=True), "a positive number", 1e-300, 0.0),
        (Real(0.0, 1e6, lo_open=True), "a positive number up to 1e+06", 1e6, 1e6 * (1 + 1e-15)),
        (Real(0.0), "a number >= 0", 0.0, -1e-300),
        (Real(1.0, lo_open=True), "a number > 1", 1.0 + 1e-15, 1.0),
        (Real(1.0, 2.0, lo_open=True), "a number > 1 and <= 2", 2.0, 1.0),
        (Real(0.0, 1.0), "a number from 0 to 1", 1.0, 1.0 + 1e-15),
    ]
    for kind, text, inside, outside in cases:
        assert kind.describe() == text
        assert kind.check(inside) == inside
        assert _message(kind, outside) == f"must be {text}, not {outside!r}"
    # the upper end is included, also for the table's options
    assert option("collapse_threshold").check(1) == 1.0 and option("phi").check(1e6) == 1e6
    assert _message(Real(0.0), float("nan")) == "must be a number >= 0, not nan"
    assert _message(Real(0.0, 1.0), 2) == "must be a number from 0 to 1, not 2"
    assert _message(Real(none="unset"), "x") == "must be a finite number (or None: unset), not 'x'"


def test_parsers_name_the_text_they_refuse():
    from ordmix_core.estimators.option_kinds import Real, Whole

    assert Whole(1).parse(" 3 ") == 3 and Real().parse(" -2.5 ") == -2.5
    for kind, text in ((Whole(1, 5), "three"), (Real(0.0), "1,5"), (Whole(1), "2.5")):
        with pytest.raises(ValueError, match=f"not '{text}'$"):
            kind.parse(text)
    with pytest.raises(ValueError, match=r"^must be a whole number from 1 to 5, not 9$"):
        Whole(1, 5).parse("9")


def test_long_values_are_shown_cut_to_60_characters():
    from ordmix_core.estimators.option_kinds import _show

    exact = "x" * 58  # repr adds two quotes: 60 characters, shown whole
    assert _show(exact) == repr(exact)
    longer = "y" * 59  # 61 characters: the first 57 and "..."
    assert _show(longer) == repr(longer)[:57] + "..." and len(_show(longer)) == 60
    assert _message(option("lam").kind, "z" * 100) == (
        "must be a positive number up to 1e+06, not " + repr("z" * 100)[:57] + "..."
    )


def test_optional_switches_parse_on_and_off_in_any_case():
    o = option("bias")
    assert o.kind.describe() == "True or False"
    assert o.check(None) is None and o.check(True) is True
    assert o.check(np.bool_(False)) is False  # a numpy bool becomes a Python bool
    assert str(o.kind._bad(1)) == "must be True or False (or None: as the model says), not 1"
    with pytest.raises(InputError, match=r"^bias must be True or False \(or None: .*\), not 'on'$"):
        o.check("on")
    for text in ("on", "true", "yes", "1", " ON ", "True", "YES"):
        assert o.cli_type(text) is True, text
    for text in ("off", "false", "no", "0", "OFF ", "False", "No"):
        assert o.cli_type(text) is False, text
    for text in ("maybe", "2", ""):
        with pytest.raises(argparse.ArgumentTypeError) as err:
            o.cli_type(text)
        assert str(err.value) == f"must be on or off, not {text!r}"
    p = build_parser()
    common = ["fit", "r.csv", "--out", "o"]
    assert p.parse_args(common).bias is None
    assert p.parse_args([*common, "--bias", "off"]).bias is False
    assert p.parse_args([*common, "--bias", "Yes"]).bias is True


def test_optional_choice_takes_none_or_one_of_its_choices():
    o = option("spam_dist")
    assert o.kind.describe() == "one of uniform, global, annotator"
    assert o.check(None) is None
    for value in ("uniform", "global", "annotator"):
        assert o.check(value) == value
    for bad in ("Global", "", 3, ["global"]):
        with pytest.raises(InputError) as err:
            o.check(bad)
        assert str(err.value) == (
            "spam_dist must be one of uniform, global, annotator (or None: as the model "
            f"says), not {bad!r}"
        )


def test_seed_parse_takes_zero_and_refuses_negatives_naming_the_text():
    o = option("random_state")
    assert o.cli_type("0") == 0 and o.cli_type("12") == 12
    for text in ("-1", "x", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError) as err:
            o.cli_type(text)
        assert str(err.value) == f"must be a whole number >= 0, not {text!r}"
    assert _message(o.kind, -3) == (
        "must be a whole number >= 0 or a numpy Generator (or None: a fresh random seed), not -3"
    )


def test_scale_kind_takes_a_scale_text_or_numbers_and_refuses_what_cannot_be_a_scale():
    import warnings

    o = option("scale")
    sc = Scale(np.array([1.0, 2.0, 3.0]))
    assert o.check(sc) is sc and o.check("1,2,3") == "1,2,3" and o.check((1, 2)) == (1, 2)
    arr = np.array([0.0, 0.5, 1.0])
    assert o.check(arr) is arr
    for bad in (5, 2.5, {"a": 1}):
        assert _message(o.kind, bad).endswith(
            f"such as low,medium,high (or None: the distinct ratings seen), not {bad!r}"
        )
    # named levels, lowest first: text that is not all numbers names every level
    assert o.check("G,P,R,X") == "G,P,R,X" and o.kind.parse(" low, high ") == " low, high "
    assert o.check(["low", "high"]) == ["low", "high"] and o.check("1,x") == "1,x"
    for bad in ([3, 2, 1], "G,P,G", ["a", " "], [1, float("nan")]):  # refused by the scale
        assert _message(o.kind, bad).endswith(f"(or None: the distinct ratings seen), not {bad!r}")
    for bad in ("G,P,G", " , "):
        assert _message(o.kind, bad).endswith(f"(or None: the distinct ratings seen), not {bad!r}")
        with pytest.raises(ValueError, match=f"not {bad!r}$"):
            o.kind.parse(bad)
    with pytest.raises(ValueError, match=r"not '1,1'$"):
        o.kind.parse("1,1")
    with pytest.raises(ValueError, match="must span at most 1e"):
        o.kind.parse("-1e308,0,1e308")  # a text the parser takes, that the check refuses
    with warnings.catch_warnings():  # overflow is what is checked for: no RuntimeWarning
        warnings.simplefilter("error")
        for bad in ("1,2,1e308,-1e308", [1, 2, 1e308, -1e308], [-1e308, 0, 1e308]):
            with pytest.raises(InputError, match="scale must"):
                o.check(bad)


def test_scale_span_limit_is_inclusive_and_measured_end_to_end():
    import warnings

    from ordmix_core.estimators.option_kinds import MAX_SCALE_SPAN, check_scale

    check_scale(Scale(np.array([0.0, MAX_SCALE_SPAN])))  # exactly the limit: allowed
    check_scale(Scale(np.array([7.0])))  # one level: no span
    too_wide = ([0.0, 1e151], [0.0, 1.0, 1e151], [-1e151, 0.0, 1.0], [-1e151, 0.0, 1.0, 2.0])
    for values in too_wide:  # the span is last minus first, whatever lies between
        with pytest.raises(ValueError) as err:
            check_scale(Scale(np.array(values)))
        assert str(err.value).endswith(
            "; values that large are usually codes or typos, not ratings"
        )
        assert str(err.value).startswith("must span at most 1e+150, not ")
    with np.errstate(over="ignore"):
        huge = Scale(np.array([-1e308, 1e308]))
    with warnings.catch_warnings():  # the overflow is what is checked for: no RuntimeWarning
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="must span at most"):
            check_scale(huge)
    with pytest.raises(InputError) as err:  # the scale the data gave: named, and the fix
        validate_params(OrdinalMixture(), Scale(np.array([0.0, 1e151])))
    assert str(err.value).startswith("the rating scale must span at most 1e+150, not 0,1e+151")
    assert str(err.value).endswith("; give the scale with --scale / scale=")


def test_probabilities_are_a_flat_list_of_positive_finite_numbers():
    o = option("pi")
    for good in ([2.0], [1, 2, 3], (0.5, 0.5), np.array([1e-300, 1.0])):
        assert o.check(good) is good
    for bad in ([], [[1.0, 2.0]], [1, 0, 1], [1, -1], [1, float("inf")], [1, None], "12", b"1"):
        with pytest.raises(InputError) as err:
            o.check(bad)
        assert str(err.value) == (
            "pi must be positive finite numbers, one per level of the scale (or None: uniform "
            f"over the levels), not {bad!r}"
        )
    with pytest.raises(InputError, match=r"not \[1, 'a'\]$"):
        o.check([1, "a"])


def test_spam_distribution_checks_and_normalises_as_floats():
    from fractions import Fraction

    out = spam_distribution([Fraction(1), Fraction(3)], 2)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [0.25, 0.75])
    with pytest.raises(InputError, match="^pi must be positive finite numbers"):
        spam_distribution([1, -1], 2)  # checked before it is normalised
    with pytest.raises(InputError) as err:
        spam_distribution([1, 1], 3)
    assert str(err.value) == "pi must be 3 positive numbers (one per level), not [1, 1]"
    with pytest.raises(InputError, match="pi must be 5 positive numbers"):
        validate_params(OrdinalMixture(pi=[1, 1, 1]), Scale(np.arange(1.0, 6.0)))
    validate_params(OrdinalMixture(pi=[1, 1, 1]), Scale(np.arange(1.0, 4.0)))


def test_mu_outside_the_scale_message_names_the_value_and_the_fix():
    with pytest.raises(InputError) as err:
        validate_params(OrdinalMixture(mu=9.0), Scale(np.array([1.0, 2.0, 3.0])))
    assert str(err.value) == (
        "mu must lie within the scale's outer thresholds 0.5 to 3.5 (the scale is 1,2,3), not "
        "9.0; leave it unset for the mean of the scale"
    )


def test_previous_fit_takes_a_folder_or_a_fitted_result():
    from types import SimpleNamespace

    o = option("init_from")
    assert o.kind.describe() == "the output folder of an ordmix fit or a fitted OrdinalMixture"
    result = SimpleNamespace(items_=None)  # a fitted result without get_params
    assert o.check(result) is result
    for bad in ("", " ", 3, SimpleNamespace(x=1)):
        with pytest.raises(InputError) as err:
            o.check(bad)
        assert str(err.value) == (
            "init_from must be the output folder of an ordmix fit or a fitted OrdinalMixture "
            f"(or None: a fit from scratch), not {bad!r}"
        )


def test_register_estimator_switches_the_source_of_the_defaults():
    from ordmix_core.estimators.option_kinds import estimator_default, register_estimator

    class Other:
        def __init__(self, tol=0.125, n_restarts=9):
            pass

    try:
        assert register_estimator(Other) is Other
        assert estimator_default("tol") == 0.125 and option("n_restarts").default == 9
    finally:
        register_estimator(OrdinalMixture)
    assert estimator_default("tol") == SIGNATURE["tol"]


def test_unknown_options_are_listed_with_the_valid_ones():
    with pytest.raises(InputError) as err:
        check_kwargs({"restarts": 1, "seed": 2, "tol": 0.1})
    valid = ", ".join(o.name for o in OPTIONS)
    assert str(err.value) == f"unknown fit option(s) 'restarts', 'seed'; valid: {valid}"
    with pytest.raises(ValueError, match=r"^unknown command 'bogus'$"):
        options_for("bogus")
    with pytest.raises(
        ValueError, match=r"^group must be one of \('basic', 'advanced'\), not 'x'$"
    ):
        dashboard_options("x")


def test_dashboard_seed_only_when_random_state_is_not_given_and_names_restrict():
    assert to_estimator_kwargs({"seed": 5}) == {"random_state": 5}
    with pytest.raises(InputError, match=r"unknown fit option\(s\) 'seed'"):
        to_estimator_kwargs({"seed": 5, "random_state": 6})  # both: which one was meant?
    args = build_parser().parse_args(["fit", "r.csv", "--out", "o", "--tol", "0.5"])
    assert to_estimator_kwargs(args, names=["tol", "granularity"]) == {
        "tol": 0.5,
        "granularity": SIGNATURE["granularity"],
    }
    assert to_estimator_kwargs({"tol": 0.5, "lam": 2.0}, names=("lam",)) == {"lam": 2.0}


def test_each_flag_help_group_choices_and_metavar_come_from_its_entry():
    p = argparse.ArgumentParser()
    add_fit_options(p, "fit", overrides={"granularity": {"help": "replaced"}})
    groups = {g.title: {a.dest for a in g._group_actions} for g in p._action_groups}
    fit = options_for("fit")
    assert groups["fit options"] == {o.name for o in fit if o.group == "basic"}
    assert groups["model options (the paper's defaults)"] == {
        o.name for o in fit if o.group == "advanced"
    }
    actions = {a.dest: a for a in p._actions}
    assert actions["granularity"].help == "replaced"  # the override wins
    for o in fit:
        a = actions[o.name]
        assert a.option_strings == [o.flag] and a.default == o.ui_default
        if o.name == "granularity":
            continue
        text = o.flag_help if o.switch else o.help
        if "(default:" not in text:
            default = o.kind.none if o.ui_default is None else o.ui_default
            text += f" (default: {default})"
        assert a.help == text.replace("%", "%%"), o.name  # argparse's own escape
        if o.switch:
            assert a.const == o.const and a.nargs == 0
        elif isinstance(o.kind, type(option("granularity").kind)):
            assert list(a.choices) == list(o.kind.choices) and a.metavar is None
        else:
            assert a.choices is None and a.metavar == o.metavar, o.name
    assert actions["tol"].help.endswith(f"(default: {SIGNATURE['tol']})")
    assert actions["random_state"].help.endswith("(default: 0)")


def test_default_text_of_an_option_without_a_default(monkeypatch):
    """No flag in today's table shows a None default (their help says it), but the rule is:
    the kind's words for None, else "none"."""
    from ordmix_core.estimators import option_frontends
    from ordmix_core.estimators.option_frontends import _default_text
    from ordmix_core.estimators.option_kinds import Option, Real

    mu = Option("mu", Real(none="the mean of the scale"), "prior mean", "l", flag="--mu")
    assert _default_text(mu) == "the mean of the scale"
    assert _default_text(Option("mu", Real(), "h", "l")) == "none"
    assert _default_text(option("tol")) == str(SIGNATURE["tol"])
    monkeypatch.setattr(option_frontends, "options_for", lambda command: [mu])
    p = argparse.ArgumentParser()
    add_fit_options(p, "fit")
    assert p._actions[-1].help == "prior mean (default: the mean of the scale)"


def test_flag_help_is_only_a_switchs(monkeypatch):
    """``flag_help`` says what giving a switch does; a flag that takes a value shows ``help``."""
    from ordmix_core.estimators import option_frontends
    from ordmix_core.estimators.option_kinds import Option, Real

    value = Option("tol", Real(0.0), "the help", "l", flag="--tol", flag_help="not shown")
    switch = Option("spam", option("spam").kind, "h", "l", flag="--x", const=False,
                    flag_help="the switch")  # fmt: skip
    monkeypatch.setattr(option_frontends, "options_for", lambda command: [value, switch])
    p = argparse.ArgumentParser()
    add_fit_options(p, "fit")
    assert p._actions[-2].help == f"the help (default: {SIGNATURE['tol']})"
    assert SIGNATURE["spam"] is None  # shown as the kind's words for None
    assert p._actions[-1].help == f"the switch (default: {option('spam').kind.none})"


def test_the_estimators_docstring_describes_every_parameter_from_the_table():
    """One description per parameter: the options table's help (and doc), shown by
    ``help(OrdinalMixture)`` in numpydoc form."""
    import inspect

    doc = OrdinalMixture.__doc__
    assert "{parameters}" not in doc and "    Parameters\n    ----------\n" in doc
    for name in inspect.signature(OrdinalMixture.__init__).parameters:
        if name != "self":
            o = option(name)
            assert f"\n    {name} : {o.kind.describe()}, default {o.default!r}\n" in doc
            first = o.help.split()[1:4]  # its help, rewrapped (the first word capitalised)
            assert " ".join(first) in " ".join(doc.split())
