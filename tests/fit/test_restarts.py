"""A restart's start and the choice among restarts (``restarts.py``): a random start's noise,
the winner (``select``) and its collapse guard (``collapse_threshold``, an end-to-end
CollapseWarning, halving that never turns a healthy fit into a collapsed one), the ensemble
of near-tied restarts."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

from ordmix_core import OrdinalMixture as _OrdinalMixture
from ordmix_core.estimators.ordinal_mixture import CollapseWarning
from ordmix_core.fit import restarts
from ordmix_core.fit.restarts import RestartRun

#: the schedule of the paper's model (two stages per restart: warm-up, mixture); the
#: extended default adds a uniform-spam stage, tested in test_extensions.py
OrdinalMixture = functools.partial(_OrdinalMixture, model="paper")

# ------------------------------------------------------------------ the starts


def test_a_random_start_is_the_data_start_with_the_noise_of_a_branch() -> None:
    """Restart r > 0 starts from the per-item means plus the same keyed noise a restart that
    branches from the shared warm-up adds to the warm-up's means, so both kinds of start
    spread alike and any partition of the data draws the same noise."""
    sum_m, n_m = np.array([6.0, 2.0, 13.0]), np.array([2.0, 1.0, 3.0])
    hashes, key, thresholds = np.array([11, 22, 33], dtype=np.uint64), 7, np.array([0.5, 5.5])
    data, _ = restarts.init_instances(sum_m, n_m, hashes, key, 0, 3.0, 0.1, thresholds, 1.0)
    noisy, lam = restarts.init_instances(sum_m, n_m, hashes, key, 1, 3.0, 0.1, thresholds, 1.0)
    branched = restarts.branch_instances(data, hashes, key, thresholds, 1.0)
    np.testing.assert_array_equal(noisy, branched)
    assert not np.allclose(noisy, data) and np.all((noisy >= 0.5) & (noisy <= 5.5))
    np.testing.assert_array_equal(lam, 0.1 + n_m)


# ------------------------------------------------------------------ the winner and the ensemble


def test_select_skips_collapsed_and_says_why():
    def run(i, share, f):
        return RestartRun(i, "random", None, trace=[f - 1, f], done=True, truth_share=share)

    healthy, spam = run(0, 0.5, -120.0), run(1, 0.001, -100.0)
    best, reason, collapsed = restarts.select([healthy, spam], True, 0.05)
    assert best.restart == 0 and not collapsed
    assert "collapsed" in reason and "higher bound" in reason
    both = [run(0, 0.01, -120.0), run(1, 0.001, -100.0)]
    best, reason, collapsed = restarts.select(both, True, 0.05)
    assert best.restart == 1 and collapsed and "every finished restart collapsed" in reason
    # without the spam component nothing counts as collapsed
    best, _, collapsed = restarts.select(both, False, 0.05)
    assert best.restart == 1 and not collapsed


def test_ensemble_is_the_finished_healthy_restarts_within_the_gap() -> None:
    def run(i, f, dropped=False, share=0.9):
        return RestartRun(i, "warm", None, trace=[f], dropped=dropped, truth_share=share)

    best = run(0, -100_000.0)
    gap = restarts.ensemble_gap(best.lower_bound)
    assert gap == pytest.approx(10.0)  # 1e-4 relative, above the 3-nat floor
    assert restarts.ensemble_gap(-1000.0) == 3.0
    runs = [best, run(1, -100_009.0), run(2, -100_011.0), run(3, -100_001.0, dropped=True),
            run(4, -100_002.0, share=0.01)]  # fmt: skip
    assert [r.restart for r in restarts.ensemble(runs, best, True, 0.05)] == [0, 1]


# ------------------------------------------------------------------ the collapse guard


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
