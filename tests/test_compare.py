import pandas as pd
import pytest

from ordmix_core import InputError
from ordmix_core.compare import METHODS, TABLE1, compare_methods, parse_methods
from ordmix_core.simulate import simulate_crowd


@pytest.fixture(scope="module")
def crowd():
    return simulate_crowd(300, 24, 5, spammer_share=0.4, random_state=2)


def test_every_table1_method_scored(crowd):
    table, est = compare_methods(crowd.ratings, crowd.gold, n_restarts=2, random_state=0)
    assert table["method"].tolist() == TABLE1
    assert list(table.columns[:5]) == ["method", "mse", "correlation", "ndcg", "seconds"]
    assert table[["mse", "correlation", "ndcg"]].notna().all().all()
    assert list(est.columns) == TABLE1 and len(est) == 300
    by = table.set_index("method")
    # with 40% spammers the mixture beats the plain mean clearly
    assert by.loc["odm-query", "mse"] < by.loc["mean", "mse"]
    assert by.loc["odm-query", "correlation"] > by.loc["mean", "correlation"]


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
