"""The restart schedule and the choice among restarts, observed through real fits.

Successive halving (``prune_restarts``), the restart kinds (``nospam_warmup``), the collapse guard
(``collapse_threshold``) and an end-to-end CollapseWarning. Each expectation is the rule as
the estimator's docstring and README state it, applied to the fit's own restarts table.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from _sweeps import record_sweeps

from ordmix_core import OrdinalMixture as _OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.ordinal_mixture import CollapseWarning
from ordmix_core.fit import schedule

#: the schedule of the paper's model (two stages per restart: warm-up, mixture); the
#: extended default adds a uniform-spam stage, tested in test_extensions.py
OrdinalMixture = functools.partial(_OrdinalMixture, model="paper")


@pytest.fixture(scope="module")
def crowd() -> pd.DataFrame:
    """Restarts of this crowd need tens of sweeps at tol 1e-4, so halving has rounds to do."""
    return simulate_crowd(
        n_items=80, n_annotators=10, ratings_per_item=4, spammer_share=0.3, random_state=4
    ).ratings


def noise(n_ann: int, n_items: int, n: int, k: int, seed: int) -> pd.DataFrame:
    """Uniformly random ratings: nothing but spam to find."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "annotator": [f"a{j}" for j in rng.integers(0, n_ann, n)],
            "instance": [f"i{j}" for j in rng.integers(0, n_items, n)],
            "rating": rng.integers(1, k + 1, n),
        }
    )


def _trace(model: OrdinalMixture, restart: int, stage: str = "mixture") -> np.ndarray:
    t = model.trace_
    sel = t[(t["restart"] == restart) & (t["stage"] == stage)].sort_values("iteration")
    return sel["lower_bound"].to_numpy()


# ------------------------------------------------------------------ successive halving


