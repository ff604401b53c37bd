"""Fit page: run with live progress in a worker thread, Stop semantics, result kept in session."""

from __future__ import annotations

from test_app_main import (
    app_module,
    assert_clean,
    demo_and_fit,
    fit_current,
    load_simulated_demo,
    new_app,
    texts,
)


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_run_fit_on_the_demo_shows_the_result():
    at = demo_and_fit(restarts=2)
    assert any(s.startswith("Fit finished in") for s in texts(at.success)), texts(at.success)
    m = metrics(at)
    assert m["Converged"] == "yes"
    assert m["Chosen restart"] in ("0", "1")
    assert any("highest lower bound" in i for i in texts(at.info))
    res = at.session_state["ordmix"]["fit"]
    assert len(res.model.restarts_) == 2
    assert res.params.granularity == "query"  # the demo has queries: the paper's choice
    assert res.model.items_.shape[0] == 300


def test_defaults_are_the_papers():
    at = new_app()
    at.switch_page("pages/fit.py").run()
    assert at.selectbox(key="fit_granularity").value == "query"
    values = {
        k: at.number_input(key=k).value
        for k in ("fit_restarts", "fit_max_iter", "fit_tol", "fit_phi", "fit_eta", "fit_lam")
    }
    assert values == {
        "fit_restarts": 10,
        "fit_max_iter": 1000,
        "fit_tol": 0.1,
        "fit_phi": 10.0,
        "fit_eta": 5.0,
        "fit_lam": 0.1,
    }
    assert at.toggle(key="fit_ordinal").value and at.toggle(key="fit_spam").value
    assert at.toggle(key="fit_exact").value
    assert at.text_input(key="fit_mu").value == ""
    assert all(w.help for w in at.number_input)


def test_result_and_settings_survive_page_changes():
    at = demo_and_fit(restarts=3)
    before = at.session_state["ordmix"]["fit"]
    at.switch_page("pages/items.py").run()
    at.switch_page("pages/fit.py").run()
    assert_clean(at)
    assert at.session_state["ordmix"]["fit"] is before
    assert at.number_input(key="fit_restarts").value == 3
    assert metrics(at)["Chosen restart"] == str(before.model.best_restart_)


def test_variants_without_spam_and_real_valued():
    at = load_simulated_demo(new_app())
    at = fit_current(at, restarts=1, fit_spam=False, fit_ordinal=False, fit_exact=False)
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
    at.number_input(key="fit_restarts").set_value(1)
    at.button(key="fit_run").click().run()
    assert_clean(at)
    assert at.session_state["ordmix"]["fit"].params.granularity == "instance"


# --------------------------------------------------------------------------- Stop


def _session_with_demo():
    app = app_module()
    s = app.Session({})
    s.dataset = app.load_demo(app.SIMULATED_DEMO)
    return app, s


def _stopping_job(app, s, stop_at_restart: int, n_restarts: int = 3):
    """A job whose Stop is pressed at iteration 3 of restart ``stop_at_restart`` (run inline)."""
    job = app.FitJob(dataset=s.dataset, params=app.FitParams(n_restarts=n_restarts))
    plain = job.callback

    def callback(restart, iteration, bound):
        if restart == stop_at_restart and iteration == 3:
            job.stop.set()
        return plain(restart, iteration, bound)

    job.callback = callback
    s._d["job"] = job
    job.run()
    return job


def test_stop_keeps_the_best_restart_so_far():
    app, s = _session_with_demo()
    job = _stopping_job(app, s, stop_at_restart=1)
    msg = s.collect()
    assert "kept the best restart found so far" in msg
    assert s.fit is not None and s.fit.stopped
    assert s.fit.model.interrupted_
    # restarts run side by side in threads, so restart 2 may have begun; none finished
    assert not s.fit.model.restarts_["converged"].any()
    assert job.done.is_set() and not job.running


def test_stop_at_the_first_iteration_keeps_the_warm_up_fit():
    app, s = _session_with_demo()
    job = app.FitJob(dataset=s.dataset, params=app.FitParams(n_restarts=2))
    job.stop.set()
    s._d["job"] = job
    job.run()
    msg = s.collect()
    if job.model is None:  # an engine that keeps nothing from a warm-up
        assert msg.startswith("Stopped before any restart finished an iteration")
        assert s.fit is None
    else:
        assert "kept the best restart found so far" in msg
        assert s.fit.stopped and s.fit.model.interrupted_


def test_a_failed_fit_keeps_the_previous_result_and_says_so():
    app, s = _session_with_demo()
    _stopping_job(app, s, stop_at_restart=99, n_restarts=1)  # a full fit first
    s.collect()
    previous = s.fit
    assert previous is not None and not previous.stopped
    job = app.FitJob(dataset=s.dataset, params=app.FitParams(n_restarts=1, phi=-1.0))
    s._d["job"] = job
    job.run()
    msg = s.collect()
    assert msg.startswith("The fit failed: phi must be a positive number")
    assert msg.endswith("the previous result is kept.")
    assert s.fit is previous


def test_fit_page_says_which_result_a_stop_kept():
    at = load_simulated_demo(new_app())
    app = app_module()
    state = at.session_state["ordmix"]
    s = app.Session({app._KEY: state})
    _stopping_job(app, s, stop_at_restart=1)
    at.switch_page("pages/fit.py").run()
    assert_clean(at)
    assert any("kept the best restart found so far" in w for w in texts(at.warning))
    at.switch_page("pages/convergence.py").run()
    assert any("stopped" in i for i in texts(at.info))


def test_progress_text_names_restart_iteration_and_bound():
    app, s = _session_with_demo()
    job = app.FitJob(dataset=s.dataset, params=app.FitParams(n_restarts=4))
    assert job.callback(0, 5, -1234.5) is True
    assert "restart 1/4 - iteration 5 - lower bound -1,234.50" in job.status()
    job.callback(1, 1, -1000.0)
    assert "restart 2/4 (2 of 4 started) - iteration 1" in job.status()
    before = job.fraction()
    assert 0 < before < 0.25
    job.callback(0, 80, -990.0)  # restarts run side by side and in rounds
    assert "restart 1/4 (2 of 4 started) - iteration 80" in job.status()
    assert before < job.fraction() < 0.5
    job.callback(0, 3, -995.0)  # a later stage restarts its count: the bar never goes back
    assert job.fraction() >= before
    job.stop.set()
    assert job.callback(1, 2, -999.0) is False
    assert "stopping" in job.status()


def test_fit_runs_in_a_thread_so_the_page_can_poll():
    app, s = _session_with_demo()
    job = s.start_fit(app.FitParams(n_restarts=2))
    assert job.done.wait(60)
    assert "Fit finished" in s.collect()
    assert s.fit.model is job.model
