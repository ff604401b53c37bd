"""outputs.py: the files of a fit, with the decision columns, and the tables the dashboard's
downloads write (one schema: the same functions).

The decision columns are checked against ``decisions.py`` called directly, the counts in
summary.json against the written tables.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ordmix_core import io as oio
from ordmix_core.cli.main import main
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.labels.policy import LabelPolicy
from ordmix_core.results import (
    agreement,
    decision_columns,
    decisions,
    outputs,
    reliability,
    stability,
)

ROOT = Path(__file__).resolve().parents[2]
RATINGS = ROOT / "demo_data" / "simulated-ratings.csv"
IDS = {"instance": str, "annotator": str, "query": str, "category": str}
#: the model's item columns: the posterior's estimate, the continuous fit's q(z), then the
#: ensemble's (what near-tied restarts disagree on)
MODEL_ITEM_COLUMNS = ["instance", "estimate", "sd", "n_ratings", "query", "category",
                      "z_mean", "z_sd", "estimate_spread", "unstable"]  # fmt: skip
MODEL_ANN_COLUMNS = [
    "annotator",
    "n_ratings",
    "expertise",
    "reliability",
    "expertise_sd",
    "spam_share",
    "bias",
    "bias_sd",
    "reliability_spread",
    "unstable",
    "still_moving",
    "eps",
]  # fmt: skip  (bias: the extended default; then the ensemble's columns, still_moving, eps)


@pytest.fixture(scope="module")
def model() -> OrdinalMixture:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OrdinalMixture("query", n_restarts=2, random_state=0).fit(
            pd.read_csv(RATINGS, dtype=str)
        )


@pytest.fixture(scope="module")
def folder(model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("outputs") / "fit"
    out.mkdir()
    outputs.write_fit_outputs(model, out, settings={"engine": "memory"})
    return out


def test_items_csv_has_the_model_then_the_decision_columns(model, folder):
    items = pd.read_csv(folder / "items.csv", dtype=IDS)
    dec = decisions.item_decisions(model)
    levels = [f"p_level_{v:g}" for v in model.scale_.values]
    assert list(items.columns) == MODEL_ITEM_COLUMNS + [
        "label", "p_wrong", *levels, "lower_90", "upper_90", "truth_weight", "expected_gain",
        "flag",
    ]  # fmt: skip
    items = items.set_index("instance")
    pd.testing.assert_frame_equal(items[list(dec.columns)], dec, check_names=False)
    assert items["label"].notna().all()  # every item has a label, undetermined ones too
    np.testing.assert_allclose(items["estimate"], model.items_["estimate"], rtol=0, atol=0)


def test_annotators_csv_has_the_flags_with_their_evidence(model, folder):
    ann = pd.read_csv(folder / "annotators.csv", dtype=IDS)
    assert list(ann.columns) == [*MODEL_ANN_COLUMNS, *decision_columns.FLAG_COLUMNS, "agreement"]
    flags = reliability.annotator_flags(model)
    pd.testing.assert_frame_equal(
        ann.set_index("annotator")[list(flags.columns)], flags, check_names=False
    )
    spammers = pd.read_csv(ROOT / "demo_data" / "simulated-spammers.csv", dtype=str)
    unreliable = set(ann.loc[ann["flag"] == "unreliable", "annotator"])
    assert unreliable == set(spammers.loc[spammers["spammer"] == "1", "annotator"])


def test_summary_counts_the_flags_of_the_tables(folder):
    summary = json.loads((folder / "summary.json").read_text())
    items = pd.read_csv(folder / "items.csv")
    ann = pd.read_csv(folder / "annotators.csv")
    counts = summary["decisions"]
    for flag in decisions.ANNOTATOR_FLAGS:
        assert counts["annotators"][flag] == int((ann["flag"] == flag).sum())
    for flag in decisions.ITEM_FLAGS:
        assert counts["items"][flag] == int((items["flag"] == flag).sum())
    assert counts["annotators"]["threshold"] == 0.5
    assert counts["annotators"]["confidence"] == counts["items"]["confidence"] == 0.9
    assert counts["annotators"]["unreliable"] == 9


def test_the_download_tables_are_the_files(model, folder):
    """The dashboard downloads through items_table / annotators_table: the files' content."""
    for name, fn in (("items", outputs.items_table), ("annotators", outputs.annotators_table)):
        written = pd.read_csv(folder / f"{name}.csv", dtype=IDS)
        shown = pd.read_csv(io.BytesIO(oio.to_csv_bytes(fn(model))), dtype=IDS)
        pd.testing.assert_frame_equal(shown, written, obj=name)


def test_other_settings_change_the_flags_and_say_so(model):
    dec = decision_columns.decide(model, threshold=0.9, confidence=0.6)
    ann = outputs.annotators_table(model, dec)
    assert (ann["flag_threshold"] == 0.9).all() and (ann["flag_confidence"] == 0.6).all()
    ref = reliability.annotator_flags(model, threshold=0.9, confidence=0.6)
    assert ann["flag"].tolist() == ref["flag"].tolist()
    counts = outputs.summary(model, {}, dec)["decisions"]["annotators"]
    assert counts["unreliable"] == int((ref["flag"] == "unreliable").sum())


def test_table_rows_keep_the_fixed_order_then_the_rest():
    t = outputs.Table("t", "t_", (), ("b", "a"))
    frame = pd.DataFrame({"a": [1], "c": [2], "b": [3]})
    assert list(t.rows(frame).columns) == ["b", "a", "c"]


