"""``explanations``: an item's label in words."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ordmix_core.results import explanations


def test_label_sentence_gives_the_label_its_flag_its_chance_of_being_wrong_and_the_estimate():
    row = pd.Series(
        {"label": 2, "flag": "uncertain", "p_wrong": 0.4731, "estimate": 1.65}, dtype=object
    )
    assert explanations.label_sentence(row, 5) == (
        "label **2** (uncertain, P(label wrong) 0.473), estimate 1.65 from 5 ratings."
    )
    assert explanations.label_sentence(row, 1).endswith("from 1 rating.")


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
