"""Fit page: run with live progress in a worker thread, Stop semantics, result kept in session."""

from __future__ import annotations

import pytest
from test_app_main import (
    assert_clean,
    demo_and_fit,
    fit_current,
    load_simulated_demo,
    new_app,
    texts,
    ui,
)
from test_fit_job import stopping_job

from ordmix_core.dashboard.fit_job import FitJob, FitParams, fit_page_options
from ordmix_core.errors import InputError
from ordmix_core.estimators import option_frontends, options
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.results import reliability


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_run_fit_on_the_demo_shows_the_result():
    at = demo_and_fit(restarts=2)
    assert any(s.startswith("Fit finished in") for s in texts(at.success)), texts(at.success)
    m = metrics(at)
    assert m["Converged"] == "yes"
    assert m["Chosen restart"] in ("1", "2")  # counted from 1, as the running status does
    assert any("highest lower bound" in i for i in texts(at.info))
    res = at.session_state["ordmix"]["fit"]
    assert len(res.model.restarts_) == 2
    assert res.params.granularity == "query"  # the demo has queries: the paper's choice
    assert res.model.items_.shape[0] == 300


def test_result_is_said_in_plain_words():
    at = demo_and_fit(restarts=2)
    assert_clean(at)
    res = at.session_state["ordmix"]["fit"]
    page = " ".join(texts(at.caption) + texts(at.info) + texts(at.markdown))
    assert "FitParams" not in page and "random_state" not in page
    assert any(c.startswith("Settings: query granularity, 2 restart(s)") for c in texts(at.caption))
    summary = " ".join(texts(at.info))
    flags = reliability.annotator_flags(res.model)["flag"]
    assert f"{int((flags == 'unreliable').sum())} of 30 annotators are unreliable" in summary
    assert "of 300 items are undetermined" in summary
    assert f"Chosen: restart {res.model.best_restart_}" in summary
    assert "Converged:" in summary
    # the crowd's agreement with its interval: the krippendorff package's figure
    import krippendorff

    from ordmix_core.results import agreement

    counts = agreement.level_counts(res.model.data_)
    alpha = krippendorff.alpha(value_counts=counts, level_of_measurement="ordinal")
    said = f"Agreement between annotators (Krippendorff's alpha, ordinal): {alpha:.3f} (95% "
    assert said + "bootstrap interval " in summary


KINDS = ("number_input", "text_input", "toggle", "selectbox")


def test_hyperparameters_sit_in_the_advanced_expander():
    """The options table's groups: basic in the main area, advanced (the model's switches and
    its priors) in the expander; each widget's label and help are the table's."""
    at = load_simulated_demo(new_app())
    at.switch_page("pages/fit.py").run()
    (advanced,) = at.expander
    assert advanced.label.startswith("Advanced")
    inside = {w.key for kind in KINDS for w in advanced.get(kind)}
    want = {f"fit_{o.name}" for o in option_frontends.dashboard_options("advanced")}
    assert inside == want == {
        "fit_tol_estimate", "fit_ordinal", "fit_spam", "fit_updates", "fit_phi", "fit_eta",
        "fit_lam", "fit_mu",
    }  # fmt: skip
    outside = {w.key for kind in KINDS for w in at.get(kind)} - inside
    outside -= {w.key for w in at.get("selectbox") if not w.key.startswith("fit_")}
    assert outside == {
        "fit_granularity", "fit_n_restarts", "fit_max_iter", "fit_tol", "fit_random_state",
        "fit_model", "fit_use_gold",
    }  # fmt: skip
    for kind in KINDS:
        for w in at.get(kind):
            if w.key.startswith("fit_") and w.key != "fit_use_gold":  # use_gold is fit's
                o = options.option(w.key.removeprefix("fit_"))
                assert (w.label, w.help) == (o.label, o.help), w.key


