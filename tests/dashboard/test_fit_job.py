"""fitjob: the dashboard's background fit, its Stop semantics and its plain-words summary.

No streamlit: the job runs inline (``job.run()``) or in its thread.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import ordmix_core.io as oio
from ordmix_core.dashboard.fit_job import FitJob, FitParams, fit_page_options
from ordmix_core.dashboard.fit_summary import (
    ensemble_line,
    fit_summary,
    model_line,
    moving_line,
    selection_explanation,
)
from ordmix_core.dashboard.report import make_dataset
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators import option_frontends
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.numerics import jit
from ordmix_core.results import decisions, reliability

DEMO = Path(__file__).resolve().parents[2] / "demo_data"
SPAMMERS = set(
    pd.read_csv(DEMO / "simulated-spammers.csv").query("spammer == 1").annotator.astype(str)
)


@pytest.fixture(scope="module")
def demo():
    ratings = oio.read_ratings(DEMO / "simulated-ratings.csv")
    return make_dataset("simulated", ratings, oio.read_gold(DEMO / "simulated-gold.csv"))


def stopping_job(
    ds, stop_at_restart: int, n_restarts: int = 3, at_iteration: int = 3, run: bool = True
) -> FitJob:
    """A job whose Stop is pressed at the ``at_iteration``-th sweep of ``stop_at_restart``
    (counted from its first report: a restart that branches from the shared warm-up reports
    iterations after the warm-up's); run inline unless ``run`` is False (a caller that
    registers the job first)."""
    job = FitJob(dataset=ds, params=FitParams(n_restarts=n_restarts))
    plain = job.callback
    seen = {"n": 0}

    def callback(restart, iteration, bound):
        if restart == stop_at_restart:
            seen["n"] += 1
            if seen["n"] == at_iteration:
                job.stop.set()
        return plain(restart, iteration, bound)

    job.callback = callback
    if run:
        job.run()
    return job


def test_params_are_the_estimators_with_its_defaults():
    """Named as the estimator's parameters, with its defaults except two the page chooses."""
    signature = inspect.signature(OrdinalMixture.__init__).parameters
    kwargs = FitParams().engine_kwargs()
    own = {"granularity": "query", "random_state": 0}  # the paper's TREC choice; seed 0
    for name, value in kwargs.items():
        assert value == own.get(name, signature[name].default), name
    text = FitParams(mu=2.5, spam=False).describe()
    assert "FitParams" not in text and "=" not in text
    assert "without the spam component" in text and "mu 2.5" in text
    # the settings are the options table's dashboard entries, but the data set's scale
    names = {o.name for o in option_frontends.dashboard_options()} - {"scale"}
    assert set(kwargs) == names == {o.name for o in fit_page_options()}
    with pytest.raises(TypeError, match="not a Fit page setting: nospam_warmup"):
        FitParams(nospam_warmup=False)


def test_a_finished_fit_equals_the_library_fit(demo):
    job = FitJob(dataset=demo, params=FitParams(n_restarts=2))
    job.run()
    result, msg = job.outcome(has_previous=False)
    assert msg.startswith("Fit finished in") and not result.stopped
    ref = OrdinalMixture("query", n_restarts=2, random_state=0).fit(demo.ratings)
    np.testing.assert_allclose(result.model.estimates_, ref.estimates_, rtol=1e-10)
    assert result.model.lower_bound_ == pytest.approx(ref.lower_bound_, rel=1e-12)


def test_stop_keeps_the_best_restart_so_far(demo):
    job = stopping_job(demo, stop_at_restart=1)
    result, msg = job.outcome(has_previous=False)
    assert "kept the best restart found so far" in msg
    assert result is not None and result.stopped and result.model.interrupted_
    # restarts run side by side in threads, so restart 2 may have begun; none finished
    assert not result.model.restarts_["converged"].any()
    assert job.done.is_set() and not job.running


