"""``explanations``: an item's label in words."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ordmix_core.results import explanations, label_rules


def _item(clear: float, p: list[float], label: float) -> pd.Series:
    row = {"label": label, "flag": "uncertain", "p_wrong": 1 - p[int(label) - 1]}
    row |= {"estimate": 1.65, "clear_majority": clear}
    row |= {f"p_level_{k + 1}": v for k, v in enumerate(p)}
    return pd.Series(row, dtype=object)


def test_label_sentence_says_when_trusted_raters_gave_the_label_against_the_fit():
    """A clear majority decides the label though the fit's probabilities put the item
    elsewhere: the sentence says so, with the fit's most probable level, so that a label with
    P(label wrong) 0.97 reads as what it is."""
    row = _item(2.0, [0.955, 0.027, 0.018], 2.0)
    text = explanations.label_sentence(row, 5)
    assert text.startswith("label **2** (uncertain, P(label wrong) 0.973), estimate 1.65 from 5")
    assert f"at least {label_rules.CLEAR_MAJORITY:.0%} of its ratings" in text
    assert text.endswith("the fit's most probable level is 1 (0.955).")
    same = explanations.label_sentence(_item(1.0, [0.955, 0.027, 0.018], 1.0), 5)
    assert same.endswith("the fit's most probable level too.")
    none = explanations.label_sentence(_item(np.nan, [0.955, 0.027, 0.018], 1.0), 1)
    assert none.endswith("from 1 rating.") and "majority" not in none


def test_annotators_for_people_read_the_same_on_every_page():
    frame = pd.DataFrame(
        {
            "reliability": [1e-10, 0.5, 0.9999],
            "expertise": [1.85, 2.0, 3.0],
            "bias": [-0.001, 0.126, 0.3],
            "p_unreliable": [1.0, 0.4, 0.0],
        },
        index=pd.Index(["a", "b", "c"], name="annotator"),
    )
    out = explanations.annotators_for_people(frame)
    assert out["reliability"].tolist() == ["<0.001", "0.500", ">0.999"]
    # the number annotators.csv has, also where the ratings are all taken as spam
    assert out["expertise"].tolist() == [1.85, 2.0, 3.0]
    assert out["bias"].tolist() == [0.0, 0.13, 0.3] and not np.signbit(out["bias"].iloc[0])
    assert out["p_unreliable"].tolist() == [1.0, 0.4, 0.0]  # the rest as they were
    assert frame.loc["a", "expertise"] == 1.85  # the input untouched