def test_a_fit_without_per_rating_results_has_no_flags_and_says_why(model):
    class NoOmega:
        """A fit's learned frames without per-rating omega or flags of its own."""

        items_ = model.items_
        annotators_ = model.annotators_
        categories_ = model.categories_
        hyperparams_ = model.hyperparams_
        label_result_ = model.label_result_
        omega_ = None

    dec = decision_columns.decide(NoOmega())
    assert dec.annotators is None
    ann = outputs.annotators_table(NoOmega(), dec)
    assert list(ann.columns) == MODEL_ANN_COLUMNS
    counts = outputs.decision_counts(NoOmega(), dec)
    assert counts["annotators"]["flags"] == decision_columns.NO_FLAGS
    assert set(counts["annotators"]) == {"flags", "threshold", "confidence"}
    items = outputs.items_table(NoOmega(), dec)
    assert items["truth_weight"].isna().all()
    ref = decisions.item_decisions(model)
    np.testing.assert_allclose(items["p_wrong"], ref["p_wrong"], rtol=1e-12)


@pytest.mark.slow
def test_trec_cli_flags_need_enough_ratings_and_undetermined_items_are_marked(tmp_path):
    """``ordmix fit`` on TREC with the defaults: every annotator flagged unreliable or ok has
    enough ratings for the stated confidence (n ratings of decisive evidence at best give
    Beta(1, 1 + n) / Beta(1 + n, 1)), and items.csv marks the undetermined items, the ties."""
    from scipy import stats

    out = tmp_path / "trec"
    trec = ROOT / "demo_data" / "trec-rf10-ratings.csv"
    assert main(["fit", str(trec), "--out", str(out), "--quiet"]) == 0
    ann = pd.read_csv(out / "annotators.csv", dtype=IDS)
    n = ann["n_ratings"].to_numpy()
    conf = ann["flag_confidence"].to_numpy()
    unrel = (ann["flag"] == "unreliable").to_numpy()
    ok = (ann["flag"] == "ok").to_numpy()
    assert unrel.sum() > 0 and ok.sum() > 0 and (ann["flag"] == "undetermined").sum() > 100
    assert np.all(stats.beta.cdf(0.5, 1, 1 + n[unrel]) >= conf[unrel])
    assert np.all(stats.beta.sf(0.5, 1 + n[ok], 1) >= conf[ok])
    assert n[unrel].min() >= reliability.fewest_ratings_to_flag()
    assert np.all(ann.loc[unrel, "p_unreliable"] >= conf[unrel])
    items = pd.read_csv(out / "items.csv", dtype=IDS)
    und = items["flag"] == "undetermined"
    assert und.sum() > 0 and items["label"].notna().all()
    # undetermined: the label's two most probable levels are within the policy's tie
    p = np.sort(items[["p_level_1", "p_level_2", "p_level_3"]].to_numpy(), axis=1)
    np.testing.assert_array_equal(und.to_numpy(), p[:, -1] - p[:, -2] < LabelPolicy().tie)
    # the label's interval: adjacent levels around it holding 90% of its level probabilities
    assert ((items["lower_90"] <= items["label"]) & (items["label"] <= items["upper_90"])).all()
    # ... and its ends are levels, written as the label is (3, not 3.0)
    raw = pd.read_csv(out / "items.csv", dtype=str)
    for col in ("label", "lower_90", "upper_90"):
        assert raw[col].isin(["1", "2", "3"]).all(), col
    summary = json.loads((out / "summary.json").read_text())["decisions"]
    assert summary["items"]["undetermined"] == int(und.sum())
    assert summary["annotators"]["unreliable"] == int(unrel.sum())


# --- the schema itself (files and download frames)


@pytest.fixture(scope="module")
def schema_model() -> OrdinalMixture:
    crowd = simulate_crowd(n_items=40, n_annotators=6, ratings_per_item=3, random_state=2)
    # the tables' shapes do not need the ~880 sweeps this crowd takes to converge
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OrdinalMixture("query", n_restarts=2, max_iter=60, random_state=0).fit(crowd.ratings)


def test_write_fit_outputs_writes_exactly_the_declared_files(schema_model, tmp_path) -> None:
    outputs.write_fit_outputs(schema_model, tmp_path, settings={"func": print, "path": tmp_path})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(outputs.FILES)
    ids = {"instance": str, "annotator": str, "query": str, "category": str}
    for name in outputs.TABLES:
        written = pd.read_csv(tmp_path / f"{name}.csv", dtype=ids)
        expected = outputs.table(schema_model, name)
        assert list(written.columns) == list(expected.columns), name
        assert len(written) == len(expected), name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["settings"] == {"path": str(tmp_path)}  # no "func"; paths as text
    assert summary["hyperparameters"]["pi"] == schema_model.hyperparams_["pi"]
    assert "random_state" not in summary["model"] and summary["model"]["granularity"] == "query"


def test_tables_put_ids_first_in_a_fixed_order(schema_model) -> None:
    items = outputs.items_table(schema_model)
    assert list(items.columns[:10]) == MODEL_ITEM_COLUMNS  # the model's, then the decisions
    assert list(items.columns[10:]) == list(decisions.item_decisions(schema_model).columns)
    np.testing.assert_array_equal(items["estimate"], schema_model.estimates_)
    ann = outputs.annotators_table(schema_model)
    assert list(ann.columns[:12]) == MODEL_ANN_COLUMNS  # the model's columns in a fixed order
    flags = list(reliability.annotator_flags(schema_model).columns)
    assert list(ann.columns[12:]) == [*flags, "agreement"]  # the evidence, then the agreement
    trace = outputs.table(schema_model, "trace")  # no named index: nothing added
    assert list(trace.columns) == ["restart", "iteration", "lower_bound", "stage"]


def test_learned_frames_from_arrays() -> None:
    items = outputs.items_frame(
        np.array(["b", "a"], dtype=object), np.array([1.0, 2.0]), np.array([4.0, 16.0]),
        np.array([3, 5]), None, np.array(["all", "all"], dtype=object),
    )  # fmt: skip
    assert list(items.columns) == ["estimate", "sd", "n_ratings", "category", "z_mean", "z_sd"]
    np.testing.assert_allclose(items["sd"], [0.5, 0.25])
    np.testing.assert_array_equal(items["z_mean"], items["estimate"])  # q(z)'s until labels
    np.testing.assert_array_equal(items["z_sd"], items["sd"])
    ann = outputs.annotators_frame(
        np.array(["w"]), np.array([4]), np.array([2.0]), np.array([4.0]), np.array([0.9]),
        np.array([3.0]),
    )  # fmt: skip
    assert ann.loc["w", "expertise"] == 0.5
    assert ann.loc["w", "expertise_sd"] == pytest.approx(np.sqrt(2.0) / 4.0)
    assert ann.loc["w", "spam_share"] == pytest.approx(0.25)