def test_defaults_are_the_papers():
    at = new_app()
    at.switch_page("pages/fit.py").run()
    assert at.selectbox(key="fit_granularity").value == "query"
    values = {
        k: at.number_input(key=k).value
        for k in ("fit_n_restarts", "fit_max_iter", "fit_tol", "fit_lam")
    }
    assert values == {
        "fit_n_restarts": None,  # empty: as many restarts as the labels need
        "fit_max_iter": 1000,
        "fit_tol": 1e-6,
        "fit_lam": 0.1,
    }
    assert at.number_input(key="fit_random_state").value == 0
    assert at.toggle(key="fit_ordinal").value
    # the spam component as the model says (on, for both models)
    spam = at.selectbox(key="fit_spam")
    assert spam.options == ["as the model says", "on", "off"]
    # the default is an option of its own, shown by name (not an empty "Choose an option")
    assert spam.index == 0 and spam.value == "as the model says"
    assert at.selectbox(key="fit_updates").value == "exact"
    # empty: mu the mean of the scale, phi and eta as the model says
    assert [at.text_input(key=k).value for k in ("fit_mu", "fit_phi", "fit_eta")] == [""] * 3
    assert all(w.help for w in at.number_input)


def test_result_and_settings_survive_page_changes():
    at = demo_and_fit(restarts=3)
    before = at.session_state["ordmix"]["fit"]
    at.switch_page("pages/items.py").run()
    at.switch_page("pages/fit.py").run()
    assert_clean(at)
    assert at.session_state["ordmix"]["fit"] is before
    assert at.number_input(key="fit_n_restarts").value == 3
    assert metrics(at)["Chosen restart"] == str(before.model.best_restart_)


def test_variants_without_spam_and_real_valued():
    at = load_simulated_demo(new_app())
    at = fit_current(at, restarts=1, fit_spam=False, fit_ordinal=False, fit_updates="paper")
    res = at.session_state["ordmix"]["fit"]
    assert (res.params.spam, res.params.ordinal, res.params.updates) == (False, False, "paper")
    at.switch_page("pages/annotators.py").run()
    assert any("no spam component" in i for i in texts(at.info))


def test_bad_mu_is_an_error_not_a_traceback():
    at = load_simulated_demo(new_app())
    at.switch_page("pages/fit.py").run()
    at.text_input(key="fit_mu").set_value("three").run()
    assert_clean(at)
    assert any("not a number" in e for e in texts(at.error))
    # a number the options table refuses: its own message, before any fit
    at.text_input(key="fit_mu").set_value("1e200").run()
    label = options.option("mu").label
    assert any(e.startswith(f"{label} must be a number") for e in texts(at.error)), texts(at.error)
    assert not [b for b in at.button if b.key == "fit_run"]  # stopped before Run


def test_mu_outside_the_scale_is_refused_before_run_with_the_engines_message():
    at = load_simulated_demo(new_app())
    at.switch_page("pages/fit.py").run()
    scale = at.session_state["ordmix"]["dataset"].scale
    outside = float(scale.thresholds[-1]) + 1.0
    at.text_input(key="fit_mu").set_value(f"{outside:g}").run()
    assert_clean(at)
    with pytest.raises(InputError) as engine:  # what the fit itself would say
        options.validate_params(OrdinalMixture(mu=outside), scale)
    assert str(engine.value) in texts(at.error), texts(at.error)
    assert "mu must lie within the scale's outer thresholds" in str(engine.value)
    run = [b for b in at.button if b.key == "fit_run"]
    assert not run or run[0].disabled  # Run is not offered
    assert at.session_state["ordmix"].get("job") is None  # no fit started
    at.text_input(key="fit_mu").set_value("").run()  # back to the mean of the scale
    assert not texts(at.error)
    assert not at.button(key="fit_run").disabled