@pytest.mark.parametrize("prune_start", [3, 5])
def test_successive_halving_drops_the_worse_half_each_round(crowd, prune_start) -> None:
    """Rounds of prune_start, 2 prune_start, 4 prune_start ... mixture sweeps; after each, the
    worse half (by bound; none collapsed here) of the unfinished restarts is dropped, never
    below ``schedule.KEEP`` (2), which run to the end."""
    m = OrdinalMixture(
        "query", n_restarts=8, tol=1e-4, prune_start=prune_start, random_state=0
    ).fit(crowd)
    r = m.restarts_
    assert not r["collapsed"].any()
    ends = np.cumsum(prune_start * 2 ** np.arange(10))  # cumulative sweeps at each round's end
    dropped = r[r["dropped"]]
    assert set(dropped["n_iter"]) <= set(ends), dropped["n_iter"]
    assert not dropped["converged"].any()
    n_rounds = 0
    for end in ends:
        # alive at the round's end: restarts that went on, and those dropped right there
        went_on = r[r["n_iter"] > end].index
        cut = dropped[dropped["n_iter"] == end].index
        alive = len(went_on) + len(cut)
        if alive <= schedule.KEEP:
            assert len(cut) == 0
            break
        n_rounds += 1
        assert len(cut) == alive - max((alive + 1) // 2, schedule.KEEP), (end, list(cut))
        at_end = {i: _trace(m, i)[end - 1] for i in [*went_on, *cut]}
        assert min(at_end[i] for i in went_on) >= max(at_end[i] for i in cut), at_end
    assert n_rounds >= 2  # the crowd exercised more than one round
    assert len(dropped) == 6  # 8 -> 4 -> 2: every round halves, two restarts finish
    assert f"{len(dropped)} restart(s) were pruned by successive halving" in m.selection_reason_
    assert "behind" not in m.selection_reason_
    assert not r.loc[m.best_restart_, "dropped"]


def test_without_pruning_every_restart_finishes_and_pruning_only_cuts_traces(crowd) -> None:
    kw = dict(n_restarts=6, tol=1e-4, prune_start=3, random_state=0)
    pruned = OrdinalMixture("query", **kw).fit(crowd)
    full = OrdinalMixture("query", prune_restarts=False, **kw).fit(crowd)
    assert not full.restarts_["dropped"].any()
    assert full.restarts_["converged"].all()
    assert "pruned" not in full.selection_reason_
    assert pruned.restarts_["dropped"].sum() == 6 - schedule.KEEP
    for i in range(6):
        # each restart's arithmetic is its own: a pruned trace is the unpruned one, cut short
        a, b = _trace(pruned, i), _trace(full, i)
        assert len(a) <= len(b)
        np.testing.assert_array_equal(a, b[: len(a)])
        np.testing.assert_array_equal(_trace(pruned, i, "nospam"), _trace(full, i, "nospam"))
    # the winner of the full race is at least as good as what halving kept
    assert full.lower_bound_ >= pruned.lower_bound_ - 1e-9


def test_one_restart_is_never_pruned(crowd) -> None:
    m = OrdinalMixture("query", n_restarts=1, tol=1e-4, prune_start=2, random_state=0).fit(crowd)
    assert not m.restarts_["dropped"].any() and m.converged_


# ------------------------------------------------------------------ restart kinds


def test_warm_start_kinds_and_stages(crowd) -> None:
    m = OrdinalMixture("query", n_restarts=3, random_state=0).fit(crowd)
    r = m.restarts_
    assert list(r["init"]) == ["warm"] * 3
    # the shared schedule: restart 0 fits the no-spam model (its sweeps are in the trace as
    # 'nospam'), the others branch from that fit and count its sweeps as theirs
    assert r.loc[0, "warmup_iter"] == len(_trace(m, 0, "nospam")) > 0
    for i in (1, 2):
        assert r.loc[i, "warmup_iter"] == len(_trace(m, i, "nospam")) == 0
        assert r.loc[i, "shared_iter"] == r.loc[0, "warmup_iter"]
    cold = OrdinalMixture("query", n_restarts=3, nospam_warmup=False, random_state=0).fit(crowd)
    r = cold.restarts_
    assert list(r["init"]) == ["data", "random", "random"]
    assert (r["warmup_iter"] == 0).all()
    assert set(cold.trace_["stage"]) == {"mixture"}
    # without the spam component there is nothing to warm up: data, then random starts
    plain = OrdinalMixture("query", n_restarts=3, spam=False, random_state=0).fit(crowd)
    assert list(plain.restarts_["init"]) == ["data", "random", "random"]
    assert set(plain.trace_["stage"]) == {"model"}


def test_random_restarts_draw_eps_like_the_paper(crowd, monkeypatch) -> None:
    """nospam_warmup=False: restart 0 starts from the shrunk per-item means with eps = 0.99; the
    others add noise to z and tau and draw eps ~ U(0.5, 0.99) per annotator."""
    calls = record_sweeps(monkeypatch)
    OrdinalMixture(
        "query", n_restarts=4, nospam_warmup=False, n_jobs=1, prune_restarts=False,
        accelerate=False, random_state=0,
    ).fit(crowd)  # fmt: skip
    # without SQUAREM proposals (omega None too) only a restart's first sweep has no omega
    starts = [c.before for c in calls if c.before.omega is None]
    assert len(starts) == 4
    assert np.all(starts[0].eps == 0.99)
    v = crowd.groupby("instance")["rating"].agg(["sum", "count"]).sort_index()
    lam, mu = 0.1, 3.0  # defaults: mu is the mean of the scale 1..5
    np.testing.assert_allclose(
        starts[0].mu_m, (mu * lam + v["sum"]) / (lam + v["count"]), rtol=1e-12
    )
    for s in starts[1:]:
        assert np.all((s.eps >= 0.5) & (s.eps < 0.99)) and np.std(s.eps) > 0.05
        assert not np.allclose(s.mu_m, starts[0].mu_m)
    assert not np.allclose(starts[1].eps, starts[2].eps)


def test_warm_restarts_enter_the_mixture_at_eps_099(crowd, monkeypatch) -> None:
    calls = record_sweeps(monkeypatch)
    OrdinalMixture("query", n_restarts=3, n_jobs=1, accelerate=False, random_state=0).fit(crowd)
    first = [c for c in calls if c.before.omega is None]
    # one no-spam warm-up, shared
    assert len(first) == 1
    assert not any(c.problem.spam for c in first)
    # each restart enters the mixture once, with eps reset to 0.99 (after a mixture sweep eps
    # is the mean of omega per annotator, never 0.99 for everyone)
    mixture_first = [c for c in calls if c.problem.spam and np.all(c.before.eps == 0.99)]
    assert len(mixture_first) == 3
    assert all(c.before.omega is not None for c in mixture_first)  # from the warm-up's state
    # the branches: the warm-up's fit plus each restart's own noise
    mu = [c.before.mu_m for c in mixture_first]
    assert not np.allclose(mu[1], mu[0]) and not np.allclose(mu[2], mu[1])
    assert np.all(mixture_first[1].before.lam_m == mixture_first[0].before.lam_m)


# ------------------------------------------------------------------ the collapse guard


def _expected_choice(r: pd.DataFrame, threshold: float) -> tuple[int, bool]:
    """The documented rule: the highest bound among restarts whose truth share is at least
    the threshold; if none, the highest bound of all, and the fit counts as collapsed."""
    ok = r[r["truth_share"] >= threshold]
    if len(ok):
        return int(ok["lower_bound"].idxmax()), False
    return int(r["lower_bound"].idxmax()), True


@pytest.fixture(scope="module")
def guarded() -> tuple[pd.DataFrame, dict]:
    """Random restarts on noise: some collapse to all-spam (the highest bound), some do not.
    Plain sweeps (``accelerate=False``): with the exact eps step every restart of this noise
    reaches the all-spam answer, which is right for noise but leaves no choice to guard."""
    kw = dict(n_restarts=6, nospam_warmup=False, prune_restarts=False, random_state=0)
    kw["accelerate"] = False
    return noise(6, 15, 60, 3, seed=0), kw


def test_guard_skips_a_collapsed_restart_with_a_higher_bound(guarded) -> None:
    df, kw = guarded
    with warnings.catch_warnings():
        warnings.simplefilter("error", CollapseWarning)
        m = OrdinalMixture("global", **kw).fit(df)
    r = m.restarts_
    assert r["collapsed"].any() and not r["collapsed"].all(), r  # precondition of this test
    assert r.loc[r["collapsed"], "lower_bound"].max() > m.lower_bound_  # all-spam scores higher
    assert not m.collapsed_ and not r.loc[m.best_restart_, "collapsed"]
    assert m.best_restart_ == _expected_choice(r, 0.05)[0]
    assert "(one with a higher bound) and were not chosen" in m.selection_reason_
    # the all-spam bound is L log(1/K): every rating explained by uniform spam
    assert r["lower_bound"].max() == pytest.approx(len(df) * np.log(1 / 3), abs=1e-2)


def test_threshold_changes_the_choice(guarded) -> None:
    df, kw = guarded
    base = OrdinalMixture("global", **kw).fit(df)
    r = base.restarts_
    top = float(r["truth_share"].max())
    choices = {}
    for thr in (0.0, 0.05, top * 0.999, top * 1.001):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m = OrdinalMixture("global", collapse_threshold=thr, **kw).fit(df)
        # without pruning the threshold changes only the choice, not the restarts
        pd.testing.assert_series_equal(m.restarts_["lower_bound"], r["lower_bound"])
        want, collapsed = _expected_choice(m.restarts_, thr)
        assert (m.best_restart_, m.collapsed_) == (want, collapsed), thr
        assert any(w.category is CollapseWarning for w in seen) == collapsed, thr
        assert list(m.restarts_["collapsed"]) == list(m.restarts_["truth_share"] < thr)
        choices[thr] = m.best_restart_
    # 0 is the paper's rule (highest bound: the all-spam restart); 0.05 skips it
    assert choices[0.0] != choices[0.05]
    assert choices[0.0] == int(r["lower_bound"].idxmax())
    # above every share all restarts collapse: the highest bound again, with the warning
    assert choices[top * 1.001] == choices[0.0]


def test_collapse_warning_from_a_real_fit() -> None:
    """Noise from 4 annotators on a 5-level scale: every restart ends all-spam (pruned or not).
    The default fit warns, says why, and its estimates sit at the prior."""
    df = noise(4, 30, 120, 5, seed=0)
    with pytest.warns(CollapseWarning, match="collapsed"):
        m = OrdinalMixture("global", n_restarts=3, random_state=0).fit(df)
    assert m.collapsed_
    assert m.selection_reason_.startswith("every finished restart collapsed")
    assert any("collapsed" in w for w in m.warnings_)
    finished = m.restarts_[~m.restarts_["dropped"]]
    assert finished["collapsed"].all() and (finished["truth_share"] < 0.05).all()
    assert m.omega_.mean() < 0.05
    # q(z) at the prior: mean mu (the scale's centre 3), sd 1/sqrt(lambda)
    np.testing.assert_allclose(m.estimates_, 3.0, atol=1e-6)
    np.testing.assert_allclose(m.sd_, 1 / np.sqrt(0.1), rtol=1e-6)
    # the same seed without halving: still all collapsed (the data, not the schedule)
    with pytest.warns(CollapseWarning):
        full = OrdinalMixture("global", n_restarts=3, prune_restarts=False, random_state=0)
        full.fit(df)
    assert full.restarts_["collapsed"].all()
    # the no-spam model the warning points to cannot collapse
    with warnings.catch_warnings():
        warnings.simplefilter("error", CollapseWarning)
        plain = OrdinalMixture("global", n_restarts=3, spam=False, random_state=0).fit(df)
    assert not plain.collapsed_


@pytest.mark.filterwarnings("ignore::ordmix_core.estimators.ordinal_mixture.CollapseWarning")
def test_pruning_does_not_turn_a_healthy_fit_into_a_collapsed_one(guarded) -> None:
    """Successive halving ranks unfinished restarts by bound, which favours the ones heading
    for the all-spam solution: here it drops all three restarts that end healthy. The pruned
    ones are resumed when every kept one collapsed, so the fit is as healthy as without
    pruning."""
    df, kw = guarded
    full = OrdinalMixture("global", **kw).fit(df)
    assert not full.collapsed_
    pruned = OrdinalMixture("global", **{**kw, "prune_restarts": True}).fit(df)
    assert not pruned.collapsed_, pruned.restarts_
    assert pruned.best_restart_ == full.best_restart_
    assert pruned.lower_bound_ == pytest.approx(full.lower_bound_, rel=1e-12)


# ------------------------------------------------------------------ out of reach of the leader


def test_projected_gain_is_the_remaining_gain_of_a_geometric_climb() -> None:
    """On ``F_t = F - c r^t`` the projection from two windows is exactly ``c r^t``, the gain
    still to come; before two windows, or while the gain grows, it is unbounded; flat, 0."""
    w, c, r = schedule.GAIN_WINDOW, 50.0, 0.9
    trace = [-100.0 - c * r**t for t in range(3 * w)]
    for t in range(2 * w, 3 * w):
        assert schedule.projected_gain(trace[: t + 1]) == pytest.approx(c * r**t, rel=1e-9)
    assert schedule.projected_gain(trace[: 2 * w]) == np.inf
    assert schedule.projected_gain([float(t) ** 2 for t in range(3 * w)]) == np.inf
    assert schedule.projected_gain([-7.0] * (3 * w)) == 0.0


def _scripted_race(limits: dict[int, float], rate: float, map_runs=None) -> list:
    """Restarts whose bound climbs geometrically (``rate`` per sweep) from ``limit - 1000``
    to ``limits[restart]``; the race of the shared schedule's last stage, no warm-up."""
    runs = [schedule.RestartRun(i, "data", None) for i in limits]

    def step(run, spam):
        t = len(run.trace)
        run.truth_share, run.estimate_change = 0.8, 0.0
        return limits[run.restart] - 1000.0 * rate ** (t + 1)

    schedule.race(
        runs, step, lambda run: None, spam=True, max_iter=2000, tol=1e-9, prune=True,
        prune_start=5, collapse_threshold=0.05,
        **({"map_runs": map_runs} if map_runs else {}),
    )  # fmt: skip
    return runs


def test_a_restart_out_of_reach_of_the_leader_stops() -> None:
    """Once halving is down to ``KEEP``, rounds of ``FINAL_ROUND`` sweeps; after each, a
    restart whose bound plus its projected gain is more than ``OUTRUN_GAPS`` near-tie gaps
    below the leader's stops (its projection needs two windows of sweeps first)."""
    from ordmix_core.fit import selection

    rate = 0.95
    runs = _scripted_race({0: -10_000.0, 1: -10_500.0}, rate)
    leader, loser = runs
    assert leader.converged and not leader.dropped
    assert loser.dropped and loser.outrun and not loser.converged
    w, k = schedule.GAIN_WINDOW, schedule.FINAL_ROUND
    first = -(-(2 * w + 1) // k) * k  # the first round's end with two windows behind it
    assert loser.pruned_at == len(loser.trace) == first
    # what the rule saw there: 500 nats apart, far more than 4 gaps of 3 nats, projected exactly
    gap = selection.OUTRUN_GAPS * selection.ensemble_gap(leader.trace[first - 1])
    assert leader.trace[first - 1] - loser.trace[-1] - 1000 * rate**first > gap
    best, reason, _ = selection.select(runs, True, 0.05)
    assert best is leader
    assert f"restart 1 was stopped after mixture sweep {first}, out of reach" in reason
    assert "successive halving" not in reason


def test_a_restart_within_reach_runs_to_the_end() -> None:
    """Near-tied (10 nats apart, within 4 gaps of 3): both run to convergence, as without
    the rule; the same with the restarts in threads."""

    def threads(fn, runs):
        import threading

        ts = [threading.Thread(target=fn, args=(run,)) for run in runs]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    for map_runs in (None, threads):
        runs = _scripted_race({0: -10_000.0, 1: -10_010.0}, 0.95, map_runs)
        assert all(run.converged and not run.dropped for run in runs)
    far = [_scripted_race({0: -1e4, 1: -1.1e4}, 0.95, m)[1].pruned_at for m in (None, threads)]
    assert far[0] == far[1] is not None