def test_json_default() -> None:
    assert outputs._json_default(np.arange(3)) == [0, 1, 2]
    assert outputs._json_default(np.float64(1.5)) == 1.5
    assert outputs._json_default(object) == "<class 'object'>"


# --- every field of the schema with its value, so that a mutation of outputs.py fails a test:
# each expected value is computed here from the function's inputs, not read back from outputs.py


def test_items_frame_with_query_and_gold() -> None:
    ids = pd.Index([3, 1, 2], dtype="int64")
    items = outputs.items_frame(
        ids, np.array([1.5, 2.0, 4.0]), np.array([4.0, 1.0, 0.25]), np.array([2, 0, 7]),
        np.array(["q1", "q1", "q2"], dtype=object), np.array(["q1", "q1", "q2"], dtype=object),
        gold=np.array([0, 1, 0]),
    )  # fmt: skip
    assert items.index.name == "instance" and items.index.dtype == "int64"
    assert list(items.index) == [3, 1, 2]
    assert list(items.columns) == [
        "estimate", "sd", "n_ratings", "query", "category", "gold", "z_mean", "z_sd"
    ]  # fmt: skip
    np.testing.assert_array_equal(items["estimate"], [1.5, 2.0, 4.0])
    np.testing.assert_array_equal(items["sd"], [0.5, 0.0, 2.0])  # a gold item's sd is 0
    np.testing.assert_array_equal(items["n_ratings"], [2, 0, 7])
    assert items["query"].tolist() == ["q1", "q1", "q2"]
    assert items["gold"].dtype == bool and items["gold"].tolist() == [False, True, False]
    plain = outputs.items_frame(ids, np.zeros(3), np.ones(3), np.ones(3), None, np.zeros(3))
    assert "gold" not in plain and "query" not in plain
    np.testing.assert_array_equal(plain["sd"], [1.0, 1.0, 1.0])


def test_annotators_frame_with_bias_and_without_ratings() -> None:
    ann = outputs.annotators_frame(
        np.array(["a", "b"]), np.array([0, 8]), np.array([9.0, 4.0]), np.array([3.0, 2.0]),
        np.array([0.2, 0.9]), np.array([0.0, 6.0]), np.array([0.5, -0.25]),
        np.array([4.0, 100.0]),
    )  # fmt: skip
    assert ann.index.name == "annotator"
    expected = pd.DataFrame(
        {
            "n_ratings": [0, 8],
            "expertise": [3.0, 2.0],  # shape / rate
            "expertise_sd": [1.0, 1.0],  # sqrt(shape) / rate
            "reliability": [0.2, 0.9],
            "spam_share": [1.0, 0.25],  # no ratings: all of none is spam, no division by 0
            "bias": [0.5, -0.25],
            "bias_sd": [0.5, 0.1],  # 1 / sqrt(precision)
            "eps": [0.2, 0.9],  # the continuous fit's, the reliability until the fit's own
        },
        index=pd.Index(["a", "b"], name="annotator"),
    )
    pd.testing.assert_frame_equal(ann, expected)
    no_bias = outputs.annotators_frame(
        np.array(["a"]), np.array([2]), np.array([1.0]), np.array([1.0]), np.array([1.0]),
        np.array([2.0]),
    )  # fmt: skip
    assert no_bias.loc["a", "bias"] == 0.0 and no_bias.loc["a", "bias_sd"] == 0.0
    one = outputs.annotators_frame(
        np.array(["c"]), np.array([1]), np.array([1.0]), np.array([1.0]), np.array([1.0]),
        np.array([0.25]),
    )  # fmt: skip
    assert one.loc["c", "spam_share"] == 0.75  # one rating, a quarter of it honest


def test_categories_frame() -> None:
    cats = outputs.categories_frame(
        pd.Index(["x", "y"]), np.array([6.0, 1.0]), np.array([3.0, 4.0]), np.array([5, 1])
    )
    expected = pd.DataFrame(
        {"difficulty": [2.0, 0.25], "n_ratings": [5, 1]},
        index=pd.Index(["x", "y"], name="category"),
    )
    pd.testing.assert_frame_equal(cats, expected)


def _problem(**kw):
    from types import SimpleNamespace

    base = dict(phi=2.0, eta=3.0, mu=2.5, lam=0.5, spam=True, bias=False, spam_dist="uniform")
    return SimpleNamespace(**{**base, **kw})


def test_hyperparams_of_each_model_variant() -> None:
    from types import SimpleNamespace

    values, thresholds = [1.0, 2.0], [0.5, 1.5, 2.5]
    pi = np.array([0.5, 0.5])
    common = {"alpha": 1.5, "beta": 2.0, "phi": 2.0, "eta": 3.0, "mu": 2.5, "lambda": 0.5,
              "scale": values, "thresholds": thresholds}  # fmt: skip
    paper = outputs.hyperparams(np.float64(1.5), 2, _problem(), pi, values, thresholds)
    assert paper == {**common, "pi": [0.5, 0.5]}
    assert all(type(v) is float for v in (paper["alpha"], paper["beta"], *paper["pi"]))
    state = SimpleNamespace(pi=np.array([0.25, 0.75]), lam_b=4.0, kappa=7.0)
    bias = outputs.hyperparams(1.5, 2.0, _problem(bias=True), pi, values, thresholds, state)
    assert bias == {**common, "pi": [0.5, 0.5], "lambda_b": 4.0}  # uniform spam: the fixed pi
    glob = outputs.hyperparams(1.5, 2.0, _problem(spam_dist="global"), pi, values, thresholds,
                               state)  # fmt: skip
    assert glob == {**common, "pi": [0.25, 0.75], "pi_fixed": [0.5, 0.5]}
    per_ann = outputs.hyperparams(
        1.5, 2.0, _problem(spam_dist="annotator", bias=True), pi, values, thresholds, state
    )
    assert per_ann == {**common, "pi": [0.25, 0.75], "lambda_b": 4.0, "pi_fixed": [0.5, 0.5],
                       "kappa": 7.0}  # fmt: skip
    not_learned = SimpleNamespace(pi=None, lam_b=1.0, kappa=1.0)
    assert outputs.hyperparams(
        1.5, 2.0, _problem(spam_dist="annotator"), pi, values, thresholds, not_learned
    ) == {**common, "pi": [0.5, 0.5]}
    # no state (the model without spam): none of the extensions' keys
    assert outputs.hyperparams(
        1.5, 2.0, _problem(spam_dist="annotator", bias=True), pi, values, thresholds
    ) == {**common, "pi": [0.5, 0.5]}