def test_stop_before_the_first_report_keeps_the_warm_up_fit(demo):
    """Documented: Stop keeps the best restart so far once any restart finished a sweep, and
    the engine reports only after a sweep, so even a Stop pressed before the run keeps one."""
    job = FitJob(dataset=demo, params=FitParams(n_restarts=2))
    job.stop.set()
    job.run()
    result, msg = job.outcome(has_previous=False)
    assert job.error is None and job.model is not None
    assert "kept the best restart found so far" in msg
    assert result.stopped and result.model.interrupted_
    r = result.model.restarts_
    assert (r["n_iter"] == 0).all() and (r["warmup_iter"] == 1).all()
    text = selection_explanation(result.model)
    assert "stopped before any restart reached the mixture stage" in text
    assert "-inf" not in text
    assert "cannot judge spammers yet" in fit_summary(result.model)[0]
    assert text.endswith(
        "Of the 2 restarts: 2 had not reached the mixture stage (still in the "
        "warm-up, or not started)"
    )


def test_a_failed_fit_keeps_nothing_and_says_so(demo):
    job = FitJob(dataset=demo, params=FitParams(n_restarts=1, phi=-1.0))
    job.run()
    result, msg = job.outcome(has_previous=True)
    assert result is None
    assert msg.startswith("The fit failed: phi must be a positive number")
    assert msg.endswith("the previous result is kept.")
    assert job.outcome(has_previous=False)[1].endswith("there is no previous result.")


