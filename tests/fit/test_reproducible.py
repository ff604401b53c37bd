"""Whole fits: the same bytes on any thread count or CPU, a stopping rule that means converged
(``race.converged``: against a 100x tighter tolerance, with a stop settled beside a slow
point), one meaning of max_iter, and what the near-tied restarts and the still-moving
annotators disagree on (the ensemble, the alternative answer). The rule's pieces:
``test_race.py``; thread independence: ``test_vb.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _shared import need

from ordmix_core import OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.errors import ConvergenceWarning
from ordmix_core.estimators import memory_engine
from ordmix_core.fit import rescues, restarts, settle
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.io import read_ratings
from ordmix_core.results import outputs, stability
from ordmix_core.vb import reference

# default fits of TREC, several per test (minutes in all): ``python -m pytest -m slow``
pytestmark = pytest.mark.slow

TREC = Path(__file__).resolve().parents[2] / "demo_data" / "trec-rf10-ratings.csv"


@pytest.fixture(scope="module")
def trec() -> pd.DataFrame:
    return read_ratings(TREC)


@pytest.fixture(scope="module")
def crowd() -> pd.DataFrame:
    return simulate_crowd(
        n_items=300, n_annotators=30, ratings_per_item=5, spammer_share=0.3, bias_sd=0.3,
        random_state=1,
    ).ratings  # fmt: skip


#: the real ``select`` and ``alternative``: a second ``_fit_keeping_runs`` in a test must not
#: wrap the first's spy (which would then overwrite the first fit's runs with the second's)
_SELECT = restarts.select
_ALTERNATIVE = rescues.alternative


def _fit_keeping_runs(monkeypatch, df: pd.DataFrame, **kw) -> tuple[OrdinalMixture, dict]:
    """A quiet fit and its restarts' final ``RestartRun`` by restart (taken at selection);
    under ``"alternative"``, when the fit made one, ``rescues.alternative``'s arguments
    ``(engine, state, window)`` and its result ``(state, bound, sweeps)``."""
    seen: dict = {}

    def spy(results, *args, **kwargs):
        seen.update({run.restart: run for run in results})
        return _SELECT(results, *args, **kwargs)

    def alternative_spy(engine, state, window, *args, **kwargs):
        out = _ALTERNATIVE(engine, state, window, *args, **kwargs)
        seen["alternative"] = ((engine, state, window), out)
        return out

    monkeypatch.setattr(restarts, "select", spy)
    monkeypatch.setattr(rescues, "alternative", alternative_spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = OrdinalMixture(**kw).fit(df)
    return m, seen


def _another_cpu() -> dict[str, str]:
    """The environment of a process that runs as on a CPU without this one's extensions:
    numpy's baseline loops only (``NPY_DISABLE_CPU_FEATURES``: every dispatch target this CPU
    has, AVX2 and AVX-512 among them) and OpenBLAS's Prescott kernels."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    found = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    return {"NPY_DISABLE_CPU_FEATURES": " ".join(found), "OPENBLAS_CORETYPE": "Prescott"}


