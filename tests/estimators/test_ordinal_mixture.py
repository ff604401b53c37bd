import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from _shared import need_trec

from ordmix_core import CollapseWarning, InputError, OrdinalMixture
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.evaluation.metrics import evaluate
from ordmix_core.results import reliability
from ordmix_core.vb import kernels

DEMO_TREC = Path(__file__).resolve().parents[2] / "demo_data" / "trec-rf10-ratings.csv"

VARIANTS = [(o, s) for o in (True, False) for s in (True, False)]


@pytest.fixture(scope="module")
def spammy():
    """Half of all ratings come from uniform spammers."""
    crowd = simulate_crowd(
        n_items=600, n_annotators=40, ratings_per_item=6, spammer_share=0.5, random_state=7
    )
    share = crowd.ratings["annotator"].map(crowd.spammers).mean()
    assert 0.4 < share < 0.65
    return crowd


def test_recovers_truth_and_flags_spammers(spammy):
    model = OrdinalMixture("query", random_state=0).fit(spammy.ratings)
    est = model.estimates_.reindex(spammy.truth.index)
    mean = spammy.ratings.groupby("instance")["rating"].mean().reindex(spammy.truth.index)
    mse_odm, mse_mean = ((est - spammy.truth) ** 2).mean(), ((mean - spammy.truth) ** 2).mean()
    assert mse_odm < 0.5 * mse_mean
    assert np.corrcoef(est, spammy.truth)[0, 1] > np.corrcoef(mean, spammy.truth)[0, 1] + 0.1
    # the spammers are the least reliable annotators
    rel = model.annotators_["reliability"].sort_values()
    n_spam = int(spammy.spammers.sum())
    assert spammy.spammers[rel.index[:n_spam]].all()
    assert not model.collapsed_ and model.converged_


@pytest.mark.parametrize("granularity", ["instance", "query", "global"])
@pytest.mark.parametrize("ordinal,spam", VARIANTS)
def test_bound_never_decreases(spammy, granularity, ordinal, spam):
    model = OrdinalMixture(
        granularity, ordinal=ordinal, spam=spam, n_restarts=2, max_iter=150, random_state=1
    ).fit(spammy.ratings)
    for (_, _), f in model.trace_.groupby(["restart", "stage"])["lower_bound"]:
        d = np.diff(f.to_numpy())
        assert np.all(d >= -1e-9 * np.abs(f.to_numpy()[1:])), d.min()


def test_bound_never_decreases_on_other_crowds():
    for seed, kw in enumerate(
        [
            dict(n_items=200, n_annotators=8, ratings_per_item=3, spammer_share=0.0),
            dict(n_items=300, n_annotators=50, ratings_per_item=2, spammer_share=0.8),
            dict(n_items=150, n_annotators=20, ratings_per_item=9, difficulty_spread=1.5),
        ]
    ):
        crowd = simulate_crowd(random_state=seed, **kw)
        for gran in ("instance", "query", "global"):
            m = OrdinalMixture(gran, n_restarts=2, max_iter=200, random_state=seed)
            m.fit(crowd.ratings)
            f = m.trace_.loc[m.trace_["stage"] == "mixture", ["restart", "lower_bound"]]
            for _, g in f.groupby("restart")["lower_bound"]:
                assert np.all(np.diff(g.to_numpy()) >= -1e-9 * np.abs(g.to_numpy()[1:]))


def test_paper_updates_run_and_differ(spammy):
    exact = OrdinalMixture("global", n_restarts=1, random_state=0).fit(spammy.ratings)
    paper = OrdinalMixture("global", n_restarts=1, updates="paper", random_state=0)
    paper.fit(spammy.ratings)
    assert np.all(np.isfinite(paper.estimates_))
    # the variational fit's own figures differ (the reliability is the label model's)
    assert not np.allclose(exact.annotators_["spam_share"], paper.annotators_["spam_share"])
    assert not np.allclose(exact.items_["z_mean"], paper.items_["z_mean"])