def test_model_description_of_each_model_variant() -> None:
    paper_why = "the model of Lakshminarayanan & Teh as published (model='paper')"
    assert outputs.model_description("paper", _problem(), None, {"pi": [0.5, 0.5]}, None) == {
        "model": "paper", "bias": False, "spam_dist": "uniform",
        "stages": ["nospam", "mixture"], "lambda_b": None, "bias_sd_prior": None, "pi": None,
        "n_gold": 0, "why": paper_why,
    }  # fmt: skip
    hyper = {"lambda_b": 4.0, "pi": [0.25, 0.75]}
    p = _problem(bias=np.True_, spam_dist="global")
    ext = outputs.model_description("extended", p, "uniform", hyper, np.array([1, 0, 1, 1]))
    assert ext == {
        "model": "extended", "bias": True, "spam_dist": "global",
        "stages": ["nospam", "uniform", "mixture"], "lambda_b": 4.0, "bias_sd_prior": 0.5,
        "pi": [0.25, 0.75], "n_gold": 3, "why": outputs.EXTENDED_WHY,
    }  # fmt: skip
    assert type(ext["bias"]) is bool and type(ext["n_gold"]) is int
    nospam = outputs.model_description("extended", _problem(spam=False), "uniform", {}, None)
    assert nospam["stages"] == ["model"] and nospam["spam_dist"] is None
    assert outputs.model_description("x", _problem(), None, {"lambda_b": 0.0}, None)[
        "bias_sd_prior"
    ] is None  # fmt: skip


def test_spam_distributions_frame() -> None:
    assert outputs.spam_distributions_frame(np.array(["a"]), [1.0, 2.0], None) is None
    dir_a = np.array([[1.0, 3.0, 4.0], [6.0, 1.0, 1.0]])
    out = outputs.spam_distributions_frame(np.array(["a", "b"]), [1.0, 2.5, 4.0], dir_a)
    expected = pd.DataFrame(
        {"1": [0.125, 0.75], "2.5": [0.375, 0.125], "4": [0.5, 0.125], "favourite": [4.0, 1.0]},
        index=pd.Index(["a", "b"], name="annotator"),
    )
    pd.testing.assert_frame_equal(out, expected)
    ints = outputs.spam_distributions_frame(np.array(["a", "b"]), [1, 2, 3], dir_a)
    assert ints["favourite"].dtype == np.float64 and ints["favourite"].tolist() == [3.0, 1.0]
    assert list(ints.columns) == ["1", "2", "3", "favourite"]


def test_table_rows_of_an_unnamed_index_and_without_a_fixed_order() -> None:
    t = outputs.Table("t", "t_", ())
    frame = pd.DataFrame({"b": [1], "a": [2]}, index=pd.Index([7], name="id"))
    pd.testing.assert_frame_equal(t.rows(frame), frame.reset_index())
    plain = pd.DataFrame({"b": [1]})
    assert t.rows(plain) is plain


def test_summary_json_has_every_field_with_the_models_values(schema_model, tmp_path) -> None:
    m = schema_model
    outputs.write_fit_outputs(m, tmp_path, settings={"func": print, "engine": "memory"})
    summary = json.loads((tmp_path / "summary.json").read_text())
    from ordmix_core import __version__

    params = m.get_params()
    del params["random_state"]
    expected = {
        "ordmix_version": __version__,
        "settings": {"engine": "memory"},
        "model": json.loads(json.dumps(params, default=str)),
        "n_ratings": len(m.data_.ann),
        "n_instances": len(m.items_),
        "n_annotators": len(m.annotators_),
        "n_categories": len(m.categories_),
        "hyperparameters": json.loads(json.dumps(m.hyperparams_)),
        "model_choice": json.loads(json.dumps(m.model_)),
        "winning_restart": m.best_restart_,
        "selection_reason": m.selection_reason_,
        "lower_bound": m.lower_bound_,
        "iterations": m.n_iter_,
        "converged": m.converged_,
        "collapsed": m.collapsed_,
        "interrupted": m.interrupted_,
        "warnings": list(m.warnings_),
        "seconds": round(m.seconds_, 3),
        # what the near-tied restarts disagree on, counted from the frames
        "unstable_items": int(m.items_["unstable"].sum()),
        "unstable_annotators": int(m.annotators_["unstable"].sum()),
        "still_moving_annotators": int(m.annotators_["still_moving"].sum()),
        "ensemble": {
            "restarts": [int(r) for r in m.ensemble_],
            "bound_gap": m.ensemble_gap_,
            "unstable_items": int(m.items_["unstable"].sum()),
            "max_estimate_spread": float(m.items_["estimate_spread"].max()),
            "unstable_annotators": int(m.annotators_["unstable"].sum()),
            # the still-moving annotators carried the way they were going, with their IDs as text
            "alternative": None
            if m.alternative_ is None
            else {**m.alternative_, "annotators": [str(a) for a in m.alternative_["annotators"]]},
        },
    }
    decisions_part = summary.pop("decisions")
    # the crowd's agreement: ``agreement.crowd_agreement`` of the ratings (tests/results/
    # test_agreement.py checks it against the krippendorff package)
    assert summary.pop("agreement") == agreement.crowd_agreement(m.data_).as_dict()
    assert summary == expected
    assert summary["n_categories"] == m.items_["query"].nunique()  # query granularity
    ann = pd.read_csv(tmp_path / "annotators.csv")
    items = pd.read_csv(tmp_path / "items.csv")
    assert decisions_part == {
        "annotators": {**{f: int((ann["flag"] == f).sum()) for f in decisions.ANNOTATOR_FLAGS},
                       "threshold": 0.5, "confidence": 0.9},
        "items": {**{f: int((items["flag"] == f).sum()) for f in decisions.ITEM_FLAGS},
                  "confidence": 0.9, "tie": 0.01},
    }  # fmt: skip
    assert isinstance(outputs.summary(m, {})["winning_restart"], int)


