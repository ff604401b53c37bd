"""``ordmix fit`` on a 0..100 slider: the closing line and ``summary.json`` say the labels are
the continuous model's and why; the items' columns are on the slider's own values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from _cli_helpers import run_cli

from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd


def test_a_slider_fit_says_which_labels_and_why(tmp_path):
    crowd = simulate_crowd(
        n_items=120, n_annotators=20, ratings_per_item=6, scale=Scale(np.arange(0.0, 101.0)),
        unit=10.0, random_state=0,
    )  # fmt: skip
    crowd.ratings.to_csv(tmp_path / "r.csv", index=False)
    rc, err, _ = run_cli(["fit", tmp_path / "r.csv", "--out", tmp_path / "o", "--seed", "0"])
    assert rc == 0
    # no warning: 101 level columns written at once, and neighbouring values are no tie
    assert [e for e in err if e.startswith("ordmix: warning")] == []
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    labels = summary["model_choice"]["labels"]
    k = len(summary["hyperparameters"]["scale"])
    assert k > 11
    assert labels["model"].startswith("continuous posterior")
    assert f"a scale of {k} levels (more than 11) is a slider" in labels["why"]
    assert f"ordmix: labels from the {labels['model']}: {labels['why']}" in err
    assert summary["model_choice"]["bias"] is False
    assert summary["model_choice"]["spam_dist"] == "uniform"  # fixed: a learned one imitates
    items = pd.read_csv(tmp_path / "o" / "items.csv")
    assert items["estimate"].between(0, 100).all()
    assert set(items["label"]) <= set(crowd.ratings["rating"].astype(int))
    assert (items["lower_90"] <= items["label"]).all() and (
        items["label"] <= items["upper_90"]
    ).all()