def test_same_seed_same_result_and_restarts_differ(spammy):
    a = OrdinalMixture("query", n_restarts=3, random_state=42).fit(spammy.ratings)
    b = OrdinalMixture("query", n_restarts=3, random_state=42).fit(spammy.ratings)
    pd.testing.assert_series_equal(a.estimates_, b.estimates_)
    pd.testing.assert_frame_equal(a.trace_, b.trace_)
    # one shared no-spam warm-up, then every restart's mixture from its own noisy branch
    assert set(a.trace_[a.trace_["stage"] == "nospam"]["restart"]) == {0}
    first = a.trace_[(a.trace_["stage"] == "uniform") & (a.trace_["iteration"] == 1)]
    assert first["lower_bound"].nunique() == 3  # every restart drew its own start


def test_results_frames(spammy):
    m = OrdinalMixture("query", n_restarts=2, random_state=0).fit(spammy.ratings)
    assert list(m.items_.columns[:3]) == ["estimate", "sd", "n_ratings"]
    assert m.items_.index.name == "instance" and len(m.items_) == 600
    assert set(m.annotators_.columns) >= {"n_ratings", "expertise", "reliability"}
    assert m.annotators_["n_ratings"].sum() == len(spammy.ratings)
    assert (m.sd_ > 0).all() and m.categories_.index.name == "category"
    assert set(m.trace_.columns) == {"restart", "stage", "iteration", "lower_bound"}
    assert m.best_restart_ in m.restarts_.index
    assert m.lower_bound_ == m.restarts_.loc[m.best_restart_, "lower_bound"]
    assert "highest lower bound" in m.selection_reason_
    assert m.omega_.shape == (len(spammy.ratings),)


def test_crowdkit_columns_and_query_needed():
    crowd = simulate_crowd(n_items=50, n_annotators=6, random_state=3)
    ck = crowd.ratings.rename(
        columns={"annotator": "worker", "instance": "task", "rating": "label"}
    )
    m = OrdinalMixture("instance", n_restarts=1).fit(ck.drop(columns="query"))
    assert len(m.estimates_) == 50
    with pytest.raises(InputError, match="query"):
        OrdinalMixture("query").fit(ck.drop(columns="query"))


def test_callback_reports_and_can_stop(spammy):
    seen = []

    def cb(restart, iteration, bound):
        seen.append((restart, iteration, bound))
        return len(seen) < 40

    m = OrdinalMixture("global", random_state=0).fit(spammy.ratings, callback=cb)
    assert m.interrupted_ and len(seen) == 40
    assert np.all(np.isfinite(m.estimates_))
    assert any("stopped" in w for w in m.warnings_)


def test_keyboard_interrupt_leaves_previous_fit(spammy):
    m = OrdinalMixture("global", n_restarts=1, random_state=0).fit(spammy.ratings)
    before = m.estimates_.copy()

    def cb(restart, iteration, bound):
        if iteration == 3:
            raise KeyboardInterrupt

    other = simulate_crowd(n_items=30, n_annotators=5, random_state=1).ratings
    with pytest.raises(KeyboardInterrupt):
        m.fit(other, callback=cb)
    pd.testing.assert_series_equal(m.estimates_, before)


