"""The race between restarts and its stopping rule (``race.py``), observed through real fits
and scripted restarts.

Successive halving (``prune_restarts``), the restart kinds and stages (``nospam_warmup``, the
shared warm-up and its branches), a restart out of reach of the leader, and the stopping rule
(``race.converged``): the bound's relative change below ``tol`` AND the estimated remaining
change of the items' means (Aitken, over windows of plain sweeps) below ``tol_estimate``, and
that of each annotator's reliability below ``tol_reliability``.
Each expectation is the rule as the estimator's docstring and README state it, applied to the
fit's own restarts table.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from _sweeps import record_sweeps

from ordmix_core import OrdinalMixture as _OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import race, restarts
from ordmix_core.fit.policy import DEFAULT, FitPolicy

#: the schedule of the paper's model (two stages per restart: warm-up, mixture); the
#: extended default adds a uniform-spam stage, tested in test_extensions.py
OrdinalMixture = functools.partial(_OrdinalMixture, model="paper")


@pytest.fixture(scope="module")
def crowd() -> pd.DataFrame:
    """Restarts of this crowd need tens of sweeps at tol 1e-4, so halving has rounds to do."""
    return simulate_crowd(
        n_items=80, n_annotators=10, ratings_per_item=4, spammer_share=0.3, random_state=4
    ).ratings


def _trace(model: OrdinalMixture, restart: int, stage: str = "mixture") -> np.ndarray:
    t = model.trace_
    sel = t[(t["restart"] == restart) & (t["stage"] == stage)].sort_values("iteration")
    return sel["lower_bound"].to_numpy()


# ------------------------------------------------------------------ successive halving


@pytest.mark.parametrize("prune_start", [3, 5])
def test_successive_halving_drops_the_worse_half_each_round(crowd, prune_start) -> None:
    """Rounds of prune_start, 2 prune_start, 4 prune_start ... mixture sweeps; after each, the
    worse half (by bound; none collapsed here) of the unfinished restarts is dropped, never
    below ``keep`` (2), which run to the end."""
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
        if alive <= DEFAULT.keep:
            assert len(cut) == 0
            break
        n_rounds += 1
        assert len(cut) == alive - max((alive + 1) // 2, DEFAULT.keep), (end, list(cut))
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
    assert pruned.restarts_["dropped"].sum() == 6 - DEFAULT.keep
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


# ------------------------------------------------------------------ restart kinds and stages


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


# ------------------------------------------------------------------ out of reach of the leader


def test_projected_gain_is_the_remaining_gain_of_a_geometric_climb() -> None:
    """On ``F_t = F - c r^t`` the projection from two windows is exactly ``c r^t``, the gain
    still to come; before two windows, or while the gain grows, it is unbounded; flat, 0."""
    w, c, r = DEFAULT.gain_window, 50.0, 0.9
    trace = [-100.0 - c * r**t for t in range(3 * w)]
    for t in range(2 * w, 3 * w):
        assert race.projected_gain(trace[: t + 1]) == pytest.approx(c * r**t, rel=1e-9)
    assert race.projected_gain(trace[: 2 * w]) == np.inf
    assert race.projected_gain([float(t) ** 2 for t in range(3 * w)]) == np.inf
    assert race.projected_gain([-7.0] * (3 * w)) == 0.0


def _scripted_race(limits: dict[int, float], rate: float, map_runs=None, park=None) -> list:
    """Restarts whose bound climbs geometrically (``rate`` per sweep) from ``limit - 1000``
    to ``limits[restart]``; the race of the shared schedule's last stage, no warm-up."""
    runs = [restarts.RestartRun(i, "data", None) for i in limits]

    def step(run, spam):
        t = len(run.trace)
        run.truth_share, run.estimate_change = 0.8, 0.0
        return limits[run.restart] - 1000.0 * rate ** (t + 1)

    race.race(
        runs, step, lambda run: None, spam=True, max_iter=2000, tol=1e-9, prune=True,
        prune_start=5, collapse_threshold=0.05, park=park,
        **({"map_runs": map_runs} if map_runs else {}),
    )  # fmt: skip
    return runs