def test_widgets_become_the_estimators_settings():
    """fit_params: the widget values through the options table, a text box's number parsed."""
    at = load_simulated_demo(new_app())
    at = fit_current(at, restarts=1, fit_mu=" 2.5 ", fit_tol=0.5, fit_granularity="global")
    res = at.session_state["ordmix"]["fit"]
    want = {**FitParams().engine_kwargs(), "n_restarts": 1, "mu": 2.5, "tol": 0.5}
    assert res.params.engine_kwargs() == {**want, "granularity": "global"}
    assert set(res.params.engine_kwargs()) == {o.name for o in fit_page_options()}
    assert res.model.mu == 2.5 and res.model.tol == 0.5


def test_no_query_column_offers_instance_and_global_only():
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    at.file_uploader(key="data_upload").upload(
        "r.csv", b"annotator,instance,rating\na,x,1\nb,x,2\na,y,2\n", "text/csv"
    )
    at.run()
    at.button(key="data_use_upload").click().run()
    at.switch_page("pages/fit.py").run()
    assert at.selectbox(key="fit_granularity").options == ["instance", "global"]
    at.number_input(key="fit_n_restarts").set_value(1)
    at.button(key="fit_run").click().run()
    assert_clean(at)
    assert at.session_state["ordmix"]["fit"].params.granularity == "instance"


# --------------------------------------------------------------------------- Stop
# the job's own Stop semantics are tested in test_fitjob.py; here: the session and the pages


def _session_with_demo():
    ui_ = ui()
    s = ui_.Session({})
    s.dataset = ui_.load_demo(ui_.SIMULATED_DEMO)
    return s


def _stopping_job(s, stop_at_restart: int, n_restarts: int = 3, at_iteration: int = 3) -> FitJob:
    """The session's job, stopped at ``at_iteration`` of ``stop_at_restart`` (run inline)."""
    job = stopping_job(s.dataset, stop_at_restart, n_restarts, at_iteration, run=False)
    s._d["job"] = job
    job.run()
    return job


def test_stop_keeps_the_best_restart_so_far():
    s = _session_with_demo()
    job = _stopping_job(s, stop_at_restart=1)
    msg = s.collect()
    assert "kept the best restart found so far" in msg
    assert s.fit is not None and s.fit.stopped
    assert s.fit.model is job.model and s.fit.model.interrupted_
    # restarts run side by side in threads, so restart 2 may have begun; none finished
    assert not s.fit.model.restarts_["converged"].any()
    assert s.collect() is None  # collected once


def test_stop_at_the_first_iteration_keeps_the_warm_up_fit():
    """Documented: Stop keeps the best restart so far once any restart finished a sweep; the
    engine reports only after a sweep, so a Stop before the first report keeps the warm-up."""
    s = _session_with_demo()
    job = FitJob(dataset=s.dataset, params=FitParams(n_restarts=2))
    job.stop.set()
    s._d["job"] = job
    job.run()
    msg = s.collect()
    assert job.model is not None
    assert "kept the best restart found so far" in msg
    assert s.fit.stopped and s.fit.model.interrupted_
    assert (s.fit.model.restarts_["n_iter"] == 0).all()  # only the warm-up had run


def test_a_failed_fit_keeps_the_previous_result_and_says_so():
    s = _session_with_demo()
    _stopping_job(s, stop_at_restart=99, n_restarts=1)  # a full fit first
    s.collect()
    previous = s.fit
    assert previous is not None and not previous.stopped
    job = FitJob(dataset=s.dataset, params=FitParams(n_restarts=1, phi=-1.0))
    s._d["job"] = job
    job.run()
    msg = s.collect()
    assert msg.startswith("The fit failed: phi must be a positive number")
    assert msg.endswith("the previous result is kept.")
    assert s.fit is previous