@pytest.mark.parametrize(
    "ratings,scale",
    [
        (pd.DataFrame({"annotator": ["a"], "instance": ["i"], "rating": [3]}), None),
        (
            pd.DataFrame(
                {"annotator": ["a"] * 5, "instance": list("vwxyz"), "rating": [1, 2, 2, 3, 1]}
            ),
            None,
        ),
        (
            pd.DataFrame({"annotator": list("abcd"), "instance": list("iijj"), "rating": [4] * 4}),
            None,
        ),
        (
            pd.DataFrame(
                {"annotator": list("abab"), "instance": list("iijj"), "rating": [0, 1, 1, 1]}
            ),
            None,
        ),
        (
            pd.DataFrame(
                {
                    "annotator": list("abcab"),
                    "instance": list("iiijj"),
                    "rating": [0.0, 10, 100, 0, 10],
                }
            ),
            [0, 10, 100],
        ),
        (
            pd.DataFrame(
                {"annotator": list("abab"), "instance": list("iijj"), "rating": [1, 1, 5, 5]}
            ),
            [1, 2, 3, 4, 5],
        ),
    ],
    ids=["single-rating", "one-annotator", "all-equal", "two-levels", "uneven-scale", "far-tails"],
)
@pytest.mark.parametrize("ordinal,spam", VARIANTS)
@pytest.mark.parametrize(
    "max_iter", [200, pytest.param(None, marks=pytest.mark.slow)], ids=["200-sweeps", "max-iter"]
)
def test_odd_but_valid_data_gives_finite_estimates_in_range(
    ratings, scale, ordinal, spam, max_iter
):
    """Odd data never converge: the default run sweeps 200 times (every stage, both restarts),
    ``-m slow`` up to the default ``max_iter`` (1000), where a slow drift would overflow."""
    kw = {} if max_iter is None else {"max_iter": max_iter}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        m = OrdinalMixture("instance", scale=scale, ordinal=ordinal, spam=spam, n_restarts=2, **kw)
        m.fit(ratings)
    b = m.scale_.thresholds
    assert np.all(np.isfinite(m.estimates_)) and np.all(np.isfinite(m.sd_))
    assert m.estimates_.between(b[0], b[-1]).all()
    assert np.isfinite(m.lower_bound_)


def test_bad_parameters_are_input_errors(spammy):
    for kw in (dict(updates="fast"), dict(n_restarts=0), dict(phi=-1.0), dict(pi=[1, 2])):
        with pytest.raises(InputError):
            OrdinalMixture("global", **kw).fit(spammy.ratings)


@pytest.mark.slow
@pytest.mark.parametrize("granularity", ["instance", "query", "global"])
def test_trec_default_fit_beats_the_mean(granularity):
    trec = need_trec()
    ratings = pd.read_csv(trec / "ratings.csv", dtype=str)
    gold = pd.read_csv(trec / "gold.csv", dtype={"instance": str}).set_index("instance")["truth"]
    model = OrdinalMixture(granularity, random_state=0).fit(ratings)
    queries = model.items_["query"]
    mean = ratings.astype({"rating": float}).groupby("instance")["rating"].mean()
    odm, base = evaluate(model.estimates_, gold, queries), evaluate(mean, gold, queries)
    assert odm["mse"] < base["mse"]
    assert odm["correlation"] > base["correlation"]
    assert odm["ndcg"] > base["ndcg"]
    assert not model.collapsed_


def test_threads_do_not_change_results(spammy):
    a = OrdinalMixture("query", n_restarts=4, n_jobs=1, random_state=3).fit(spammy.ratings)
    b = OrdinalMixture("query", n_restarts=4, n_jobs=2, random_state=3).fit(spammy.ratings)
    pd.testing.assert_frame_equal(a.trace_, b.trace_, check_exact=True)
    pd.testing.assert_series_equal(a.estimates_, b.estimates_, check_exact=True)


