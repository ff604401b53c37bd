"""``settle.settle_items``: each item's block solved with the annotators held, and the stop it
may undo (``acceleration.make_settle``, ``stopping.advance``)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_extensions import EXTENSIONS, problem_and_state
from test_properties import crowds

from ordmix_core import OrdinalMixture
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import acceleration, restarts, settle, stopping
from ordmix_core.vb import sweep

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def web_item() -> tuple[sweep.Problem, sweep.State]:
    """One item of the Web set (web-zhou2014, seed 2), rated 4, 3, 4, 1, 5, 5, with its six
    raters' factors and the hyperparameters where the default fit stopped (rounded). It
    stopped at 3.75 with the 1 called spam; a 100x tighter fit ended at 3.41, the 1 let in."""
    p = sweep.Problem.create(
        Scale(np.arange(1.0, 6.0)), pi=np.full(5, 0.2), mu=3.0, lam=0.1,
        phi=2.0, eta=1.0, ordinal=True, spam=True, exact=True, n_per_ann=np.full(6, 100),
        n_categories=1, bias=True, spam_dist="global",
    )  # fmt: skip
    p = p.with_ratings(np.arange(6), np.zeros(6), np.zeros(6), np.array([3, 2, 3, 0, 4, 4]), 1)
    s = sweep.State(
        mu_m=np.array([3.7502]), lam_m=np.array([7.1456]),
        tau_shape=np.array([423.13, 195.84, 444.63, 138.66, 34.268, 38.350]),
        tau_rate=np.array([300.57, 154.80, 288.39, 113.63, 26.115, 30.781]),
        delta_shape=np.array([3.5751]), delta_rate=np.array([2.2337]),
        eps=np.array([1 - 1e-10, 0.80939, 1 - 1e-10, 0.84337, 0.075699, 0.40129]),
        alpha=31.115, beta=23.980,
        bias_mean=np.array([-0.16944, -0.011239, -0.10267, -0.20678, -0.033541, -0.079202]),
        bias_prec=np.array([2236.6, 884.85, 2607.1, 580.10, 75.221, 86.207]), lam_b=56.803,
        pi=np.array([0.085364, 0.043541, 0.054127, 0.16494, 0.65203]), kappa=50.0,
    )  # fmt: skip
    return p, s


def test_an_item_at_a_slow_point_of_its_own_is_settled() -> None:
    p, s = web_item()
    # ten rounds barely move it: it is at a slow point, not at its block's optimum
    few, _ = settle.settle_items(p, s, max_rounds=10, drop=0.0, floor=0.0)
    assert few.mu_m[0] > 3.74
    new, moved = settle.settle_items(p, s)
    assert new.mu_m[0] == pytest.approx(3.42, abs=0.02)  # the tighter fit's 3.41, annotators held
    assert moved[0] == pytest.approx(s.mu_m[0] - new.mu_m[0])
    # where it ends is the block's fixed point, to within what the rounds leave (DROP)
    again, _ = settle.settle_items(p, new, drop=0.0, floor=0.0)
    assert abs(again.mu_m[0] - new.mu_m[0]) < settle.DROP
    # and the 1 is no longer called spam there (q(y) of the next sweep, annotators held)
    swept, _ = sweep.sweep(p, new)
    assert swept.omega[3] > 0.5 > sweep.sweep(p, s)[0].omega[3]


def _sweeps(p: sweep.Problem, s: sweep.State, n: int) -> tuple[sweep.State, float]:
    f = -np.inf
    for _ in range(n):
        s, f = sweep.sweep(p, s)
    return s, f


@FAST
@given(crowds(), st.sampled_from(["instance", "query"]), st.sampled_from(EXTENSIONS),
       st.integers(1, 4), st.integers(0, 2**6 - 1))  # fmt: skip
def test_the_next_sweep_never_falls_below_the_last_and_only_the_blocks_move(
    crowd, gran, ext, n, bits
):
    df, scale = crowd  # the scale it was drawn on: a level far from the used ones is no typo
    p, s = problem_and_state(df, gran, *ext, scale=scale)
    s, f = _sweeps(p, s, n)
    named = (bits >> np.arange(p.n_annotators)) % 2 == 1  # the annotators whose blocks move
    new, moved = settle.settle_items(p, s, named)
    _, f_next = sweep.sweep(p, new)
    assert f_next >= f - 1e-9 * max(1.0, abs(f))
    assert np.allclose(moved, np.abs(new.mu_m - s.mu_m))
    for name in ("tau_shape", "tau_rate", "eps", "bias_mean", "bias_prec"):
        a, b = getattr(s, name), getattr(new, name)
        assert (a is None and b is None) or np.array_equal(a[~named], b[~named]), name
    for name in ("pi", "dir_a", "alpha", "beta", "lam_b"):
        a, b = getattr(s, name), getattr(new, name)
        assert (a is None and b is None) or np.array_equal(a, b), name
    if not np.array_equal(p.cat_l, p.inst):  # a query's difficulty spans other items: held
        assert np.array_equal(new.delta_rate, s.delta_rate)


def test_gold_items_are_not_moved() -> None:
    crowd = simulate_crowd(n_items=60, n_annotators=8, spammer_share=0.3, random_state=4)
    p, s = problem_and_state(crowd.ratings, "instance", True, "global", gold_every=3)
    s, _ = _sweeps(p, s, 3)
    new, moved = settle.settle_items(p, s)
    gold = p.gold_mask
    assert np.array_equal(new.mu_m[gold], s.mu_m[gold]) and not moved[gold].any()
    assert np.array_equal(new.delta_rate[gold], s.delta_rate[gold])
    assert moved[~gold].max() > 0


def test_own_ratings_solve_the_gold_items_as_if_they_were_not_gold() -> None:
    crowd = simulate_crowd(n_items=60, n_annotators=8, spammer_share=0.3, random_state=4)
    p, s = problem_and_state(crowd.ratings, "instance", True, "global", gold_every=3)
    s, _ = _sweeps(p, s, 3)
    mu = settle.own_ratings(p, s)
    gold = p.gold_mask
    # everything but the gold items is held
    assert np.array_equal(mu[~gold], s.mu_m[~gold])
    # each gold item as the blocks of the problem without gold solve it (items' blocks are
    # independent with the annotators held)
    free, _ = settle.settle_items(p.with_gold(None), s)
    np.testing.assert_allclose(mu[gold], free.mu_m[gold], rtol=0, atol=1e-12)
    assert np.abs(mu[gold] - s.mu_m[gold]).max() > 0.1  # the gold was imposed, now it is not
    # without gold: the state's own
    plain = p.with_gold(None)
    assert settle.own_ratings(plain, s) is s.mu_m


class _Engine:
    """settle_items that moves the first item by ``move``, and counts its calls."""

    def __init__(self, move: float) -> None:
        self.move, self.calls, self.annotators = move, 0, None

    def settle_items(self, state, annotators):
        self.calls += 1
        self.annotators = annotators
        moved = np.zeros(3)
        moved[0] = self.move
        return SimpleNamespace(eps=state.eps, settled=state), moved


def _stop() -> SimpleNamespace:
    return SimpleNamespace(eps=np.full(3, 0.5))


def test_a_stop_is_undone_only_when_an_item_moves_by_a_share_of_tol_estimate() -> None:
    stop = _stop()
    edge = acceleration.SETTLE_MOVE * 0.01
    assert 0 < edge < 0.01
    run = restarts.RestartRun(0, "random", stop, polish_from=2, changes=[1.0] * 9)
    # annotator 1 leaving 1 (1 - eps grows by 5% a sweep), the others settled
    run.eps_window.extend(np.array([0.3, 1 - 1e-3 * 1.05**k, 0.7]) for k in range(15))
    engine = _Engine(edge * 0.99)
    small = acceleration.make_settle(engine, True)
    assert small(run, 0.01) is False and run.state is stop and run.polish_from == 2
    # the annotators whose blocks are solved: those still moving over the window
    assert engine.annotators.tolist() == [False, True, False]
    big = acceleration.make_settle(_Engine(edge), True)
    assert big(run, 0.01) is True and run.state.settled is stop
    assert run.polish_from == 9 and not run.eps_window  # the estimates' windows begin again
    assert big(run, 0.0) is False  # never with the bound-only rule
    assert acceleration.make_settle(_Engine(1.0), False) is None
    engine = _Engine(1.0)
    settle_fn = acceleration.make_settle(engine, True)
    run = restarts.RestartRun(0, "random", _stop())
    assert [settle_fn(run, 0.01) for _ in range(5)] == [True] * acceleration.MAX_SETTLES + [
        False
    ] * (5 - acceleration.MAX_SETTLES)
    assert engine.calls == acceleration.MAX_SETTLES


def test_advance_goes_on_from_a_settled_stop_in_the_mixture_only() -> None:
    """A run whose rule says converged, with a settle that moves it once: in the mixture it
    goes on until the rule holds again, a full set of its windows later; in a warm-up or a
    pre-stage the settle is not asked."""

    class Once(_Engine):
        def settle_items(self, state, annotators):
            state, moved = super().settle_items(state, annotators)
            return state, moved if self.calls == 1 else 0.0 * moved

    def step(run, spam):
        run.estimate_change = 0.0
        return -100.0

    for key, expect in ((True, 2), (False, 0), ("uniform", 0)):
        engine, start = Once(1.0), _stop()
        run = restarts.RestartRun(0, "random", start)
        settle_fn = acceleration.make_settle(engine, True)
        stopping.advance(run, step, key, 200, 200, 1e-6, None, 0, None, 0.03, settle_fn)
        assert run.converged and engine.calls == expect
        if key is True:
            assert run.state.settled is start
            assert len(run.trace) - run.polish_from == stopping.MIN_PLAIN_SWEEPS


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_default_fit_settles_only_with_the_exact_eps_step(monkeypatch) -> None:
    """The default (learned spam distribution) asks at its finalists' stops; the paper's
    model never (its fits are unchanged)."""
    calls = []
    real = settle.settle_items

    def spy(p, s, *args, **kwargs):
        calls.append(1)
        return real(p, s, *args, **kwargs)

    monkeypatch.setattr("ordmix_core.estimators.memory_engine.settle_items", spy)
    crowd = simulate_crowd(n_items=200, n_annotators=20, spammer_share=0.3, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OrdinalMixture(spam=True, random_state=0, n_restarts=3).fit(crowd.ratings)
        assert calls
        calls.clear()
        OrdinalMixture(model="paper", random_state=0, n_restarts=3).fit(crowd.ratings)
    assert not calls