def test_every_file_holds_the_models_values(schema_model, tmp_path) -> None:
    m = schema_model
    outputs.write_fit_outputs(m, tmp_path, settings={})
    ids = {"instance": str, "annotator": str, "query": str, "category": str}
    items = pd.read_csv(tmp_path / "items.csv", dtype=ids).set_index("instance")
    ref = m.items_.set_index(m.items_.index.astype(str))
    for col in ("estimate", "sd", "n_ratings"):
        np.testing.assert_allclose(items[col], ref[col], rtol=1e-15, err_msg=col)
    assert items["query"].tolist() == ref["query"].astype(str).tolist()
    ann = pd.read_csv(tmp_path / "annotators.csv", dtype=ids).set_index("annotator")
    ref = m.annotators_.set_index(m.annotators_.index.astype(str))
    for col in ref.columns:
        np.testing.assert_allclose(ann[col], ref[col], rtol=1e-15, err_msg=col)
    cats = pd.read_csv(tmp_path / "categories.csv", dtype=ids).set_index("category")
    np.testing.assert_allclose(cats["difficulty"], m.categories_["difficulty"], rtol=1e-15)
    trace = pd.read_csv(tmp_path / "trace.csv")
    assert len(trace) == len(m.trace_)
    np.testing.assert_allclose(trace["lower_bound"], m.trace_["lower_bound"], rtol=1e-15)
    restarts = pd.read_csv(tmp_path / "restarts.csv")
    ref = m.restarts_.reset_index() if m.restarts_.index.name else m.restarts_
    assert list(restarts.columns) == list(ref.columns) and len(restarts) == m.n_restarts
    np.testing.assert_allclose(restarts["lower_bound"], ref["lower_bound"], rtol=1e-15)


def test_download_tables_use_the_decisions_they_are_given(schema_model) -> None:
    dec = decision_columns.decide(schema_model, threshold=0.7, confidence=0.6)
    items = outputs.items_table(schema_model, dec).set_index("instance")
    ref = decisions.item_decisions(schema_model, confidence=0.6)
    default = decisions.item_decisions(schema_model)
    assert (items["flag"] != default["flag"]).any()  # the setting matters on this crowd
    pd.testing.assert_frame_equal(items[list(ref.columns)], ref, check_names=False)
    ann = outputs.table(schema_model, "annotators", dec)
    assert (ann["flag_threshold"] == 0.7).all() and (ann["flag_confidence"] == 0.6).all()


def test_decide_uses_the_settings_it_is_given(schema_model) -> None:
    dec = decision_columns.decide(schema_model, threshold=0.7, confidence=0.8)
    assert (dec.threshold, dec.confidence, dec.no_flags) == (0.7, 0.8, None)
    pd.testing.assert_frame_equal(dec.items, decisions.item_decisions(schema_model, confidence=0.8))
    pd.testing.assert_frame_equal(
        dec.annotators,
        reliability.annotator_flags(schema_model, threshold=0.7, confidence=0.8).assign(
            agreement=agreement.annotator_agreement(schema_model.data_).to_numpy()
        ),
    )
    assert dec.agreement == agreement.crowd_agreement(schema_model.data_)
    with pytest.raises(Exception, match="confidence"):
        decision_columns.decide(schema_model, confidence=2.0)


@pytest.fixture
def sync_dask():
    """Dask's synchronous scheduler: no thread pool (a forked mutmut worker would hang in
    one the parent process started), and the same partitions in the same order every run."""
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


def _dask_like(model):
    """What the Dask engine leaves above ``max_local_items``: items_ as a Dask DataFrame."""
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")

    with dask.config.set({"dataframe.convert-string": False}):  # keep the IDs' dtype
        items = dd.from_pandas(model.items_, npartitions=3, sort=False)

    class DaskFit:
        """The fitted model's attributes, but ``items_`` partitioned, no ``omega_`` and no
        flags or posterior per block (``item_posterior_``): the continuous labels' path."""

        items_ = items
        omega_ = None
        annotator_flags_ = None

        def __getattr__(self, name):
            return getattr(model, name)

    return DaskFit()