def test_a_restart_out_of_reach_of_the_leader_stops() -> None:
    """Once halving is down to ``keep``, rounds of ``final_round`` sweeps; after each, a
    restart whose bound plus its projected gain is more than ``outrun_gaps`` near-tie gaps
    below the leader's stops (its projection needs two windows of sweeps first)."""
    rate = 0.95
    runs = _scripted_race({0: -10_000.0, 1: -10_500.0}, rate)
    leader, loser = runs
    assert leader.converged and not leader.dropped
    assert loser.dropped and loser.outrun and not loser.converged
    w, k = DEFAULT.gain_window, DEFAULT.final_round
    first = -(-(2 * w + 1) // k) * k  # the first round's end with two windows behind it
    assert loser.pruned_at == len(loser.trace) == first
    # what the rule saw there: 500 nats apart, far more than 4 gaps of 3 nats, projected exactly
    gap = DEFAULT.outrun_gaps * restarts.ensemble_gap(leader.trace[first - 1])
    assert leader.trace[first - 1] - loser.trace[-1] - 1000 * rate**first > gap
    best, reason, _ = restarts.select(runs, True, 0.05)
    assert best is leader
    assert f"restart 1 was stopped after mixture sweep {first}, out of reach" in reason
    assert "successive halving" not in reason


def test_the_engine_hears_of_each_restart_the_race_drops_once_as_it_drops_it() -> None:
    """``park``: called once for every restart halving or the out-of-reach stop drops, when
    it is marked dropped at its last sweep, and for no other restart."""
    heard = []

    def park(run):
        heard.append((run.restart, run.dropped, run.done, run.pruned_at == len(run.trace)))

    limits = {i: -10_000.0 - 300.0 * i for i in range(6)}
    runs = _scripted_race(limits, 0.95, park=park)
    dropped = sorted(run.restart for run in runs if run.dropped)
    assert len(dropped) == 5 and any(run.outrun for run in runs)  # halving, then the stop
    assert sorted(r for r, *_ in heard) == dropped
    assert all(flags == [True, True, True] for _, *flags in heard)


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


# ------------------------------------------------------------------ the stopping rule


def test_remaining_change_is_aitken_over_windows() -> None:
    w = DEFAULT.window
    geometric = [0.5**i for i in range(4 * w)]  # per sweep 1/2: per window r = 1/8
    now = sum(geometric[-w:])
    assert race.remaining_change(geometric) == pytest.approx(now * (1 / 8) / (1 - 1 / 8))
    assert race.remaining_change(geometric[: 2 * w - 1]) == np.inf  # not two windows yet
    # a plateau (or growth: a saddle being left) counts as 99 more windows of the same
    flat = [1e-4] * (2 * w)
    assert race.remaining_change(flat) == pytest.approx(3e-4 * 0.99 / 0.01)
    assert race.remaining_change([1e-5] * w + [1e-4] * w) == pytest.approx(3e-4 * 99)
    assert race.remaining_change([0.0] * (2 * w)) == 0.0


def test_remaining_changes_is_remaining_change_of_each_column() -> None:
    """Each column against the estimate written out in plain Python, and against the scalar
    form the stopping rule calls."""
    w, cap = DEFAULT.window, DEFAULT.max_rate

    def by_hand(col: list[float]) -> float:
        now, before = sum(col[-w:]), sum(col[-2 * w : -w])
        if now == 0.0:
            return 0.0
        r = min(max(now / before, 0.0), cap) if before > 0 else cap
        return now * r / (1.0 - r)

    rng = np.random.default_rng(3)
    c = rng.random((9, 6)) * rng.integers(0, 2, (9, 6))  # zeros too
    c[:, 0] = 0.0
    c[:, 1] = [0.5**i for i in range(9)]
    c[:, 2] = [1.1**i for i in range(9)]
    got = race.remaining_changes(c)
    for k in range(c.shape[1]):
        assert got[k] == pytest.approx(by_hand(list(c[:, k])), rel=1e-15, abs=0), k
        assert race.remaining_change(list(c[:, k])) == got[k]
    assert np.isinf(race.remaining_changes(c[: 2 * w - 1])).all()


def test_the_rule_holds_long_enough_to_see_a_decay_turn_into_growth() -> None:
    """Changes that decay by 0.6 a sweep for 10 sweeps, then grow by 15% a sweep (an
    annotator starting to leave a saddle; TREC RF10 restart 0 did this at the stop): held for
    2 windows the rule stops at the 11th sweep, before the growth shows in a window's ratio;
    held for ``hold_windows`` (4) it does not stop while the growth lasts."""
    changes = [0.02 * 0.6**i for i in range(10)] + [0.02 * 0.6**9 * 1.15**j for j in range(1, 40)]

    def first_stop(policy: FitPolicy) -> int | None:
        run = restarts.RestartRun(0, "warm", None, polish_from=0)
        for i, c in enumerate(changes):
            run.trace.append(-1000.0)  # the bound has settled
            run.changes.append(c)
            if len(run.trace) >= 2 and race.converged(run, 1e-6, 0.03, policy):
                return i + 1
        return None

    assert DEFAULT.hold_windows == 4
    assert first_stop(DEFAULT) is None
    assert first_stop(replace(DEFAULT, hold_windows=2)) == 11


def test_reliability_remaining_is_remaining_changes_of_each_annotators_eps() -> None:
    """Each annotator's column: the absolute changes of its eps from sweep to sweep, through
    ``remaining_changes`` (the items' Aitken); zeros until the window holds
    ``moving_min_sweeps`` sweeps."""
    rng = np.random.default_rng(5)
    window = [rng.random(4) for _ in range(DEFAULT.moving_min_sweeps + 3)]
    got = race.reliability_remaining(window, 4)
    for k in range(4):
        column = [abs(b[k] - a[k]) for a, b in zip(window, window[1:], strict=False)]
        assert got[k] == race.remaining_change(column)
    short = window[: DEFAULT.moving_min_sweeps - 1]
    np.testing.assert_array_equal(race.reliability_remaining(short, 4), np.zeros(4))


def test_the_rule_waits_for_an_annotator_drifting_slowly() -> None:
    """The items' half holds (their changes decay by half a sweep), while one annotator's eps
    drifts by 2e-4 a sweep (its remaining change a plateau's 99 windows, 0.059): the rule
    does not stop while a ``tol_reliability`` of 0.003 is asked, stops at the first sweep
    the items' half allows without one, and stops once the drift decays fast enough. The
    window is a run's ``Watch.eps_window`` (the rescues keep it)."""

    def first_stop(drift, tol_reliability: float) -> int | None:
        run = restarts.RestartRun(0, "warm", None, polish_from=0)
        eps = np.array([0.9, 0.4])
        for i in range(60):
            run.trace.append(-1000.0)  # the bound has settled
            run.changes.append(0.01 * 0.5**i)
            eps = eps - np.array([0.0, drift(i)])
            run.watch.eps_window.append(eps.copy())
            del run.watch.eps_window[: -DEFAULT.flip_window]
            if len(run.trace) >= 2 and race.converged(run, 1e-6, 0.03, DEFAULT, tol_reliability):
                return i + 1
        return None

    def plateau(i: int) -> float:
        return 2e-4

    def decaying(i: int) -> float:
        return 2e-4 * 0.7**i

    items_alone = first_stop(plateau, 0.0)
    assert items_alone == DEFAULT.min_plain_sweeps
    assert first_stop(plateau, 0.003) is None
    assert first_stop(plateau, 0.06) == items_alone  # 0.059 is within it
    stop = first_stop(decaying, 0.003)
    assert stop is not None and stop >= items_alone
    assert race.reliabilities_settled([np.ones(2)] * 3, 1e-12)  # too short a window to tell


def test_an_annotator_held_at_an_end_by_a_slope_falling_to_zero_has_not_settled() -> None:
    """Three annotators over the plain sweeps: one at eps 1 - 1e-10 whose slope (the
    derivative of its block's bound at the end, positive holding it there) falls by a tenth
    a sweep towards 0; one at the same end with a steady slope; one inside (0, 1) with the
    first one's slopes. Only the first holds the stop; the same slope pointing inwards
    (negative at 1) holds it too, as does the first at eps 1e-10 with the slopes negated.
    Without the annotators' halves (``tol_reliability`` 0) or with fewer than
    ``moving_min_sweeps`` slopes, nothing holds it."""
    n_sweeps = DEFAULT.flip_window
    falling = [0.01 * 0.9**k for k in range(n_sweeps)]
    eps = [np.array([1 - 1e-10, 1 - 1e-10, 0.6])] * n_sweeps

    def slopes(first: list[float]) -> list[np.ndarray]:
        return [np.array([s, 5.0, s]) for s in first]

    assert not race.ends_settled(eps, slopes(falling), 0.003)
    steady = [np.array([5.0, 5.0, s]) for s in falling]
    assert race.ends_settled(eps, steady, 0.003)  # the inside one's falling slope is no matter
    inwards = [np.array([-1e-3 - 1e-5 * k, 5.0, 0.0]) for k in range(n_sweeps)]
    assert not race.ends_settled(eps, inwards, 0.003)
    steady_inwards = [np.array([-1e-3, 5.0, 0.0])] * n_sweeps  # no trend: its sign alone
    assert not race.ends_settled(eps, steady_inwards, 0.003)
    at_zero = [np.array([1e-10, 1 - 1e-10, 0.6])] * n_sweeps
    negated = [np.array([-s, 5.0, s]) for s in falling]
    assert not race.ends_settled(at_zero, negated, 0.003)
    assert race.ends_settled(eps, slopes(falling), 0.0)
    short = DEFAULT.moving_min_sweeps - 1
    assert race.ends_settled(eps[:short], slopes(falling)[:short], 0.003)
    # a slope shrinking by a hundredth a sweep to a positive floor: it never reaches 0
    floor = [np.array([1.0 + 0.99**k * 1e-2, 5.0, 0.0]) for k in range(n_sweeps)]
    assert race.ends_settled(eps, floor, 0.003)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_pinned_slope_holds_the_stop_while_its_trend_reaches_0_within_the_plateau(sign) -> None:
    """A slope at the clip falling linearly by 1e-4 a sweep holds the stop when it reaches 0
    within ``plateau_sweeps`` of the last sweep, and not when that is farther; the same at
    eps 0 with the slopes negated."""
    n_sweeps = DEFAULT.flip_window
    end = 1 - 1e-10 if sign > 0 else 1e-10
    eps = [np.array([end])] * n_sweeps
    for sweeps_to_zero, holds in ((0.9 * DEFAULT.plateau_sweeps, True),
                                  (1.1 * DEFAULT.plateau_sweeps, False)):  # fmt: skip
        last = 1e-4 * sweeps_to_zero
        w = [np.array([sign * (last + 1e-4 * (n_sweeps - 1 - k))]) for k in range(n_sweeps)]
        assert race.ends_settled(eps, w, 0.003) is not holds, sweeps_to_zero


def test_an_annotator_near_an_end_holds_the_stop_only_while_leaving_it() -> None:
    """Near an end but off its clip the slope is no matter: an annotator at eps 0.99952
    converging inwards by a crawl, its slope pointing inwards and shrinking (the 1M-rating
    simulated crowd's), does not hold the stop; one whose distance to 1 grows by half a sweep
    from 2.5e-7 (TREC's annotator after its slope crossed 0) holds it until it is past
    ``end_margin`` (``reliabilities_settled``'s from there); the same at 0. One growing slowly
    (below ``flip_growth``) does not."""
    n_sweeps = DEFAULT.flip_window
    inward = [np.array([-0.0035 * 0.995**k]) for k in range(n_sweeps)]
    crawl = [np.array([1 - 4.8e-4 * (1 + 1e-4 * (1 - 0.99**k))]) for k in range(n_sweeps)]
    assert race.ends_settled(crawl, inward, 0.003)
    off = [2.5e-7 * 1.5**k for k in range(n_sweeps)]
    assert not race.ends_settled([np.array([1 - d]) for d in off], inward, 0.003)
    assert not race.ends_settled([np.array([d]) for d in off], inward, 0.003)
    past = [np.array([1 - 1e-4 * 1.5**k]) for k in range(n_sweeps)]
    assert race.ends_settled(past, inward, 0.003)
    slow = [np.array([1 - 1e-4 * np.exp(0.5 * DEFAULT.flip_growth * k)]) for k in range(n_sweeps)]
    assert race.ends_settled(slow, inward, 0.003)
    # growth over the last window, not one sweep's jitter: 2 x flip_growth in the last sweep
    jitter = [np.array([1 - 1e-4])] * (n_sweeps - 1)
    jitter.append(np.array([1 - 1e-4 * np.exp(2.0 * DEFAULT.flip_growth)]))
    assert race.ends_settled(jitter, inward, 0.003)
