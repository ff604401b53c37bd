"""Simulator page: sliders, generate, fit, truth vs estimate and true vs estimated spammers."""

from __future__ import annotations

from test_app_main import assert_clean, charts, new_app, texts


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
