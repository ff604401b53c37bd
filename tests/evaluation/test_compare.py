import numpy as np
import pandas as pd
import pytest

from ordmix_core import InputError
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.evaluation.compare import METHODS, TABLE1, compare_methods, parse_methods


@pytest.fixture(scope="module")
def crowd():
    return simulate_crowd(300, 24, 5, spammer_share=0.4, random_state=2)


def test_every_table1_method_scored(crowd):
    table, est = compare_methods(crowd.ratings, crowd.gold, n_restarts=2, random_state=0)
    assert table["method"].tolist() == TABLE1
    assert list(table.columns[:9]) == [
        "method", "mse", "correlation", "ndcg", "label_error", "calibration_error",
        "p_wrong_auroc", "log_loss", "seconds",
    ]  # fmt: skip
    assert table[["mse", "correlation", "ndcg", "label_error"]].notna().all().all()
    assert list(est.columns) == TABLE1 and len(est) == 300
    by = table.set_index("method")
    # with 40% spammers the mixture (the paper's and the default) beats the plain mean clearly
    for odm in ("odm-paper-query", "odm"):
        assert by.loc[odm, "mse"] < by.loc["mean", "mse"]
        assert by.loc[odm, "correlation"] > by.loc["mean", "correlation"]
    # a method without level probabilities: its rounded estimate is its label, no calibration
    from ordmix_core.estimators.baselines import DawidSkene
    from ordmix_core.evaluation.metrics import calibration_error, label_error

    want = label_error(est["mean"].loc[crowd.gold.index], crowd.gold, [1, 2, 3, 4, 5])
    assert by.loc["mean", "label_error"] == pytest.approx(want)
    assert np.isnan(by.loc["mean", "calibration_error"]) and np.isnan(by.loc["mean", "log_loss"])
    assert np.isnan(by.loc["mean", "p_wrong_auroc"])
    # a method with them: its most probable level is its label, and they are scored
    ds = DawidSkene().fit(crowd.ratings).posterior_.loc[crowd.gold.index]
    gold_level = crowd.gold.to_numpy().astype(int) - 1
    assert by.loc["dawid-skene", "label_error"] == pytest.approx(
        np.mean(ds.to_numpy().argmax(axis=1) != gold_level)
    )
    assert by.loc["dawid-skene", "calibration_error"] == pytest.approx(
        calibration_error(ds.to_numpy(), gold_level)
    )
    wrong = ds.to_numpy().argmax(axis=1) != gold_level
    p_wrong = 1 - ds.to_numpy().max(axis=1)
    pairs = p_wrong[wrong][:, None] - p_wrong[~wrong][None, :]  # AUROC: P(wrong ranked first)
    auroc = (pairs > 0).mean() + 0.5 * (pairs == 0).mean()
    assert by.loc["dawid-skene", "p_wrong_auroc"] == pytest.approx(auroc)
    assert table.set_index("method").loc[["odm", "odm-paper-query"], "log_loss"].notna().all()


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(InputError, match="odm-query"):
        parse_methods("mean,nonsense", TABLE1)
    assert parse_methods(None, ["mean"]) == ["mean"]
    assert set(TABLE1) < set(METHODS)


def test_odm_query_needs_query(crowd):
    with pytest.raises(InputError, match="query"):
        compare_methods(crowd.ratings.drop(columns="query"), crowd.gold, "odm-query")
    t, _ = compare_methods(crowd.ratings.drop(columns="query"), crowd.gold, "mean")
    assert isinstance(t, pd.DataFrame) and len(t) == 1