def test_a_restart_running_alone_takes_both_cores_with_the_same_bits(monkeypatch):
    """Restarts in two threads: the passes of a restart that sweeps alone (the shared warm-up,
    the last finisher's tail) are the parallel ones, never while another restart sweeps, and
    the fit is bit-identical to one in a single thread (same chunks: 91,783 ratings, 2)."""
    ratings = pd.read_csv(DEMO_TREC, dtype=str)
    kw = dict(n_restarts=3, max_iter=40, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serial = OrdinalMixture(n_jobs=1, **kw).fit(ratings)
    original, seen = kernels.passes, []

    def spy(n_ratings, n_chunks):
        chosen = original(n_ratings, n_chunks)
        xy = getattr(chosen[0], "__wrapped__", chosen[0])  # threads take turns around it
        seen.append((xy is kernels.pass_xy, kernels._alone(), threading.current_thread()))
        return chosen

    monkeypatch.setattr(kernels, "passes", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        threaded = OrdinalMixture(n_jobs=2, **kw).fit(ratings)
    parallel = [p for p, _, _ in seen]
    assert any(parallel) and not all(parallel)  # alone sometimes, side by side other times
    assert all(alone for p, alone, _ in seen if p)
    main = threading.main_thread()
    assert any(p for p, _, thread in seen if thread is not main)  # a tail in a thread
    pd.testing.assert_frame_equal(serial.trace_, threaded.trace_, check_exact=True)
    pd.testing.assert_series_equal(serial.estimates_, threaded.estimates_, check_exact=True)
    assert kernels._alone() is False  # the race cleared the calling thread's check


@pytest.mark.skipif(not kernels.USE_JIT, reason="the compiled passes")
def test_a_fit_of_one_restart_takes_both_cores_unless_told_one_thread(monkeypatch):
    """One restart sweeps alone: its passes are the parallel ones (same chunks, same bits);
    ``n_jobs=1`` keeps them on the calling thread."""
    ratings = pd.read_csv(DEMO_TREC, dtype=str)
    original, fits = kernels.passes, {}
    for n_jobs in (None, 1):
        seen = fits[n_jobs] = []

        def spy(n_ratings, n_chunks, seen=seen):
            chosen = original(n_ratings, n_chunks)
            seen.append(chosen[0] is kernels.pass_xy)
            return chosen

        monkeypatch.setattr(kernels, "passes", spy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = OrdinalMixture(n_restarts=1, max_iter=8, n_jobs=n_jobs, random_state=0)
            fits[n_jobs, "estimates"] = fit.fit(ratings).estimates_
    assert fits[None] and all(fits[None])
    assert fits[1] and not any(fits[1])
    pd.testing.assert_series_equal(fits[None, "estimates"], fits[1, "estimates"], check_exact=True)


def test_acceleration_reaches_the_same_optimum_in_fewer_sweeps(spammy):
    fast = OrdinalMixture("query", n_restarts=1, tol=1e-3, random_state=0).fit(spammy.ratings)
    slow = OrdinalMixture("query", n_restarts=1, tol=1e-3, accelerate=False, random_state=0)
    slow.fit(spammy.ratings)
    assert fast.n_iter_ < slow.n_iter_
    assert abs(fast.lower_bound_ - slow.lower_bound_) < 1.0
    assert np.max(np.abs(fast.estimates_ - slow.estimates_)) < 0.02


# --------------------------------------------------------------------------- spam=None
def _crowd(spammer_share: float):
    return simulate_crowd(
        n_items=300, n_annotators=30, spammer_share=spammer_share, random_state=11
    ).ratings


@pytest.mark.parametrize(
    "kw", [{}, {"spam": True}, {"spam": False}, {"model": "paper"}],
    ids=["default", "on", "off", "paper"],
)  # fmt: skip
def test_the_spam_component_is_on_unless_switched_off(kw):
    """One variational fit, no decision and no refit: the component is there unless the user
    switches it off (a fit that takes most ratings as spam says so, ``SpamWarning``)."""
    m = OrdinalMixture(n_restarts=2, random_state=0, **kw).fit(_crowd(0.0))
    assert "spam_choice" not in m.model_
    assert m.spam_ is kw.get("spam", True)
    if not m.spam_:
        assert (m.omega_ == 1).all()


def test_a_collapsed_spam_fit_is_kept_with_its_warning():
    spam_only = simulate_crowd(n_items=60, n_annotators=8, spammer_share=1.0, random_state=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = OrdinalMixture(n_restarts=2, random_state=0).fit(spam_only.ratings)
    assert m.collapsed_ and m.spam_
    assert [w for w in caught if issubclass(w.category, CollapseWarning)]


def test_the_fits_flags_are_the_outputs_flags():
    from ordmix_core.results import decision_columns, reliability

    m = OrdinalMixture(n_restarts=2, random_state=0).fit(_crowd(0.3))
    assert m.spam_ and m.annotator_flags_ is not None
    # the same as computed afresh (a copy of the model without them)
    fresh = SimpleNamespace(**{**vars(m), "annotator_flags_": None})
    pd.testing.assert_frame_equal(m.annotator_flags_, reliability.annotator_flags(fresh))
    assert reliability.annotator_flags(m) is m.annotator_flags_  # reused at the defaults
    assert reliability.annotator_flags(m, prior=(2.0, 2.0)) is not m.annotator_flags_
    # reused, not recomputed: the fit's own flags, with the agreement beside them
    reused = decision_columns.decide(m).annotators
    pd.testing.assert_frame_equal(reused.drop(columns="agreement"), m.annotator_flags_)
    assert "agreement" not in m.annotator_flags_  # the fit's own frame left as it was
    other = decision_columns.decide(m, confidence=0.8).annotators  # other settings: computed
    assert other is not m.annotator_flags_ and (other["flag_confidence"] == 0.8).all()


@pytest.mark.parametrize(
    ("kw", "prior"),
    [
        ({}, (2.0, 1.0)),  # the extended model's vaguer difficulty prior
        ({"model": "paper"}, (10.0, 5.0)),  # the paper's
        ({"phi": 3.0}, (3.0, 1.0)),  # a given value wins, the other stays the model's
        ({"model": "paper", "eta": 0.5}, (10.0, 0.5)),
    ],
)
def test_difficulty_prior_is_the_models_unless_given(spammy, kw, prior):
    m = OrdinalMixture(n_restarts=1, max_iter=5, random_state=0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(spammy.ratings)
    assert (m.hyperparams_["phi"], m.hyperparams_["eta"]) == prior
    assert m.get_params()["phi"] == kw.get("phi")  # the parameter is stored as given


def test_the_difficulty_prior_changes_the_fit(spammy):
    def difficulty(**kw):
        m = OrdinalMixture(n_restarts=1, max_iter=20, random_state=0, spam=True, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return m.fit(spammy.ratings).categories_["difficulty"].to_numpy()

    default, paper_prior = difficulty(), difficulty(phi=10.0, eta=5.0)
    assert np.array_equal(default, difficulty(phi=2.0, eta=1.0))
    assert not np.allclose(default, paper_prior, rtol=1e-3)
    # the vaguer prior lets the items' difficulties spread further from their mean
    assert np.std(np.log(default)) > np.std(np.log(paper_prior))


@pytest.mark.parametrize(
    ("params", "levels", "n"),
    [
        ({}, 5, 1),  # the label fit makes the labels: the data start alone
        ({"model": "paper"}, 5, 10),  # the continuous posterior does
        ({"labels": "continuous"}, 5, 10),
        ({}, 101, 10),  # a slider: the continuous posterior's labels
        ({"n_restarts": 3}, 101, 3),  # asked for
        ({"init_from": "yesterday"}, 5, 1),  # a refit: yesterday's start alone
        ({"init_from": "yesterday", "model": "paper"}, 5, 4),  # at most four refit starts
    ],
)
def test_restarts_follow_where_the_labels_come_from(params, levels, n):
    scale = Scale(tuple(float(v) for v in range(levels)))
    assert OrdinalMixture(**params).planned_restarts(scale) == n


def test_seconds_cover_the_label_path(monkeypatch):
    flags = reliability.fitted_flags

    def slow_flags(model):  # the flags come after the race and the labels
        time.sleep(0.5)
        return flags(model)

    monkeypatch.setattr(reliability, "fitted_flags", slow_flags)
    crowd = simulate_crowd(n_items=60, n_annotators=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OrdinalMixture(random_state=0, n_restarts=1).fit(crowd.ratings)
    assert model.seconds_ >= 0.5