def test_fit_page_says_which_result_a_stop_kept():
    at = load_simulated_demo(new_app())
    s = ui().Session({ui().KEY: at.session_state["ordmix"]})
    full = FitJob(dataset=s.dataset, params=FitParams(n_restarts=3))
    full.run()  # how long the warm-up takes: stop 3 sweeps after it, in restart 0's mixture
    warm = int(full.model.restarts_.loc[0, "warmup_iter"])
    job = _stopping_job(s, stop_at_restart=0, at_iteration=warm + 3)
    assert job.model.restarts_.loc[job.model.best_restart_, "n_iter"] > 0
    at.switch_page("pages/fit.py").run()
    assert_clean(at)
    assert any("kept the best restart found so far" in w for w in texts(at.warning))
    summary = " ".join(texts(at.info))
    assert "the fit was stopped: restart" in summary
    assert "dropped early" not in summary and "finished restart(s)" not in summary
    assert "provisional" in summary
    at.switch_page("pages/convergence.py").run()
    assert any("stopped" in i for i in texts(at.info))
    assert not any("dropped early" in i for i in texts(at.info))


def test_a_stop_is_said_once_with_the_time_and_the_restart_kept():
    """The fit's own warnings say it was stopped as well: the page says it once, in its
    message naming the seconds run and the restart kept."""
    at = load_simulated_demo(new_app())
    s = ui().Session({ui().KEY: at.session_state["ordmix"]})
    job = _stopping_job(s, stop_at_restart=1)
    assert any("stopped" in w for w in job.model.warnings_)
    at.switch_page("pages/fit.py").run()
    assert_clean(at)
    boxes = texts(at.warning) + texts(at.error) + texts(at.success)
    stops = [b for b in boxes if "stopped" in b.lower()]
    assert len(stops) == 1, stops
    assert stops[0].startswith("Stopped after") and "kept the best restart found so far" in stops[0]


def test_fit_runs_in_a_thread_so_the_page_can_poll():
    s = _session_with_demo()
    job = s.start_fit(FitParams(n_restarts=2))
    assert job.done.wait(60)
    assert "Fit finished" in s.collect()
    assert s.fit.model is job.model


def test_restarts_are_numbered_as_the_files_number_them(tmp_path):
    """One numbering everywhere: the result, its caption, the summary and the sidebar name the
    chosen restart as summary.json's winning_restart and restarts.csv's row do (from 0)."""
    import json

    import pandas as pd

    from ordmix_core.results.outputs import write_fit_outputs

    at = demo_and_fit(restarts=3)
    res = at.session_state["ordmix"]["fit"]
    write_fit_outputs(res.model, tmp_path, settings={})
    best = json.loads((tmp_path / "summary.json").read_text())["winning_restart"]
    restarts = pd.read_csv(tmp_path / "restarts.csv")
    assert restarts["restart"].tolist() == [0, 1, 2] and best == res.model.best_restart_
    assert metrics(at)["Chosen restart"] == str(best)
    assert any(f"chosen restart {best} (numbered from 0)," in c for c in texts(at.caption))
    summary = " ".join(texts(at.info))
    assert f"Chosen: restart {best} " in summary
    assert f"restart {best + 1} " not in summary.split("Chosen:", 1)[1].split(";")[0]
    sidebar = " ".join(texts(at.sidebar.caption))
    assert f"Fit: restart {best} chosen" in sidebar


def test_the_share_of_ratings_taken_as_spam_is_in_the_summary():
    at = demo_and_fit(restarts=2)
    m = at.session_state["ordmix"]["fit"].model
    assert m.spam_
    share = f"{1.0 - float(m.omega_.mean()):.1%}"
    assert metrics(at)["Ratings taken as spam"] == share
    assert f"Ratings taken as spam: {share}" in " ".join(texts(at.info))


def test_spam_select_set_off_and_back_to_the_model():
    at = load_simulated_demo(new_app())
    at.switch_page("pages/fit.py").run()
    at.selectbox(key="fit_spam").set_value(False).run()
    assert_clean(at)
    at.selectbox(key="fit_spam").set_value("as the model says").run()
    assert_clean(at)
    assert at.selectbox(key="fit_spam").index == 0