@pytest.mark.slow
def test_the_default_fit_of_trec_writes_the_same_bytes_on_any_thread_count_or_cpu(tmp_path) -> None:
    """``ordmix fit`` of TREC RF10 (the default fit, seed 0) writes the same
    items.csv and annotators.csv, byte for byte, in a process whose numba pool has one thread,
    in one whose pool has two, and in one that runs as another CPU would (``_another_cpu``).
    The sweeps' sums run over chunks fixed by the data's size and are combined in a fixed
    order, whatever the threads (``kernels.passes``). Before that, one thread against two
    stopped the winner at 61 sweeps against 58 and moved estimates by up to 0.049. The
    elementwise math goes through ``libm`` and the erfcx table is stored (``erfcx_table``):
    before, numpy's AVX-512 exp and log moved the estimates by up to 3e-4 against an AVX2
    machine's, and OpenBLAS's kernel changed the table's last bits."""
    runs = {"1": {"NUMBA_NUM_THREADS": "1"}, "2": {"NUMBA_NUM_THREADS": "2"}, "cpu": _another_cpu()}
    for name, extra in runs.items():
        env = dict(os.environ, **extra)
        argv = ["fit", str(TREC), "--out", str(tmp_path / name), "--seed", "0"]
        done = subprocess.run(
            [sys.executable, "-m", "ordmix_core.cli.main", *argv],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    for name in ("items.csv", "annotators.csv"):
        one, two, cpu = (tmp_path / t / name for t in runs)
        assert one.read_bytes() == two.read_bytes() == cpu.read_bytes(), name
    assert len(pd.read_csv(tmp_path / "1" / "items.csv")) == 20026  # the whole fit, written


@pytest.mark.parametrize("which", ["simulated", pytest.param("trec", marks=pytest.mark.slow)])
def test_a_100x_tighter_tolerance_moves_the_winners_estimates_by_less_than_001(
    which, crowd, trec, monkeypatch
) -> None:
    """The winner of a 3-restart fit of a simulated crowd, and restart 0 of TREC RF10 (its
    per-item-means start; one restart keeps the test short). Measured on TREC: 0.0065 (80
    and 325 mixture sweeps; 0.0035 before the exact eps step, 0.085 with the rule held for 2
    windows, 0.38 before ``polish_tol``); the default 10-restart fit's winner:
    ``test_a_tighter_tolerance_continues_the_default_winners_path_on_trec``."""
    df = crowd if which == "simulated" else trec
    kw = dict(n_restarts=3 if which == "simulated" else 1, random_state=0)
    default, runs = _fit_keeping_runs(monkeypatch, df, **kw)
    assert default.converged_
    best = default.best_restart_
    base = OrdinalMixture()
    tight, tight_runs = _fit_keeping_runs(
        monkeypatch, df, tol=base.tol / 100, tol_estimate=base.tol_estimate / 100,
        max_iter=5000, **kw,
    )  # fmt: skip
    assert not tight_runs[best].dropped  # the same restart ran to the end in both
    moved = np.abs(runs[best].state.mu_m - tight_runs[best].state.mu_m)
    assert moved.max() < 0.01, moved.max()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_a_tighter_tolerance_continues_the_default_winners_path_on_trec(
    trec, monkeypatch, seed
) -> None:
    """The default 10-restart fit of TREC RF10 and the same with a 100x tighter tolerance:
    the plain sweeps start at ``polish_tol`` in both, so the tighter fit's winner sweeps
    exactly as the default's did (the same bound, sweep for sweep) and then goes on from
    where it stopped. Measured: seed 0, restart 1 wins both, 116 and 149 mixture sweeps,
    items move by at most 0.004; seed 1, restart 3, 69 and 290 sweeps, 0.004. Before the
    exact eps step (``step.make_step``) annotators left 0 or 1 by a few per cent a sweep
    and the tighter fit followed them for hundreds of sweeps: 0.006 at seed 0, 0.103 at seed
    1 (0.44 and 0.11 at seeds 2 and 3, now 0.001 and 0.001: ``docs/benchmarks.md``;
    ``test_a_stop_beside_an_annotators_slow_point_is_settled_on_trec``,
    ``test_a_settle_that_moves_an_item_by_a_third_of_tol_estimate_is_taken_on_trec``)."""
    default, runs = _fit_keeping_runs(monkeypatch, trec, random_state=seed)
    best = default.best_restart_
    base = OrdinalMixture()
    tight, tight_runs = _fit_keeping_runs(
        monkeypatch, trec, random_state=seed, tol=base.tol / 100,
        tol_estimate=base.tol_estimate / 100, max_iter=5000,
    )  # fmt: skip
    assert tight.best_restart_ == best
    n = len(runs[best].trace)
    assert len(tight_runs[best].trace) > n
    assert tight_runs[best].trace[:n] == runs[best].trace  # the same path, bit for bit
    moved = np.abs(runs[best].state.mu_m - tight_runs[best].state.mu_m)
    assert moved.max() < 0.01, moved.max()


@pytest.mark.slow
def test_a_stop_beside_an_annotators_slow_point_is_settled_on_trec(trec, monkeypatch) -> None:
    """Ten restarts on TREC RF10 at seed 3: the winner stops with annotator w241 (14 ratings) at eps
    0.999 and leaving it (still moving); a 100x tighter fit takes it to 0.78 over 87 more
    sweeps and moves one of its items by 0.10. Solving its block with its items at the stop
    (``rescues.Rescues.at_stop``) makes that move: the default ends within 0.01 of the tighter
    fit (0.001 measured, 90 mixture sweeps instead of 73), and without it 0.10 away (the
    settles of the plain sweeps' windows, ``window_settle_move``, left out too: they settle
    the same blocks earlier, and so is the stopping rule's annotators' half,
    ``reliability_share``, which alone gets within 0.01 too: 0.002, by sweeping on)."""
    default, runs = _fit_keeping_runs(monkeypatch, trec, n_restarts=10, random_state=3)
    best = default.best_restart_
    base = OrdinalMixture()
    tight, tight_runs = _fit_keeping_runs(
        monkeypatch, trec, n_restarts=10, random_state=3, tol=base.tol / 100,
        tol_estimate=base.tol_estimate / 100, max_iter=5000,
    )  # fmt: skip
    assert tight.best_restart_ == best
    moved = np.abs(runs[best].state.mu_m - tight_runs[best].state.mu_m)
    assert moved.max() < 0.01, moved.max()
    unsettled_policy = replace(DEFAULT, max_settles=0, window_settle_move=np.inf)
    for share, far in ((DEFAULT.reliability_share, False), (0.0, True)):
        policy = replace(unsettled_policy, reliability_share=share)
        monkeypatch.setattr(OrdinalMixture, "fit_policy", policy)
        unsettled, plain_runs = _fit_keeping_runs(monkeypatch, trec, n_restarts=10, random_state=3)
        assert unsettled.best_restart_ == best
        moved = np.abs(plain_runs[best].state.mu_m - tight_runs[best].state.mu_m)
        assert (moved.max() > 0.05) if far else (moved.max() < 0.01), (share, moved.max())


@pytest.mark.slow
def test_a_settle_that_moves_an_item_by_a_third_of_tol_estimate_is_taken_on_trec(
    trec, monkeypatch
) -> None:
    """Ten restarts on TREC RF10 at seed 2: the winner stops (58 mixture sweeps) with w708's eps at
    0.706 and still moving; a 100x tighter fit takes it to 0.693 and moves one of its items by
    0.013. The settle's rounds over w708's block, left at ``settle_drop_annotators``, move that
    item by 0.013 as well, which is ``settle_move`` of ``tol_estimate`` or more, so the run
    goes on from there (77 sweeps) and ends within 0.01 of the tighter fit (0.001 measured).
    Left at ``settle_drop`` the rounds stop at 0.703 (the item moves 0.0035), and undoing a
    stop only at ``tol_estimate`` keeps it: 0.013 either way (these two without the settles of
    the plain sweeps' windows, ``window_settle_move``, which reach the item earlier: 0.002
    with them, and without the stopping rule's annotators' half, ``reliability_share``, which
    sweeps on while w708 drifts: 0.002 with it)."""
    base = OrdinalMixture()
    _, tight_runs = _fit_keeping_runs(
        monkeypatch, trec, n_restarts=10, random_state=2, tol=base.tol / 100,
        tol_estimate=base.tol_estimate / 100, max_iter=5000,
    )  # fmt: skip

    def distance() -> float:
        default, runs = _fit_keeping_runs(monkeypatch, trec, n_restarts=10, random_state=2)
        best = default.best_restart_
        return float(np.abs(runs[best].state.mu_m - tight_runs[best].state.mu_m).max())

    assert distance() < 0.01
    no_window = replace(DEFAULT, window_settle_move=np.inf, reliability_share=0.0)
    monkeypatch.setattr(OrdinalMixture, "fit_policy", no_window)
    with monkeypatch.context() as m:
        m.setattr(
            memory_engine,
            "settle_items",
            partial(settle.settle_items, drop_annotators=DEFAULT.settle_drop),
        )
        assert distance() > 0.01
    monkeypatch.setattr(OrdinalMixture, "fit_policy", replace(no_window, settle_move=1.0))
    assert distance() > 0.01


@pytest.mark.slow
def test_a_stop_waits_for_slowly_drifting_annotators_on_metaphor(monkeypatch) -> None:
    """metaphor-novelty (``../shared/data``), ten restarts at seed 1: without the stopping
    rule's annotators' half (``reliability_share`` 0) the winner stops with annotators' eps
    still drifting a few 1e-4 a sweep, which a 100x tighter fit follows for hundreds of
    sweeps, moving items by 0.053 (and its alternative answer marks 679 items unstable). With
    it the stop waits for them: 0.005 from the tighter fit, no item unstable."""
    ratings = read_ratings(need("metaphor-novelty") / "ratings.csv")
    base = OrdinalMixture()
    tight, tight_runs = _fit_keeping_runs(
        monkeypatch, ratings, n_restarts=10, random_state=1, tol=base.tol / 100,
        tol_estimate=base.tol_estimate / 100, max_iter=5000,
    )  # fmt: skip
    for share, far in ((DEFAULT.reliability_share, False), (0.0, True)):
        monkeypatch.setattr(OrdinalMixture, "fit_policy", replace(DEFAULT, reliability_share=share))
        default, runs = _fit_keeping_runs(monkeypatch, ratings, n_restarts=10, random_state=1)
        best = default.best_restart_
        assert best == tight.best_restart_
        moved = np.abs(runs[best].state.mu_m - tight_runs[best].state.mu_m).max()
        assert (moved > 0.03) if far else (moved < 0.01), (share, moved)
        assert default.items_["unstable"].any() == far


@pytest.mark.slow
def test_a_stop_waits_for_an_annotator_whose_end_is_giving_way_on_trec(trec, monkeypatch) -> None:
    """TREC RF10 at query granularity, ten restarts at seed 1: an annotator with 27 ratings
    sits at eps 1 - 1e-10, held there by the slope of its block's bound, which falls towards 0
    and crosses it about 110 sweeps after where the fit stopped before (``race.ends_settled``);
    eps then leaves for 0.88 and its item moves 0.46. The fit now waits for it: within 0.01
    of a 100x tighter fit (0.004 measured), and 0.46 away without the rule's ends
    (``pinned_margin`` and ``end_margin`` 0)."""
    kw = dict(granularity="query", n_restarts=10, random_state=1)
    base = OrdinalMixture()
    tight, tight_runs = _fit_keeping_runs(
        monkeypatch, trec, tol=base.tol / 100, tol_estimate=base.tol_estimate / 100,
        max_iter=5000, **kw,
    )  # fmt: skip
    for margin, far in ((None, False), (0.0, True)):
        ends = {} if margin is None else dict(pinned_margin=margin, end_margin=margin)
        monkeypatch.setattr(OrdinalMixture, "fit_policy", replace(DEFAULT, **ends))
        default, runs = _fit_keeping_runs(monkeypatch, trec, **kw)
        best = default.best_restart_
        assert best == tight.best_restart_
        moved = np.abs(runs[best].state.mu_m - tight_runs[best].state.mu_m).max()
        assert (moved > 0.1) if far else (moved < 0.01), (margin, moved)


def test_tol_estimate_zero_is_the_bound_alone(crowd) -> None:
    """tol_estimate=0: a restart stops at the first sweep whose relative bound change is
    below tol (the bound alone decides), never later than with the estimates' rule."""
    kw = dict(n_restarts=1, random_state=0, model="paper")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bound = OrdinalMixture(tol_estimate=0.0, **kw).fit(crowd)
        full = OrdinalMixture(**kw).fit(crowd)
    f = bound.trace_[bound.trace_["stage"] == "mixture"]["lower_bound"].to_numpy()
    rel = np.abs(np.diff(f)) / np.abs(f[1:])
    assert rel[-1] < bound.tol and (rel[:-1] >= bound.tol).all()
    assert full.n_iter_ >= bound.n_iter_


# ------------------------------------------------------------------ max_iter


def test_max_iter_caps_all_sweeps_of_a_restart(crowd) -> None:
    """Warm-up (at most half), the uniform-spam stage and the mixture together."""
    m = OrdinalMixture(n_restarts=3, max_iter=30, random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=30"):
        m.fit(crowd)
    r = m.restarts_
    total = r["shared_iter"] + r["warmup_iter"] + r["uniform_iter"] + r["n_iter"]
    assert (total <= 30).all(), r
    assert (total[~r["dropped"]] == 30).all()  # the kept restarts used the whole cap
    assert (r["warmup_iter"] + r["shared_iter"] <= 15).all()
    t = m.trace_[m.trace_["restart"] == 0]
    assert len(t) <= 30


# ------------------------------------------------------------------ the ensemble


def test_stability_columns_mark_items_whose_level_or_estimate_differs() -> None:
    mu = np.array([[1.0, 2.4, 2.0, 3.0], [1.02, 2.6, 2.2, 3.0]])
    it = stability.item_stability(mu, np.array([1.0, 2.0, 3.0]), 1.0)
    np.testing.assert_allclose(it["estimate_spread"], [0.02, 0.2, 0.2, 0.0])
    # item 1: nearest level 2 vs 3; item 2: same level, spread 0.2 >= 0.1 step
    assert list(it["unstable"]) == [False, True, True, False]
    ann = stability.annotator_stability(np.array([[0.9, 0.6, 0.2], [0.8, 0.4, 0.3]]))
    assert list(ann["unstable"]) == [False, True, False]
    np.testing.assert_allclose(ann["reliability_spread"], [0.1, 0.2, 0.1])


def test_near_tied_restarts_that_disagree_mark_items_unstable_on_trec(
    trec, monkeypatch, tmp_path
) -> None:
    """Two restarts of TREC RF10 that end near-tied (the default fit's settings with two
    restarts, seed 64: bounds -120,525.3 and -120,529.3, within the gap of 12.1) but put items
    on different levels: the items they disagree on are unstable (565), recomputed here from
    the two states, and counted in summary.json. The settle at the stop leaves no annotator
    still moving, so the fit makes no alternative. Of two-restart fits of seeds 0-19 and
    60-65, seeds 4, 61, 63 and 64 end so; which seeds do depends on the fit's last bits (seed 4
    did not with the sweep's exp and log vectorised and libm's not)."""
    m, runs = _fit_keeping_runs(monkeypatch, trec, n_restarts=2, random_state=NEAR_TIED_SEED)
    assert m.ensemble_ == [m.best_restart_, 1 - m.best_restart_]
    assert abs(runs[0].lower_bound - runs[1].lower_bound) <= m.ensemble_gap_
    states = [runs[r].state for r in m.ensemble_]
    assert not m.annotators_["still_moving"].any()
    assert m.alternative_ is None and "alternative" not in runs
    mu = np.stack([s.mu_m for s in states])
    spread = mu.max(axis=0) - mu.min(axis=0)
    levels = np.array([1.0, 2.0, 3.0])
    nearest = levels[np.abs(mu[:, :, None] - levels).argmin(axis=2)]
    unstable = (nearest != nearest[0]).any(axis=0) | (spread >= stability.UNSTABLE_SPREAD_STEPS)
    assert unstable.sum() > 0  # they disagree
    np.testing.assert_allclose(m.items_["estimate_spread"], spread)
    assert (m.items_["unstable"].to_numpy() == unstable).all()
    eps = np.stack([s.eps for s in states])
    flips = ((eps >= 0.5) != (eps[0] >= 0.5)).any(axis=0)
    assert (m.annotators_["unstable"].to_numpy() == flips).all()
    outputs.write_fit_outputs(m, tmp_path, {})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["unstable_items"] == int(unstable.sum())
    assert summary["unstable_annotators"] == int(flips.sum())
    assert summary["ensemble"]["restarts"] == m.ensemble_
    items = pd.read_csv(tmp_path / "items.csv")
    assert int(items["unstable"].sum()) == int(unstable.sum())


#: a seed whose two TREC restarts end near-tied and disagree (found by trying seeds)
NEAR_TIED_SEED = 64


def test_the_default_fit_of_trec_marks_what_its_still_moving_annotators_decide(
    trec, monkeypatch, tmp_path
) -> None:
    """Ten restarts on TREC RF10 at seed 1: the winner ends with no other restart near its
    bound, but with an annotator still moving (w449). Carried across (mirrored), the answer ends 1.2
    nats lower, within the ensemble's gap, and moves 5 of 20,026 items by 0.1 or more: those
    items, and the annotator, are unstable. The alternative is recomputed here with the
    numpy reference sweep from the winner's state with exactly the still-moving reliabilities
    mirrored (it leaves its end), and its stop checked against ``polish_tol``. (At seed 0 the
    default fit ends with two restarts near-tied as well.)"""
    m, runs = _fit_keeping_runs(monkeypatch, trec, n_restarts=10, random_state=1)
    assert m.ensemble_ == [m.best_restart_]  # no near-tied restart: the alternative decides
    (engine, state, window), (alt, f_alt, n_alt) = runs["alternative"]
    best = runs[m.best_restart_]
    assert state is best.state and window is best.watch.eps_window
    moving = m.annotators_["still_moving"].to_numpy()
    assert 1 <= moving.sum() <= 5
    # both leave their end (none only drifts): the reference mirrors them by hand, then runs
    # plain numpy sweeps until the bound's relative change is below polish_tol
    leaving = rescues.escaping(window, DEFAULT.moving_growth)
    assert leaving.tolist() == np.flatnonzero(moving).tolist()
    p = engine.problems[True]
    s = state.copy()
    s.eps = np.where(moving, 1.0 - np.asarray(state.eps), np.asarray(state.eps))
    bounds = []
    while len(bounds) < 2 or abs(bounds[-1] - bounds[-2]) >= DEFAULT.polish_tol * abs(bounds[-1]):
        s, f = reference.sweep_numpy(p, s)
        bounds.append(f)
        assert len(bounds) <= DEFAULT.alternative_max_sweeps
    assert n_alt == len(bounds)
    assert f_alt == pytest.approx(bounds[-1], rel=1e-10)
    np.testing.assert_allclose(alt.mu_m, s.mu_m, rtol=0, atol=1e-7)
    gain = f_alt - best.lower_bound
    assert -m.ensemble_gap_ <= gain  # near-tied by the rule
    assert m.alternative_ == {
        "annotators": m.annotators_.index[moving].tolist(),
        "lower_bound": f_alt,
        "bound_above_winner": gain,
        "n_iter": n_alt,
        "near_tied": True,
    }
    # what the two answers disagree on, written out
    mu = np.stack([best.state.mu_m, s.mu_m])
    levels = np.array([1.0, 2.0, 3.0])
    nearest = levels[np.abs(mu[:, :, None] - levels).argmin(axis=2)]
    spread = np.abs(mu[1] - mu[0])
    unstable = (nearest[0] != nearest[1]) | (spread >= stability.UNSTABLE_SPREAD_STEPS)
    assert 1 <= unstable.sum() <= 100
    assert (m.items_["unstable"].to_numpy() == unstable).all()
    eps = np.stack([np.asarray(best.state.eps), np.asarray(s.eps)])
    sides = (eps[0] >= 0.5) != (eps[1] >= 0.5)
    assert (m.annotators_["unstable"].to_numpy() == sides).all() and sides[moving].all()
    # the estimates are the winner's: the alternative only marks
    np.testing.assert_array_equal(m.items_["z_mean"].to_numpy(), best.state.mu_m)
    outputs.write_fit_outputs(m, tmp_path, {})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["unstable_items"] == int(unstable.sum())
    alt_json = summary["ensemble"]["alternative"]
    assert alt_json["annotators"] == [str(a) for a in m.alternative_["annotators"]]
    assert alt_json["bound_above_winner"] == pytest.approx(gain)


# ------------------------------------------------------------------ selection wording


def test_a_stopped_fit_does_not_say_restarts_were_behind(crowd) -> None:
    """After a Stop the reason says the fit was stopped, which restarts were running, and
    that halving (not the bound at the end) pruned the others."""
    calls = []

    def stop_after(restart, iteration, f):
        calls.append(restart)
        return len(calls) < 80

    m = OrdinalMixture(n_restarts=6, prune_start=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(crowd, callback=stop_after)
    assert m.interrupted_
    reason = m.selection_reason_
    assert "behind" not in reason
    assert reason.startswith("the fit was stopped")
    if m.restarts_["dropped"].any():
        assert "had been pruned before the stop by successive halving" in reason


def test_a_stopped_fit_makes_no_alternative(monkeypatch) -> None:
    """A fit whose winner ends with an annotator still moving makes the alternative; the same
    fit reported as stopped (the user pressed Stop) does not sweep any further."""
    crowd = simulate_crowd(
        n_items=240, n_annotators=20, ratings_per_item=5, n_queries=6, spammer_share=0.3,
        random_state=1,
    ).ratings  # fmt: skip
    calls = []

    def alternative_spy(*args, **kwargs):
        calls.append(args)
        return _ALTERNATIVE(*args, **kwargs)

    monkeypatch.setattr(rescues, "alternative", alternative_spy)
    kw = dict(n_restarts=3, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done = OrdinalMixture(**kw).fit(crowd)
    assert len(calls) == 1 and done.alternative_ is not None
    schedule = OrdinalMixture._schedule
    monkeypatch.setattr(
        OrdinalMixture, "_schedule", lambda self, *a, **k: schedule(self, *a, **k) or True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stopped = OrdinalMixture(**kw).fit(crowd)
    assert stopped.interrupted_ and stopped.annotators_["still_moving"].any()
    assert len(calls) == 1 and stopped.alternative_ is None