def test_dask_items_get_the_decision_columns_per_partition(
    schema_model, tmp_path, sync_dask
) -> None:
    fit = _dask_like(schema_model)
    dec = decision_columns.decide(fit)
    assert (
        dec.items is None and dec.annotators is None and dec.no_flags == decision_columns.NO_FLAGS
    )
    counts = outputs.decision_counts(fit, decision_columns.decide(fit, threshold=0.7))
    assert counts["annotators"] == {
        "flags": decision_columns.NO_FLAGS, "threshold": 0.7, "confidence": 0.9,
    }  # fmt: skip
    hidden = _Override(schema_model, omega_=_MISSING, annotator_flags_=_MISSING)
    no_attr = decision_columns.decide(hidden)  # no omega_, no flags at all
    assert no_attr.annotators is None and no_attr.no_flags == decision_columns.NO_FLAGS
    # its own flags, with the agreement beside them in a new frame (theirs left as it is)
    own = decision_columns.decide(_Override(schema_model, omega_=_MISSING))
    agreement = decision_columns.AGREEMENT_COLUMN
    flags = schema_model.annotator_flags_
    assert agreement not in flags and own.annotators[agreement].notna().any()
    pd.testing.assert_frame_equal(own.annotators.drop(columns=agreement), flags)
    got = outputs.decided(fit, "items", dec).compute()
    ann = schema_model.annotators_
    share = float((ann["n_ratings"] * (1 - ann["spam_share"])).sum() / ann["n_ratings"].sum())
    ref = _continuous_columns(schema_model, share)
    pd.testing.assert_frame_equal(got, schema_model.items_.join(ref))
    counts = outputs.decision_counts(fit, dec)["items"]
    assert counts == {**{f: int((ref["flag"] == f).sum()) for f in decisions.ITEM_FLAGS},
                      "confidence": 0.9, "tie": 0.01}  # fmt: skip
    written = []

    def write_parts(table, frame, folder):
        assert folder.is_dir() and folder == tmp_path / table.name
        pd.testing.assert_frame_equal(frame.compute(), got)  # the items with their decisions
        written.append((table.name, frame))

    outputs.write_fit_outputs(fit, tmp_path, {}, write_parts=write_parts)
    assert [name for name, _ in written] == ["items"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(f for f in outputs.FILES if f != "items.csv"), "items"]
    )
    with pytest.raises(TypeError, match=r"^items_ is a DataFrame; pass write_parts$"):
        outputs.write_fit_outputs(fit, tmp_path / "again", {})


def test_dask_items_read_each_blocks_posterior(sync_dask) -> None:
    """Items left on a cluster with each block's posterior (``item_posterior_``: the
    confusion model's ``proba_<k>``, ``gain`` and ``truth_weight``, aligned with ``items_``'s
    partitions) and flags of the fit's own: the in-memory engine's decision columns, flags and
    counts, read partition by partition."""
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    crowd = simulate_crowd(n_items=40, n_annotators=6, ratings_per_item=3, random_state=4)
    with warnings.catch_warnings():  # 60 sweeps: the columns are read from whatever posterior
        warnings.simplefilter("ignore")
        model = OrdinalMixture("query", n_restarts=1, max_iter=60, random_state=0)
        model.fit(crowd.ratings)
    post = model.label_result_.posterior
    frame = pd.DataFrame(post.proba, index=model.items_.index)
    frame.columns = [f"proba_{k}" for k in range(post.proba.shape[1])]
    frame["gain"] = post.gain
    data = model.data_
    frame["truth_weight"] = np.bincount(data.inst, weights=model.omega_, minlength=len(frame))
    with dask.config.set({"dataframe.convert-string": False}):
        items = dd.from_pandas(model.items_, npartitions=3, sort=False)
        parts = dd.from_pandas(frame, npartitions=3, sort=False)

    class DaskFit:
        items_, item_posterior_, omega_ = items, parts, None

        def __getattr__(self, name):
            return getattr(model, name)

    dec = decision_columns.decide(DaskFit())
    pd.testing.assert_frame_equal(dec.annotators, decision_columns.decide(model).annotators)
    got = outputs.decided(DaskFit(), "items", dec).compute()
    want = model.items_.join(decisions.item_decisions(model))
    pd.testing.assert_frame_equal(got, want)
    assert outputs.decision_counts(DaskFit(), dec) == outputs.summary(model, {})["decisions"]


def test_dask_items_at_instance_granularity_join_each_partitions_categories(
    sync_dask,
) -> None:
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    crowd = simulate_crowd(n_items=30, n_annotators=5, ratings_per_item=3, random_state=4)
    # the Dask engine's labels come from the continuous posterior (no confusion-model stage)
    model = OrdinalMixture(
        "instance", n_restarts=1, max_iter=60, random_state=0, labels="continuous"
    )
    with warnings.catch_warnings():  # 60 sweeps: the columns are joined whatever the posterior
        warnings.simplefilter("ignore")
        model.fit(crowd.ratings)
    assert (model.categories_.index == model.items_["category"].to_numpy()).all()
    with dask.config.set({"dataframe.convert-string": False}):
        items = dd.from_pandas(model.items_, npartitions=3, sort=False)
        cats = dd.from_pandas(model.categories_, npartitions=3, sort=False)

    class DaskFit:
        items_, categories_, omega_ = items, cats, None

        def __getattr__(self, name):
            return getattr(model, name)

    got = outputs.decided(DaskFit(), "items", decision_columns.decide(DaskFit())).compute()
    pd.testing.assert_frame_equal(got.drop(columns="truth_weight"),
                                  outputs.items_table(model).set_index("instance")
                                  .drop(columns="truth_weight"), check_names=False)  # fmt: skip


def test_dask_items_use_the_given_confidence_and_the_share_of_honest_ratings(
    schema_model, sync_dask
) -> None:
    fit = _dask_like(schema_model)
    dec = decision_columns.decide(fit, confidence=0.6)
    got = outputs.decided(fit, "items", dec).compute()
    ann = schema_model.annotators_
    share = float((ann["n_ratings"] * (1 - ann["spam_share"])).sum() / ann["n_ratings"].sum())
    ref = _continuous_columns(schema_model, share, confidence=0.6)
    pd.testing.assert_frame_equal(got[list(ref.columns)], ref)
    # a single rating: the share is that rating's honest part, not half of it
    one = pd.DataFrame({"n_ratings": [1], "spam_share": [0.25]}, index=pd.Index(["a"]))
    fit.annotators_ = one
    got = outputs.decided(fit, "items", decision_columns.decide(fit)).compute()
    ref = _continuous_columns(schema_model, 0.75)
    pd.testing.assert_frame_equal(got[list(ref.columns)], ref)


