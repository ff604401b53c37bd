"""gold: the gold Series checked and put in the items' order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ordmix_core.data.crowd import prepare
from ordmix_core.data.gold import NO_GOLD_RATED, checked_gold, gold_vector
from ordmix_core.data.scale import as_scale
from ordmix_core.errors import InputError


def test_the_first_value_of_each_id_as_text():
    g = checked_gold(pd.Series([1, 2, 3], index=[7, 8, 7]))
    assert g.index.tolist() == ["7", "8"]
    assert g.tolist() == [1.0, 2.0]


def test_a_named_scale_reads_its_names_as_their_values():
    scale = as_scale(["G", "P", "R"], np.empty(0))
    g = checked_gold(pd.Series(["R", "G"], index=["a", "b"]), scale)
    assert g.to_dict() == {"a": scale.values[2], "b": scale.values[0]}


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        ([1, 2], "must be a pandas Series"),
        (pd.Series(["three"], index=["x"]), "the truth of instance 'x' is not a number"),
    ],
)
def test_what_is_not_gold_is_named(gold, message):
    with pytest.raises(InputError, match=message):
        checked_gold(gold)


def test_the_items_order_with_nan_where_unknown():
    ratings = pd.DataFrame(
        {"annotator": ["a", "b", "a"], "instance": ["i2", "i1", "i1"], "rating": [1, 2, 3]}
    )
    data = prepare(ratings)
    vec = gold_vector(pd.Series([3.0, 9.0], index=["i1", "other"]), data)
    expected = np.where(np.asarray(data.instances) == "i1", 3.0, np.nan)
    np.testing.assert_array_equal(vec, expected)
    assert gold_vector(None, data) is None
    with pytest.raises(InputError, match=NO_GOLD_RATED.split(";")[0]):
        gold_vector(pd.Series([1.0], index=["nowhere"]), data)
