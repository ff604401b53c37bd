"""Simulator page: sliders, generate, fit, truth vs estimate and true vs estimated spammers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr
from test_app_main import arr, assert_clean, charts, new_app, texts

from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.results import reliability


def _generate_and_fit(spam: float = 0.3):
    at = new_app()
    at.switch_page("pages/simulator.py").run()
    at.slider(key="sim_items").set_value(150)
    at.slider(key="sim_annotators").set_value(20)
    at.slider(key="sim_per_item").set_value(5)
    at.slider(key="sim_spam").set_value(spam)
    at.slider(key="sim_spread").set_value(0.5)
    at.number_input(key="sim_restarts").set_value(2)
    at.button(key="sim_generate").click().run()
    assert_clean(at)
    at.button(key="sim_run_fit").click().run()
    assert_clean(at)
    return at


def test_generate_fit_and_compare_with_the_truth():
    at = _generate_and_fit()
    assert any(
        "750 ratings of 150 items by 20 annotators (6 spammers)" in t for t in texts(at.markdown)
    )
    m = {x.label: x.value for x in at.metric}
    assert float(m["Correlation with true z"]) > 0.8
    found, of = m["Spammers found"].split(" of ")
    assert of == "6" and int(found) >= 5
    figs = charts(at)
    assert {"sim_truth_plot", "sim_spammer_plot"} <= set(figs)
    assert len(figs["sim_truth_plot"]["data"][0]["text"]) == 150
    confusion = at.dataframe[0].value
    assert int(confusion.to_numpy().sum()) == 20


def test_no_spammers_means_none_to_find():
    at = _generate_and_fit(spam=0.0)
    m = {x.label: x.value for x in at.metric}
    assert m["Spammers found"] == "0 of 0"


def test_use_the_crowd_as_the_data_set():
    at = _generate_and_fit()
    at.button(key="sim_use").click().run()
    ds = at.session_state["ordmix"]["dataset"]
    assert ds.name.startswith("Simulated crowd (Simulator page)")
    assert len(ds.ratings) == 750 and ds.gold is not None
    at.switch_page("pages/data.py").run()
    assert {x.label: x.value for x in at.metric}["Ratings"] == "750"


def test_the_ordinal_probit_figure_shows_the_rating_probabilities():
    at = new_app()
    at.switch_page("pages/simulator.py").run()
    at.slider(key="sim_probit_z").set_value(2.0)
    at.slider(key="sim_probit_sd").set_value(0.5).run()
    assert_clean(at)
    fig = charts(at)["sim_probit_plot"]
    names = [t["name"] for t in fig["data"]]
    assert len(names) == 5 and names[0].startswith("rating 1: ")
    # P(rating 2 | z = 2, sd 0.5) = P(1.5 < x < 2.5)
    p = [float(n.split(": ")[1].rstrip("%")) / 100 for n in names]
    assert p[1] == pytest.approx(ndtr(1.0) - ndtr(-1.0), abs=1e-3)
    assert sum(p) == pytest.approx(1.0, abs=0.002)
    lines = sorted(s["x0"] for s in fig["layout"]["shapes"])
    assert lines == pytest.approx([1.5, 2.0, 2.5, 3.5, 4.5])  # thresholds and the truth


def test_biased_raters_and_favourite_answer_spammers():
    at = new_app()
    at.switch_page("pages/simulator.py").run()
    at.slider(key="sim_items").set_value(100)
    at.slider(key="sim_annotators").set_value(20)
    at.slider(key="sim_spam").set_value(0.3)
    at.slider(key="sim_bias").set_value(0.5)
    at.slider(key="sim_favourite").set_value(1.0)
    at.slider(key="sim_favourite_weight").set_value(1.0)
    at.button(key="sim_generate").click().run()
    assert_clean(at)
    crowd = at.session_state["ordmix"]["sim_crowd"]
    want = simulate_crowd(
        n_items=100, n_annotators=20, ratings_per_item=5, spammer_share=0.3,
        difficulty_spread=0.5, random_state=0, bias_sd=0.5, favourite_share=1.0,
        favourite_weight=1.0,
    )  # fmt: skip
    pd.testing.assert_frame_equal(crowd.ratings, want.ratings)
    assert (crowd.bias[~crowd.spammers] != 0).all()
    spam = crowd.ratings[crowd.ratings["annotator"].isin(crowd.spammers.index[crowd.spammers])]
    assert (spam.groupby("annotator")["rating"].nunique() == 1).all()  # always their favourite
    assert any("6 spammers, 6 of them with a favourite answer" in t for t in texts(at.markdown))


def test_model_against_the_plain_mean_flags_and_intervals():
    at = _generate_and_fit()
    crowd = at.session_state["ordmix"]["sim_crowd"]
    model = at.session_state["ordmix"]["sim_fit"]
    m = {x.label: x for x in at.metric}
    plain = crowd.ratings.groupby("instance")["rating"].mean().reindex(crowd.truth.index)
    want = np.sqrt(np.mean((plain - crowd.truth) ** 2))
    assert m["RMSE of the plain mean"].value == f"{want:.3f}"
    assert float(m["RMSE vs true z"].value) < want  # the model beats the plain mean here
    # spammers found with the Annotators page's rule, not spam share >= 0.5
    assert not [s for s in at.slider if s.key == "sim_threshold"]
    flags = reliability.annotator_flags(model)
    found = (flags["flag"] == "unreliable") & crowd.spammers.reindex(flags.index)
    assert m["Spammers found"].value == f"{int(found.sum())} of 6"
    figs = charts(at)
    spam_fig = figs["sim_spammer_plot"]
    ys = np.concatenate([arr(t["y"]) for t in spam_fig["data"]])
    np.testing.assert_allclose(np.sort(ys), np.sort(flags["p_unreliable"].to_numpy()))
    # the 95% error bars stay inside the scale (0.5 to 5.5)
    est, mean = figs["sim_truth_plot"]["data"][:2]
    y, err = arr(est["y"]), est["error_y"]
    assert (y + arr(err["array"]) <= 5.5 + 1e-9).all()
    assert (y - arr(err["arrayminus"]) >= 0.5 - 1e-9).all()
    assert mean["name"] == "plain mean of its ratings"


def test_the_crowd_goes_to_the_other_pages_with_its_fit():
    at = _generate_and_fit()
    model = at.session_state["ordmix"]["sim_fit"]
    at.button(key="sim_use").click().run()
    assert_clean(at)
    # the sidebar, drawn before the button, names the new data set and fit at once
    sidebar = " ".join(c.value for c in at.sidebar.caption)
    assert "Data: Simulated crowd (Simulator page)" in sidebar and "Fit: restart" in sidebar
    assert [x.value for x in at.success] == [
        "Loaded as the data set with this fit: see the Items and Annotators pages."
    ]
    res = at.session_state["ordmix"]["fit"]
    assert res is not None and res.dataset == at.session_state["ordmix"]["dataset"].name
    pd.testing.assert_frame_equal(res.model.items_, model.items_)
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    assert len(at.dataframe[0].value) == 150  # no "No fit yet": the simulator's fit
    assert "gold" in at.dataframe[0].value
    at.switch_page("pages/annotators.py").run()
    assert_clean(at)
    assert at.selectbox(key="ann_why").options  # the why of a flagged spammer