def test_progress_text_names_stage_restart_iteration_and_bound(demo):
    job = FitJob(dataset=demo, params=FitParams(n_restarts=4))
    assert job.callback(0, 5, -1234.5) is True
    assert "shared warm-up (no spam) - restart 0 of 0-3, iteration 5 - lower bound -1,234.50" in (
        job.status()
    )
    job.callback(1, 6, -1000.0)  # the others branch from the warm-up's end
    assert "halving round 1 of 1: 4 of 4 restarts in the race - restart 1 of 0-3, iteration 6" in (
        job.status()
    )
    before = job.fraction()
    assert 0 < before < 0.25
    for i in range(19):
        job.callback(i % 4, 7 + i // 4, -990.0)  # restarts run side by side and in rounds
    assert "the best 2 of 4 restarts run to convergence" in job.status()
    assert before < job.fraction() < 0.6
    job.callback(0, 3, -995.0)  # a later stage restarts its count: the bar never goes back
    assert job.fraction() >= before
    job.stop.set()
    assert job.callback(1, 2, -999.0) is False
    assert "stopping" in job.status()
    with pytest.raises(RuntimeError, match="still running"):
        job.outcome(has_previous=False)


def test_the_page_says_numba_is_compiling_instead_of_an_empty_bar(demo):
    """While numba compiles before the first sweep: the status says "compiling (once, about
    N s)" with the seconds so far, and the bar moves over half its length with them; once the
    sweeps report, the usual status, and the bar does not go back."""
    job = FitJob(dataset=demo, params=FitParams(n_restarts=4))
    job.compile_report(0, 10, True)
    assert job.status().startswith(f"{jit.compile_note(10)}: ")
    job.compile_started -= 0.5 * job.compile_expected  # half the expected seconds went by
    assert 0.2 < job.fraction() < 0.3
    job.compile_report(10, 10, False)
    job.callback(0, 1, -1000.0)
    assert job.status().startswith("shared warm-up (no spam) - restart 0 of 0-3, iteration 1")
    assert job.fraction() >= 0.2


def test_progress_is_not_fooled_by_the_warm_up_a_branch_inherits(demo):
    """The shared schedule: restart 0 warms up alone, then the others branch from its end and
    report iterations counted on from the warm-up's. Their first reports must not make them
    look half done (the bar jumped from 4% to 57% within a second): the bar counts sweeps
    against the halving schedule's."""
    n = 10
    job = FitJob(dataset=demo, params=FitParams(n_restarts=n))
    assert job.schedule() == ([(10, 5), (5, 10), (3, 20)], 2)
    for i in range(1, 41):
        job.callback(0, i, -1000.0)
    warm = job.fraction()
    for r in range(1, n):
        job.callback(r, 41, -990.0)
    assert job.fraction() - warm < 0.05, job.fraction()
    assert "halving round 1 of 3: 10 of 10 restarts in the race" in job.status()
    for r in range(n * 5 - 9):
        job.callback(r % n, 42, -990.0)
    assert "halving round 2 of 3: 5 of 10 restarts in the race" in job.status()


@pytest.mark.parametrize(
    "name", ["simulated-ratings.csv", pytest.param("trec-rf10-ratings.csv", marks=pytest.mark.slow)]
)
def test_progress_of_a_real_fit_moves_with_the_work(name):
    """A 10-restart fit: no ten reports move the bar by more than a tenth, and the bar is
    never far ahead of the share of the fit's sweeps done."""
    ds = make_dataset("d", oio.read_ratings(DEMO / name), None)
    job = FitJob(dataset=ds, params=FitParams(n_restarts=10))
    plain, seen = job.callback, []

    def callback(restart, iteration, bound):
        out = plain(restart, iteration, bound)
        seen.append(job.fraction())
        return out

    job.callback = callback
    job.run()
    assert job.error is None and len(seen) > 100
    f = np.array(seen)
    assert (f[10:] - f[:-10]).max() < 0.1
    assert (f - np.arange(1, f.size + 1) / f.size).max() < 0.3


def test_the_job_runs_in_a_thread(demo):
    job = FitJob(dataset=demo, params=FitParams(n_restarts=2)).start()
    assert job.done.wait(60)
    assert job.outcome(has_previous=False)[1].startswith("Fit finished")


# --------------------------------------------------------------------------- in words


def _fake(restarts: pd.DataFrame, best: int, n_restarts: int, max_iter: int = 20):
    return SimpleNamespace(
        interrupted_=True,
        restarts_=restarts.set_index("restart"),
        best_restart_=best,
        planned_restarts=lambda: n_restarts,
        max_iter=max_iter,
        selection_reason_="restart 0 ... were dropped early because their bound was behind",
    )


def test_a_stop_is_explained_from_the_restarts_table():
    table = pd.DataFrame(
        {
            "restart": [0, 1, 2, 3, 4],
            "lower_bound": [-100.0, -120.0, -130.0, -95.5, -101.0],
            "n_iter": [12, 5, 5, 7, 20],
            "converged": [True, False, False, False, False],
            "dropped": [False, True, True, False, False],
        }
    )
    text = selection_explanation(_fake(table, best=3, n_restarts=6))
    assert "dropped early" not in text and "behind" not in text
    assert text.startswith("the fit was stopped: restart 3 is kept, the highest lower bound at")
    assert "(-95.5) among 3 restarts still in the race" in text  # 0, 3, 4: not pruned
    assert "it ran 7 iterations and had not converged" in text
    # 0 converged and 4 hit max_iter: finished; 3 running; 1, 2 pruned; 5 never in the mixture
    assert text.endswith(
        "Of the 6 restarts: 2 finished, 1 was still running, 2 had been pruned earlier by "
        "successive halving, 1 had not reached the mixture stage (still in the warm-up, or not "
        "started)"
    )


def test_a_finished_fit_keeps_the_engines_reason():
    fake = _fake(pd.DataFrame({"restart": [0]}), best=0, n_restarts=1)
    fake.interrupted_ = False
    assert selection_explanation(fake) == fake.selection_reason_


def test_stopped_fit_on_the_demo_is_explained_without_the_engines_wording(demo):
    # 3 sweeps past restart 0's warm-up (measured on the same fit run to the end): in its
    # mixture
    full = FitJob(dataset=demo, params=FitParams(n_restarts=4))
    full.run()
    warm = int(full.model.restarts_.loc[0, "warmup_iter"])
    job = stopping_job(demo, stop_at_restart=0, n_restarts=4, at_iteration=warm + 3)
    m = job.model
    text = selection_explanation(m)
    assert "dropped early" not in text and "finished restart(s)" not in text
    assert f"restart {m.best_restart_} is kept" in text
    assert "Of the 4 restarts" in text


def test_summary_counts_the_flags_and_undetermined_items(demo):
    job = FitJob(dataset=demo, params=FitParams(n_restarts=2))
    job.run()
    m = job.model
    lines = fit_summary(m)
    text = " ".join(lines)
    assert "FitParams" not in text
    # the simulated demo's 9 spammers are the annotators the evidence flags unreliable
    flags = reliability.annotator_flags(m)["flag"]
    assert set(flags.index[flags == "unreliable"]) == SPAMMERS
    assert lines[0].startswith(f"{len(SPAMMERS)} of 30 annotators are unreliable")
    n_ratings = pd.read_csv(DEMO / "simulated-ratings.csv", dtype=str)
    share = n_ratings["annotator"].isin(SPAMMERS).mean()
    assert f"they gave {share:.1%} of the ratings" in lines[0]
    assert f"{(flags == 'ok').sum()} are ok" in lines[0]
    assert f"and {(flags == 'undetermined').sum()} undetermined" in lines[0]
    items = decisions.item_decisions(m)
    und = items[items["flag"] == "undetermined"]
    assert lines[1].startswith(f"{len(und):,} of 300 items {'is' if len(und) == 1 else 'are'} ")
    # why: a tie between the two most probable levels, the only reason an item is undetermined
    p = np.sort(und[[c for c in und.columns if c.startswith("p_level_")]].to_numpy(), axis=1)
    assert (p[:, -1] - p[:, -2] < 0.01).all()
    assert "two most probable levels are within 1% of each other" in lines[1]
    assert any(
        line.startswith("Chosen: restart") and "highest lower bound" in line for line in lines
    )
    assert any(line.startswith("Converged:") for line in lines)


@pytest.mark.parametrize("model", ["extended", "paper"])
def test_summary_says_which_model_was_fitted_and_what_it_learned(demo, model):
    m = OrdinalMixture(model=model, n_restarts=1, random_state=0).fit(demo.ratings)
    line = model_line(m)
    assert line + "." in fit_summary(m)
    if model == "paper":
        assert line.startswith("Model: the paper's") and "learned" not in line
        assert "difficulty prior" not in line
        return
    assert "bias per annotator" in line and "spam answer distribution learned" in line
    assert "a difficulty prior Gamma(2, 1) in place of the paper's Gamma(10, 5)" in line
    # the learned spread of the biases is 1/sqrt(lambda_b), the spam distribution pi
    assert f"±{m.hyperparams_['lambda_b'] ** -0.5:.2f}" in line
    pi = m.hyperparams_["pi"]
    assert abs(sum(pi) - 1) < 1e-9
    for v, p in zip(m.scale_.values, pi, strict=True):
        assert f"{v:g}: {p:.0%}" in line


def test_summary_says_whom_the_labels_speak_for(demo):
    """Without gold the labels' probabilities are a careful annotator's answer; with gold, the
    expert's; the line says which, as ``model_["labels"]``."""
    m = OrdinalMixture(n_restarts=1, random_state=0)
    line = model_line(m.fit(demo.ratings))
    assert line.endswith(". Labels: from the " + m.model_["labels"]["model"])
    assert "careful annotator" in line
    gold = demo.gold.iloc[::5]
    line = model_line(m.fit(demo.ratings, gold=gold))
    assert f"{len(gold)} gold items anchored the fit" in line
    assert "the expert's answer learned from gold" in line


def test_in_words_joins_like_a_sentence():
    from ordmix_core.dashboard.fit_summary import _in_words

    assert [_in_words(p) for p in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == [
        "", "a", "a and b", "a, b and c",
    ]  # fmt: skip


def test_no_spam_note_says_the_user_switched_spam_off():
    from ordmix_core.dashboard.fit_summary import no_spam_note

    clean = simulate_crowd(n_items=200, n_annotators=15, spammer_share=0.0, random_state=4)
    off = OrdinalMixture(n_restarts=1, random_state=0, spam=False).fit(clean.ratings)
    assert no_spam_note(off).startswith("This fit has no spam component (it was switched off)")


def test_the_summary_names_the_annotators_still_moving_or_says_nothing(demo):
    """``moving_line``: the count and the first five names of ``still_moving``, in the Fit
    summary after the convergence line; no line when none is moving."""
    m = OrdinalMixture(n_restarts=1, random_state=0).fit(demo.ratings)
    m.annotators_["still_moving"] = False
    assert moving_line(m) is None
    assert not any(line.startswith("Still moving") for line in fit_summary(m))
    names = list(m.annotators_.index[[3, 5, 7, 9, 11, 13]])
    m.annotators_.loc[names, "still_moving"] = True
    line = moving_line(m)
    assert line.startswith("Still moving: the reliability of 6 annotators (")
    assert ", ".join(names[:5]) + ", ...)" in line and names[5] not in line
    assert "more than 0.1% a sweep, or expected to move by more than 0.05)" in line
    lines = fit_summary(m)
    conv = next(i for i, x in enumerate(lines) if x.startswith(("Converged", "Not converged")))
    assert lines[conv + 1] == line
    m.annotators_.loc[names[1:], "still_moving"] = False
    assert f"of 1 annotator ({names[0]})" in moving_line(m)


def test_the_unstable_line_names_the_near_tied_answers_and_the_alternative(demo):
    """``ensemble_line``: the near-tied restarts and the alternative (the still-moving
    annotators carried the way they were going) when near-tied, what they disagree on
    counted from the frames; an alternative that is not near-tied is only said to end below
    the winner."""
    m = OrdinalMixture(n_restarts=1, random_state=0).fit(demo.ratings)
    m.ensemble_, m.ensemble_gap_ = [m.best_restart_], 12.0
    m.alternative_ = None
    assert ensemble_line(m) == (
        "Unstable: no other restart finished within 12.0 of the best lower bound, so there is "
        "no near-tied answer to compare it with."
    )
    m.alternative_ = {"annotators": ["a", "b"], "lower_bound": -10.0,
                      "bound_above_winner": -20.5, "n_iter": 9, "near_tied": False}  # fmt: skip
    assert ensemble_line(m).endswith(
        "compare it with. And carrying the 2 still-moving annotators (a, b) the way they were "
        "going gives an answer whose lower bound is 20.5 below the chosen one's (more than "
        "12.0 below)."
    )
    m.alternative_.update(bound_above_winner=15.25, near_tied=True)
    m.items_["unstable"] = False
    m.items_.iloc[[0, 2, 4], m.items_.columns.get_loc("unstable")] = True
    m.items_["estimate_spread"] = 0.0
    m.items_.iloc[2, m.items_.columns.get_loc("estimate_spread")] = 0.75
    m.annotators_["unstable"] = False
    m.annotators_.iloc[1, m.annotators_.columns.get_loc("unstable")] = True
    line = ensemble_line(m)
    assert line.startswith(
        "Unstable: carrying the 2 still-moving annotators (a, b) the way they were going gives "
        "an answer whose lower bound is 15.2 above the chosen one's. These answers disagree on "
        "3 item(s) "
        "(largest spread of z_mean 0.750) and 1 annotator(s)"
    )
    m.ensemble_ = [m.best_restart_, 4]
    m.alternative_.update(bound_above_winner=-0.17, annotators=list("abcdefg"))
    assert ensemble_line(m).startswith(
        "Unstable: 2 restarts finished within 12.0 of the best lower bound, and carrying the 7 "
        "still-moving annotators (a, b, c, d, e, ...) the way they were going gives an answer "
        "whose lower "
        "bound is 0.2 below the chosen one's (within 12.0). These answers disagree on 3 item(s)"
    )
    assert ensemble_line(m) in fit_summary(m)