def test_granularity_chooses_the_model_rows(crowd):
    from ordmix_core.evaluation.compare import CompareNote, select_methods

    assert select_methods(None, None, True) == TABLE1
    assert select_methods(None, "instance", True) == [
        m for m in TABLE1 if not m.startswith("odm")
    ] + ["odm-paper-instance", "odm"]
    assert select_methods(None, "query", True)[-2:] == ["odm-paper-query", "odm"]
    with pytest.warns(
        CompareNote, match="odm-paper-query skipped: the ratings have no query column"
    ):
        names = select_methods(None, None, False)
    assert "odm-paper-query" not in names and "odm-paper-instance" in names
    # the default row fits the default model, the paper's rows the paper's
    assert METHODS["odm"].make({}, 0).model == "extended"
    assert METHODS["odm"].make({}, 0).granularity == "instance"
    assert METHODS["odm-paper-query"].make({}, 0).model == "paper"
    with pytest.raises(InputError, match="method odm-global fits at granularity global"):
        select_methods("odm-global", "instance", True)
    with pytest.raises(InputError, match="needs a 'query' column"):
        select_methods(None, "query", False)
    with pytest.raises(InputError, match="is not one of instance, query, global"):
        select_methods(None, "bogus", True)
    # the ablation variants fit at the granularity asked for, global by default
    assert METHODS["odm-real-spam"].make({}, 0).granularity == "global"
    m = METHODS["odm-real-spam"].make({"tol": 0.5}, 0, "instance")
    assert (m.granularity, m.ordinal, m.spam, m.tol) == ("instance", False, True, 0.5)
    t, _ = compare_methods(
        crowd.ratings, crowd.gold, None, n_restarts=1, random_state=0, granularity="global"
    )
    assert t["method"].tolist() == [m for m in TABLE1 if not m.startswith("odm")] + [
        "odm-paper-global",
        "odm",
    ]


def test_model_params_reach_the_model_rows(crowd):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        short, _ = compare_methods(
            crowd.ratings, crowd.gold, "odm-paper-instance", random_state=0,
            params={"max_iter": 1},
        )  # fmt: skip
        full, _ = compare_methods(crowd.ratings, crowd.gold, "odm-paper-instance", random_state=0)
    assert short["mse"][0] != full["mse"][0]
    with pytest.raises(InputError, match="max_iter must be a whole number"):
        compare_methods(crowd.ratings, crowd.gold, "mean", params={"max_iter": 0})
    with pytest.raises(InputError, match="spam cannot be set for every method"):
        compare_methods(crowd.ratings, crowd.gold, "mean", params={"spam": False})


def test_gold_without_ratings_noted_and_n_gold_counts_the_scored(crowd):
    from ordmix_core.evaluation.compare import CompareNote

    gold = pd.concat([crowd.gold, pd.Series([3.0, 2.0], index=["ghost-1", "ghost-2"])])
    with pytest.warns(CompareNote, match=r"2 of 302 gold item\(s\) have no ratings"):
        t, _ = compare_methods(crowd.ratings, gold, "mean")
    assert t["n_gold"].tolist() == [300]
    with pytest.raises(InputError, match="no gold item has ratings"):
        compare_methods(crowd.ratings, gold[["ghost-1", "ghost-2"]], "mean")
    off = crowd.gold.copy()
    off.iloc[0] = -3
    with pytest.raises(InputError, match=r"has truth -3, outside the rating scale 1,2,3,4,5"):
        compare_methods(crowd.ratings, off, "mean")


def test_the_defaults_scores_are_those_of_the_labels_it_ships():
    """compare scores the labels and ``p_wrong`` items.csv holds: the fit's one posterior."""
    from ordmix_core import OrdinalMixture
    from ordmix_core.evaluation.metrics import calibration_error, label_error, p_wrong_auroc
    from ordmix_core.results import decisions

    crowd = simulate_crowd(
        300, 24, 5, spammer_share=0.4, random_state=3, favourite_share=1.0, favourite_weight=0.9
    )
    table, _ = compare_methods(crowd.ratings, crowd.gold, "odm", n_restarts=2, random_state=0)
    same = OrdinalMixture(n_restarts=2, random_state=np.random.default_rng(0))
    dec = decisions.item_decisions(same.fit(crowd.ratings)).loc[crowd.gold.index]
    p = dec.filter(like="p_level_").to_numpy()
    gold_level = crowd.gold.to_numpy().astype(int) - 1
    row = table.set_index("method").loc["odm"]
    assert row["label_error"] == pytest.approx(
        label_error(dec["label"], crowd.gold, [1, 2, 3, 4, 5])
    )
    assert row["calibration_error"] == pytest.approx(calibration_error(p, gold_level))
    assert row["p_wrong_auroc"] == pytest.approx(p_wrong_auroc(p, gold_level))