def _continuous_columns(model, share: float, confidence: float = 0.9) -> pd.DataFrame:
    """The decision columns of ``model``'s continuous posterior q(z), computed here from the
    model's frames: what the Dask engine's partitions get."""
    items = model.items_
    difficulty = model.categories_["difficulty"].reindex(items["category"]).to_numpy(float)
    post = decisions.continuous_posterior(
        items["z_mean"].to_numpy(float), items["z_sd"].to_numpy(float), model.hyperparams_,
        difficulty, share,
    )  # fmt: skip
    return decisions.item_columns(post, items.index, LabelPolicy(confidence=confidence))


class _Override:
    """A fitted model with some attributes replaced (or hidden: ``_MISSING``)."""

    def __init__(self, model, **attrs):
        self._model, self._attrs = model, attrs

    def __getattr__(self, name):
        if name in self._attrs:
            if self._attrs[name] is _MISSING:
                raise AttributeError(name)
            return self._attrs[name]
        return getattr(self._model, name)


_MISSING = object()


def test_summary_says_collapsed_interrupted_and_uses_the_given_decisions(schema_model) -> None:
    m = _Override(schema_model, collapsed_=np.True_, interrupted_=1, model_=_MISSING)
    dec = decision_columns.decide(schema_model, threshold=0.9, confidence=0.6)
    s = outputs.summary(m, {}, dec)
    assert s["collapsed"] is True and s["interrupted"] is True
    assert s["model_choice"] is None  # a result from before the model choice existed
    assert s["decisions"]["annotators"]["threshold"] == 0.9
    assert s["decisions"]["items"]["confidence"] == 0.6
    assert outputs.summary(schema_model, {})["model_choice"] == schema_model.model_


def test_written_files_read_back_to_the_tables_and_json_is_indented(schema_model, tmp_path):
    outputs.write_fit_outputs(schema_model, tmp_path, settings={})
    ids = {"instance": str, "annotator": str, "query": str, "category": str, "init": str,
           "stage": str}  # fmt: skip
    for name in outputs.TABLES:
        written = pd.read_csv(tmp_path / f"{name}.csv", dtype=ids, keep_default_na=False)
        expected = outputs.table(schema_model, name)
        for col in expected.columns:
            want = expected[col]
            if want.dtype.kind in "fiub":
                got = written[col].replace("", "nan").astype(float)  # NaN: an empty field
                np.testing.assert_allclose(got, want.astype(float), rtol=1e-15,
                                           err_msg=f"{name}.{col}")  # fmt: skip
            else:
                assert written[col].tolist() == want.astype(str).tolist(), f"{name}.{col}"
    text = (tmp_path / "summary.json").read_text()
    assert text == json.dumps(json.loads(text), indent=2)  # readable: two-space indents


def test_formula_like_ids_are_protected_in_every_id_column(tmp_path) -> None:
    crowd = simulate_crowd(n_items=12, n_annotators=4, ratings_per_item=3, random_state=3)
    r = crowd.ratings.copy()
    r["instance"] = "=" + r["instance"].astype(str)
    r["annotator"] = "+" + r["annotator"].astype(str)
    r["query"] = "@" + r["query"].astype(str)
    with warnings.catch_warnings():  # 60 sweeps of the ~940 it takes: only the IDs matter here
        warnings.simplefilter("ignore")
        m = OrdinalMixture("query", n_restarts=1, max_iter=60, random_state=0).fit(r)
    outputs.write_fit_outputs(m, tmp_path, settings={})
    items = pd.read_csv(tmp_path / "items.csv", dtype=str)
    assert items["instance"].str.startswith("'=").all()
    assert (
        items["query"].str.startswith("'@").all() and items["category"].str.startswith("'@").all()
    )
    ann = pd.read_csv(tmp_path / "annotators.csv", dtype=str)
    assert ann["annotator"].str.startswith("'+").all()
    cats = pd.read_csv(tmp_path / "categories.csv", dtype=str)
    assert cats["category"].str.startswith("'@").all()


# --------------------------------------------------------------------------- stability
def _nearest(x: float, values: list[float]) -> int:
    return min(range(len(values)), key=lambda k: (abs(x - values[k]), k))


@pytest.mark.parametrize("chunk", [7, 1 << 18])
@pytest.mark.parametrize("step", [1.0, 2.0])
def test_item_stability_against_a_loop(step, chunk, monkeypatch) -> None:
    monkeypatch.setattr(stability, "_STABILITY_CHUNK", chunk)  # items a chunk at a time, or all
    rng = np.random.default_rng(7)
    values = [step * k for k in range(5)]
    mu = rng.uniform(0, 4 * step, size=(3, 60))
    mu[:, 0] = [1.0 * step, 1.0 * step, 1.0 * step]  # the same everywhere: stable
    limit = stability.UNSTABLE_SPREAD_STEPS * step
    mu[:, 1] = [0.0, limit, 0.0]  # spread exactly at the limit (max - min is exact), no flip
    mu[:, 2] = [0.48 * step, 0.52 * step, 0.5 * step]  # flips level within a small spread
    mu[:, 3] = [1.0 * step, 1.0 * step + 0.5 * limit, 1.0 * step]  # under the limit, no flip
    got = stability.item_stability(mu, np.array(values), step)
    assert list(got.columns) == ["estimate_spread", "unstable"] and len(got) == 60
    for m in range(60):
        col = list(mu[:, m])
        spread = max(col) - min(col)
        levels = {_nearest(x, values) for x in col}
        assert got["estimate_spread"][m] == pytest.approx(spread, abs=1e-12)
        assert bool(got["unstable"][m]) == (len(levels) > 1 or spread >= limit), m
    assert got["unstable"][:4].tolist() == [False, True, True, False]
    one = stability.item_stability(mu[:1], np.array(values), step)  # the winner alone
    assert (one["estimate_spread"] == 0).all() and not one["unstable"].any()


def test_annotator_stability_against_a_loop() -> None:
    eps = np.array(
        [[0.9, 0.6, 0.5, 0.2, 0.49], [0.8, 0.4, 0.5, 0.3, 0.5], [0.95, 0.7, 0.5, 0.1, 0.4]]
    )
    got = stability.annotator_stability(eps)
    assert list(got.columns) == ["reliability_spread", "unstable"]
    for n in range(eps.shape[1]):
        col = eps[:, n]
        assert got["reliability_spread"][n] == pytest.approx(col.max() - col.min(), abs=1e-15)
        assert bool(got["unstable"][n]) == (len({bool(e >= 0.5) for e in col}) > 1)
    assert got["unstable"].tolist() == [False, True, False, False, True]


def test_stability_summary_of_frames_and_of_what_is_missing() -> None:
    from types import SimpleNamespace

    items = pd.DataFrame({"estimate_spread": [0.1, 0.7, 0.0], "unstable": [False, True, True]})
    ann = pd.DataFrame({"unstable": [True, False, True, True]})
    m = SimpleNamespace(items_=items, annotators_=ann, ensemble_=[np.int64(3), 1],
                        ensemble_gap_=np.float64(12.5), best_restart_=3)  # fmt: skip
    s = stability.stability_summary(m)
    assert s == {"restarts": [3, 1], "bound_gap": 12.5, "unstable_items": 2,
                 "max_estimate_spread": 0.7, "unstable_annotators": 3,
                 "alternative": None}  # fmt: skip
    assert type(s["restarts"][0]) is int and type(s["bound_gap"]) is float
    # the alternative as the model keeps it, its annotator IDs as text for the JSON
    alt = {"annotators": [np.int64(7), 12], "lower_bound": -10.0, "bound_above_winner": 2.5,
           "n_iter": 9, "near_tied": True}  # fmt: skip
    m.alternative_ = alt
    assert stability.stability_summary(m)["alternative"] == {**alt, "annotators": ["7", "12"]}
    assert alt["annotators"] == [7, 12]  # the model's own is left as it was
    bare = SimpleNamespace(items_=items.iloc[:0], annotators_=pd.DataFrame({"x": [1]}),
                           best_restart_=5)  # fmt: skip
    assert stability.stability_summary(bare) == {"restarts": [5], "bound_gap": 0.0,
        "unstable_items": 0, "max_estimate_spread": 0.0, "unstable_annotators": None,
        "alternative": None}  # fmt: skip
    no_cols = SimpleNamespace(items_=pd.DataFrame({"estimate": [1.0]}), annotators_=ann,
                              best_restart_=0)  # fmt: skip
    s = stability.stability_summary(no_cols)
    assert s["unstable_items"] is None and s["max_estimate_spread"] is None
    assert s["unstable_annotators"] == 3


def test_decide_reuses_the_fits_own_flags_only_at_the_default_settings(schema_model) -> None:
    from types import SimpleNamespace

    fresh = reliability.annotator_flags(schema_model)
    mine = fresh.assign(p_unreliable=0.123)  # marked: a recomputation would not have it
    m = SimpleNamespace(**{k: getattr(schema_model, k) for k in vars(schema_model)})
    m.annotator_flags_ = mine
    got = decision_columns.decide(m).annotators
    pd.testing.assert_frame_equal(got.drop(columns="agreement"), mine)  # the fit's own flags
    assert "agreement" not in mine  # and left as they were
    for kw in ({"threshold": 0.6}, {"confidence": 0.8}):
        other = decision_columns.decide(m, **kw).annotators
        assert (other["p_unreliable"] != 0.123).all() and len(other) == len(mine)
    m.annotator_flags_ = None
    pd.testing.assert_frame_equal(decision_columns.decide(m).annotators.iloc[:, :-1], fresh)
    del m.annotator_flags_  # a model from before the attribute existed
    pd.testing.assert_frame_equal(decision_columns.decide(m).annotators.iloc[:, :-1], fresh)


def test_items_csv_written_in_chunks_is_the_whole_table(schema_model, tmp_path, monkeypatch):
    """``write_fit_outputs`` writes items.csv a chunk of items at a time: the same bytes as the
    whole table (``items_table``, the download), and summary.json counts the same flags."""
    whole = oio.to_csv_bytes(
        outputs.items_table(schema_model), list(outputs.TABLES["items"].id_columns)
    )
    flags = outputs.items_table(schema_model)["flag"].value_counts()
    for chunk in (7, len(schema_model.items_), 1 << 18):
        monkeypatch.setattr(decisions, "ITEM_CHUNK", chunk)
        out = tmp_path / str(chunk)
        out.mkdir()
        outputs.write_fit_outputs(schema_model, out, settings={})
        assert (out / "items.csv").read_bytes() == whole, chunk
        counts = json.loads((out / "summary.json").read_text())["decisions"]["items"]
        assert {f: counts[f] for f in decisions.ITEM_FLAGS} == {
            f: int(flags.get(f, 0)) for f in decisions.ITEM_FLAGS
        }
        assert sum(counts[f] for f in decisions.ITEM_FLAGS) == len(schema_model.items_)


def test_decide_without_items_still_gives_every_table(schema_model) -> None:
    """``decide(model, items=False)`` (what ``write_fit_outputs`` starts from) leaves the item
    columns to be computed when asked: the tables and counts are the full ones."""
    full, lean = (
        decision_columns.decide(schema_model),
        decision_columns.decide(schema_model, items=False),
    )
    assert lean.items is None and lean.annotators is not None
    pd.testing.assert_frame_equal(
        outputs.items_table(schema_model, lean), outputs.items_table(schema_model, full)
    )
    assert outputs.decision_counts(schema_model, lean) == outputs.decision_counts(
        schema_model, full
    )


def test_still_moving_count_counts_the_column_or_says_it_is_missing() -> None:
    from types import SimpleNamespace

    ann = pd.DataFrame({"still_moving": [True, False, True]})
    assert stability.still_moving_count(SimpleNamespace(annotators_=ann)) == 2
    bare = SimpleNamespace(annotators_=pd.DataFrame({"x": [1]}))
    assert stability.still_moving_count(bare) is None
