"""The rescues (``rescues.py``) on toy engines: the annotator flips of the plain sweeps, the
window's settle and the escape step, ``still_moving``, the settle at a stop (through
``race.advance``), and the alternative answer."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import pytest

from ordmix_core import OrdinalMixture
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import race, rescues, restarts, settle, step
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.fit.restarts import RestartRun

#: plain sweeps per window of the flips and the window's settle
W = DEFAULT.flip_window


def _step(engine, accelerate: bool = True, exact_eps: bool = True):
    """The step with its rescues, as the estimator makes them (``EngineSteps._schedule``)."""
    hook = rescues.Rescues(engine, accelerate, accelerate and exact_eps)
    return step.make_step(engine, accelerate, exact_eps, hook)


def test_escaping_finds_a_geometric_escape_towards_the_other_side():
    """Over the window, ``1 - eps`` of a reliable annotator (``eps`` of an unreliable one)
    growing by more than ``flip_growth`` a sweep in log: growth 2% and 1% are found, 0.3%,
    a shrinking one and one at exactly 1 are not."""
    t = np.arange(W)[:, None]
    window = np.hstack(
        [
            1.0 - 1e-3 * 1.02**t,  # reliable, leaving at 2% a sweep
            1e-4 * 1.01**t,  # unreliable, leaving at 1%
            1.0 - 1e-3 * 1.003**t,  # reliable, 0.3%: below the threshold
            1.0 - 1e-2 * 0.97**t,  # reliable, settling
            np.ones_like(t, dtype=float),  # exactly 1: left out
        ]
    )
    assert rescues.escaping(list(window)).tolist() == [0, 1]
    assert rescues.escaping(list(window), growth=0.0025).tolist() == [0, 1, 2]


@dataclass
class _Toy:
    eps: np.ndarray
    omega: np.ndarray | None = None
    mu_m: np.ndarray | None = None


def test_flipped_mirrors_only_the_chosen_annotators():
    s = _Toy(np.array([0.9, 0.2, 0.6]), mu_m=np.zeros(2))
    f = rescues.flipped(s, np.array([0, 2]))
    np.testing.assert_allclose(f.eps, [0.1, 0.2, 0.4])
    np.testing.assert_array_equal(s.eps, [0.9, 0.2, 0.6])  # the state itself unchanged
    assert f.mu_m is s.mu_m


class _Escape:
    """A toy engine: each sweep moves ``1 - eps`` of annotator 0 up by 3% (a slow escape);
    the bound is ``sign * -sum(eps)``, so a flip raises it (``sign`` 1) or lowers it (-1)."""

    def __init__(self, sign: float) -> None:
        self.sign, self.sweeps = sign, 0

    def sweep(self, state, spam, history):
        self.sweeps += 1
        eps = state.eps.copy()
        eps[0] = 1.0 - (1.0 - eps[0]) * 1.03 if eps[0] > 0.5 else eps[0]
        new = _Toy(eps, np.ones(3))
        return new, self.sign * -float(eps.sum()), None

    def propose(self, *args):  # before the plain sweeps: SQUAREM finds no usable step
        return None

    swept = staticmethod(lambda state: True)
    truth_share = staticmethod(lambda state: 1.0)
    estimate_change = staticmethod(lambda before, after: 0.0)


def _escape_run(sign: float, accelerate: bool = True, polish: int | None = 0, n: int = W):
    """``n`` steps of the toy escape from the stopping rule's plain sweeps (``polish`` 0;
    None: before them), each appended to the trace as ``race.advance`` does;
    ``(engine, run, the bound after each step)``."""
    engine = _Escape(sign)
    take = _step(engine, accelerate)
    run = RestartRun(0, "warm", _Toy(np.array([1.0 - 1e-3, 0.99, 0.3])))
    run.polish_from = polish
    for _ in range(n):
        run.trace.append(take(run, True))
    return engine, run, run.trace


def test_a_flip_replaces_the_plain_sweep_when_it_raises_the_bound():
    """After ``flip_window`` plain sweeps the escaping annotator 0 is mirrored and swept once
    more (one extra sweep); the bound is higher, so that sweep is the step's result."""
    engine, run, fs = _escape_run(1.0)
    assert engine.sweeps == W + 1
    assert run.state.eps[0] < 0.5  # flipped: about 1e-3 * 1.03**W
    assert run.state.eps[1:].tolist() == [0.99, 0.3]  # not escaping: left alone
    assert fs[-1] == -float(run.state.eps.sum())
    assert np.all(np.diff(fs) >= 0)
    assert run.watch.eps_window == []  # a new window starts


def test_a_flip_that_lowers_the_bound_is_dropped():
    engine, run, fs = _escape_run(-1.0)
    assert engine.sweeps == W + 1  # tried
    assert run.state.eps[0] > 0.5  # but the plain sweep kept
    assert fs[-1] == float(run.state.eps.sum())


def test_no_flips_without_acceleration_or_before_the_plain_sweeps():
    for accelerate, polish in ((False, 0), (True, None)):
        engine, run, _ = _escape_run(1.0, accelerate, polish)
        assert engine.sweeps == W and run.state.eps[0] > 0.5


def test_the_plain_sweeps_keep_their_last_window_and_an_accepted_flip_empties_it():
    """The window slides over the last ``flip_window`` plain sweeps (a refused flip leaves it;
    flips are still tried every ``flip_window`` sweeps), is kept without acceleration too
    (for ``still_moving``), and starts again after an accepted flip."""
    w = W
    engine, run, _ = _escape_run(-1.0, n=w + 5)
    assert engine.sweeps == w + 5 + 1  # one try, at the w-th plain sweep
    assert len(run.watch.eps_window) == w
    np.testing.assert_array_equal(run.watch.eps_window[-1], run.state.eps)
    assert run.watch.eps_window[0][0] > 1.0 - 1e-3 * 1.03**6  # the 6th sweep's, not the 1st's
    engine, run, _ = _escape_run(-1.0, n=2 * w)
    assert engine.sweeps == 2 * w + 2  # tried again at 2w
    engine, run, _ = _escape_run(1.0, accelerate=False, n=w + 3)
    assert engine.sweeps == w + 3 and len(run.watch.eps_window) == w  # kept, never flipped
    engine, run, _ = _escape_run(1.0, n=w + 3)
    assert len(run.watch.eps_window) == 3  # the sweeps since the accepted flip


class _ItemsSettle(_Escape):
    """The toy engine with every annotator settled (no flip to try) and an items' settle
    (``settle_items``) that moves an item by ``move`` and marks the state; a sweep from a
    marked state has a bound ``gain`` higher than a plain sweep's."""

    def __init__(self, move: float, gain: float) -> None:
        super().__init__(1.0)
        self.move, self.gain, self.settles, self.asked = move, gain, 0, []

    def sweep(self, state, spam, history):  # the annotators stay where they are
        self.sweeps += 1
        new = _Toy(state.eps.copy(), mu_m=state.mu_m)
        return new, -float(new.eps.sum()) + (self.gain if state.mu_m is not None else 0.0), None

    def settle_items(self, state, annotators):
        self.settles += 1
        self.asked.append(np.asarray(annotators))
        return _Toy(state.eps.copy(), mu_m=np.ones(2)), np.array([0.0, self.move])


def _settle_run(move: float, gain: float, exact_eps: bool = True, n: int = 0):
    engine = _ItemsSettle(move, gain)
    take = _step(engine, True, exact_eps)
    run = RestartRun(0, "warm", _Toy(np.array([0.99, 0.98, 0.3])))  # none escaping
    run.polish_from = 0
    for _ in range(n or W):
        run.trace.append(take(run, True))
    return engine, run, run.trace


def test_a_window_without_a_flip_tries_the_items_settled_and_keeps_a_higher_bound():
    """At the ``flip_window``-th plain sweep, no annotator escaping: the items' blocks are
    solved (the still-moving annotators named: none here) and one sweep is made from there;
    its bound is higher, so it is the step's result."""
    w = W
    engine, run, fs = _settle_run(move=0.01, gain=1.0)
    assert engine.settles == 1 and engine.sweeps == w + 1
    assert not engine.asked[0].any() and engine.asked[0].shape == (3,)
    assert run.state.mu_m is not None  # the settled state's sweep
    assert fs[-1] - fs[-2] > 0.5 and np.all(np.diff(fs) >= 0)
    engine, run, _ = _settle_run(move=0.01, gain=1.0, n=2 * w - 1)
    assert engine.settles == 1  # the next try at 2w


def test_a_settle_that_moves_nothing_or_lowers_the_bound_is_not_kept():
    move = DEFAULT.window_settle_move
    engine, run, _ = _settle_run(move=0.5 * move, gain=1.0)
    assert engine.settles == 1 and engine.sweeps == W  # no sweep made
    assert run.state.mu_m is None
    engine, run, fs = _settle_run(move=move, gain=-1.0)
    assert engine.sweeps == W + 1  # tried
    assert run.state.mu_m is None and np.all(np.diff(fs) >= 0)  # the plain sweep kept


class _ItemEscape(_ItemsSettle):
    """The toy engine whose items' settle moves item 1 by ``moves[k]`` at the k-th window
    (``top`` names the item moved most, 1 unless given), and by 0.5 once annotator 2, item 1's
    rater (``raters``), is settled with it; a sweep from a settled state gains 1."""

    def __init__(self, moves, top=None, with_raters=True) -> None:
        super().__init__(0.0, 1.0)
        self.moves, self.top = list(moves), top
        if with_raters:
            self.raters = lambda item: np.isin(np.arange(3), [2]) & (item == 1)

    def settle_items(self, state, annotators):
        self.asked.append(np.asarray(annotators))
        self.settles += 1
        k = sum(1 for a in self.asked if not a[2]) - 1  # the k-th window's first settle
        moved = np.zeros(4)
        moved[1 if self.top is None else self.top[k]] = 0.5 if annotators[2] else self.moves[k]
        return _Toy(state.eps.copy(), mu_m=np.ones(2)), moved


def _item_escape_run(windows: int, **kw):
    engine = _ItemEscape(**kw)
    take = _step(engine)
    run = RestartRun(0, "warm", _Toy(np.array([0.99, 0.98, 0.3])))
    run.polish_from = 0
    for _ in range(windows * W):
        run.trace.append(take(run, True))
    return engine, run


def test_an_item_leaving_a_slow_point_faster_each_window_is_settled_with_its_raters():
    """Item 1 moves most at two windows running, more at the second (3e-4 after 2e-4): its
    raters' blocks are solved with it, which moves it by 0.5, and the sweep from there is
    kept (its bound is higher)."""
    engine, run = _item_escape_run(2, moves=[2e-4, 3e-4])
    assert engine.settles == 3  # one a window, and the second window's again with the rater
    assert engine.asked[2].tolist() == [False, False, True]
    assert run.state.mu_m is not None and run.trace[-1] - run.trace[-2] > 0.5
    assert run.watch.settle_top is None  # a move the sweep took: the next window starts afresh


@pytest.mark.parametrize(
    ("moves", "top", "with_raters"),
    [
        ([3e-4, 2e-4], None, True),  # shrinking: a slow point it is settling into
        ([2e-4, 3e-4], [1, 3], True),  # another item at the second window
        ([0.4e-4, 0.6e-4], None, True),  # growing, below escape_floor
        ([2e-4, 3e-3], None, True),  # the second window's settle moves enough by itself
        ([2e-4, 3e-4], None, False),  # an engine that cannot name raters
    ],
)
def test_no_raters_settled_unless_the_same_item_grows_from_the_floor(moves, top, with_raters):
    assert DEFAULT.escape_floor == 0.1 * DEFAULT.window_settle_move
    engine, run = _item_escape_run(2, moves=moves, top=top, with_raters=with_raters)
    assert engine.settles == 2 and not any(a[2] for a in engine.asked)


def test_the_escaping_item_remembers_the_last_window_only():
    """``settle_top`` keeps the last window's item and move; a move of ``window_settle_move``
    or an engine's single largest move leaves nothing to compare with."""
    run = RestartRun(0, "warm", None)
    item = rescues._escaping_item
    assert item(run.watch, np.array([0.0, 2e-4, 1e-4])) is None and run.watch.settle_top == (
        1,
        2e-4,
    )
    assert item(run.watch, np.array([0.0, 3e-4, 1e-4])) == 1 and run.watch.settle_top == (1, 3e-4)
    assert item(run.watch, np.array([0.0, 4e-4, 0.0])) == 1  # still growing: again
    assert item(run.watch, np.array([0.0, 2e-3, 0.0])) is None and run.watch.settle_top is None
    assert item(run.watch, np.array([0.0, 5e-4, 0.0])) is None  # a fresh start


def test_an_engine_that_returns_its_largest_move_names_its_top_item():
    """The Dask engine's settle returns only its largest move; its ``settle_top(restart)``
    names the item (any key its ``raters`` takes), and the escape step follows it."""
    run = RestartRun(0, "warm", None)
    item = rescues._escaping_item
    assert item(run.watch, np.array([2e-4]), ((1, 5), 2e-4)) is None and run.watch.settle_top == (
        (1, 5),
        2e-4,
    )
    assert item(run.watch, np.array([3e-4]), ((0, 5), 3e-4)) is None  # another block's item
    assert item(run.watch, np.array([4e-4]), ((0, 5), 4e-4)) == (0, 5)

    class Largest(_ItemEscape):
        def __init__(self) -> None:
            super().__init__([2e-4, 3e-4], with_raters=False)
            self.named, self.asked_for = [], []
            self.raters = lambda item: self.named.append(item) or np.array([False, False, True])

        def settle_items(self, state, annotators):
            new, moved = super().settle_items(state, annotators)
            self.last = (("block", int(np.argmax(moved))), float(moved.max()))
            return new, moved[[int(np.argmax(moved))]]  # the largest only

        def settle_top(self, restart):
            self.asked_for.append(restart)
            return self.last

    engine = Largest()
    take = _step(engine)
    run = RestartRun(4, "warm", _Toy(np.array([0.99, 0.98, 0.3])))
    run.polish_from = 0
    for _ in range(2 * W):
        run.trace.append(take(run, True))
    assert engine.named == [("block", 1)] and set(engine.asked_for) == {4}
    assert engine.settles == 3 and run.state.mu_m is not None


#: the small problem's annotator of each of its 8 ratings (``_small_memory_engine``)
SMALL_ANN = np.array([0, 1, 2, 3, 0, 1, 3, 2])


def _small_memory_engine():
    """``MemorySweeps`` over 8 ratings of 4 annotators (``SMALL_ANN``) on 3 items, 3 levels."""
    from ordmix_core.estimators.memory_engine import MemorySweeps
    from ordmix_core.vb import sweep

    p = sweep.Problem.create(
        Scale(np.arange(1.0, 4.0)), pi=np.full(3, 1 / 3), mu=2.0, lam=0.1, phi=2.0, eta=1.0,
        ordinal=True, spam=True, exact=True, n_per_ann=np.full(4, 2), n_categories=3,
    )  # fmt: skip
    inst = np.array([0, 0, 1, 1, 2, 2, 2, 1])
    return MemorySweeps(p.with_ratings(SMALL_ANN, inst, inst, np.zeros(8, dtype=int), 3))


def test_the_memory_engine_names_the_raters_of_items():
    engine = _small_memory_engine()
    assert engine.raters(1).tolist() == [False, False, True, True]
    assert engine.raters(2).tolist() == [True, True, False, True]


def test_no_window_settle_without_the_exact_eps_step():
    """Where the exact eps step does not apply (the earlier schedule, a uniform spam
    distribution), neither does the settle: as at a stop (``Rescues.at_stop``)."""
    engine, run, _ = _settle_run(move=0.01, gain=1.0, exact_eps=False)
    assert engine.settles == 0 and run.state.mu_m is None


def test_still_moving_marks_annotators_leaving_their_end_or_drifting():
    t = np.arange(W)[:, None]
    window = np.hstack(
        [
            1.0 - 1e-3 * 1.002**t,  # reliable, leaving at 0.2% a sweep (TREC's w294: 0.2-0.4%)
            1e-4 * 1.0005**t,  # unreliable, 0.05%: settled enough
            0.6 + 0.0 * t,  # still
            0.3 - 5e-4 * t,  # a steady drift (TREC's w420 at seed 1): 99 more windows of it
            0.3 + 0.05 * 0.5**t,  # settling fast: little left
        ]
    )
    expected = [True, False, False, True, False]
    assert rescues.still_moving(list(window), 5).tolist() == expected
    short = list(window[: DEFAULT.moving_min_sweeps - 1])
    assert rescues.still_moving(short, 5).tolist() == [False] * 5
    assert rescues.still_moving(list(window[: DEFAULT.moving_min_sweeps]), 5).tolist() == expected
    assert rescues.escaping(list(window)).tolist() == []  # below the flips' flip_growth
    # the drift is the stopping rule's estimate: 3 sweeps of 5e-4, the ratio clipped at 0.99
    assert 1.5e-3 * 0.99 / 0.01 > DEFAULT.moving_drift > 0.05 * 0.5**8


# ------------------------------------------------------------------ at a stop


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
    edge = DEFAULT.settle_move * 0.01
    assert 0 < edge < 0.01
    run = restarts.RestartRun(0, "random", stop, polish_from=2, changes=[1.0] * 9)
    # annotator 1 leaving 1 (1 - eps grows by 5% a sweep), the others settled
    run.watch.eps_window.extend(np.array([0.3, 1 - 1e-3 * 1.05**k, 0.7]) for k in range(15))
    engine = _Engine(edge * 0.99)
    assert rescues.Rescues(engine, True, True).at_stop(run, 0.01) is None
    assert run.state is stop and len(run.watch.eps_window) == 15
    # the annotators whose blocks are solved: those still moving over the window
    assert engine.annotators.tolist() == [False, True, False]
    big = rescues.Rescues(_Engine(edge), True, True)
    assert big.at_stop(run, 0.01).settled is stop
    assert not run.watch.eps_window  # the window begins again
    assert big.at_stop(run, 0.0) is None  # never with the bound-only rule
    assert rescues.Rescues(_Engine(1.0), True, False).at_stop(run, 0.01) is None  # no settles
    engine = _Engine(1.0)
    capped = rescues.Rescues(engine, True, True)
    run = restarts.RestartRun(0, "random", _stop())
    n = DEFAULT.max_settles
    assert [capped.at_stop(run, 0.01) is not None for _ in range(5)] == [True] * n + [False] * (
        5 - n
    )
    assert engine.calls == n == run.watch.settles


def test_advance_goes_on_from_a_settled_stop_in_the_mixture_only() -> None:
    """A run whose rule says converged, with a settle that moves it once: in the mixture it
    goes on until the rule holds again, a full set of its windows later; in a warm-up or a
    pre-stage the settle is not asked."""

    class Once(_Engine):
        def settle_items(self, state, annotators):
            state, moved = super().settle_items(state, annotators)
            return state, moved if self.calls == 1 else 0.0 * moved

    def flat(run, spam):  # the bound and the estimates settled from the first sweep
        run.estimate_change = 0.0
        return -100.0

    for key, expect in ((True, 2), (False, 0), ("uniform", 0)):
        engine, start = Once(1.0), _stop()
        run = restarts.RestartRun(0, "random", start)
        hook = rescues.Rescues(engine, True, True)
        race.advance(run, flat, key, 200, 200, 1e-6, None, 0, None, 0.03, hook)
        assert run.converged and engine.calls == expect
        if key is True:
            assert run.state.settled is start
            assert len(run.trace) - run.polish_from == DEFAULT.min_plain_sweeps


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


# ------------------------------------------------------------------ the alternative answer


class _Settling:
    """A toy engine for ``alternative``: the bounds it returns, one per sweep, in turn; the
    state records which sweep made it and whether it was swept as the mixture."""

    def __init__(self, bounds) -> None:
        self.bounds, self.calls = list(bounds), []

    def sweep(self, state, spam, history):
        self.calls.append((spam, history))
        return _Toy(state.eps, mu_m=np.array([len(self.calls)])), self.bounds.pop(0), None


def test_alternative_sweeps_from_its_start_until_the_bound_settles():
    """From ``alternative_start`` (here a settled window: the state itself), plain mixture
    sweeps (``spam`` True, no history) run until the bound's relative change is below
    ``polish_tol``; the last sweep's state and bound, and the count, are returned."""
    f = -1000.0
    tol = DEFAULT.polish_tol * 1000.0
    bounds = [f - 50, f - 5, f - 1, f - 1 + 1.5 * tol, f - 1 + 2.0 * tol, f]
    engine = _Settling(bounds)
    start = _Toy(np.array([0.9, 0.2, 0.6]))
    settled = [start.eps.copy() for _ in range(DEFAULT.moving_min_sweeps)]
    s, bound, n = rescues.alternative(engine, start, settled)
    assert n == 5 and bound == f - 1 + 2.0 * tol  # |change| 0.5 tol < tol: the fifth stops
    np.testing.assert_array_equal(s.eps, [0.9, 0.2, 0.6])
    assert s.mu_m.tolist() == [5]
    assert engine.calls == [(True, None)] * 5
    # at most alternative_max_sweeps; a non-finite bound ends it at once
    four = replace(DEFAULT, alternative_max_sweeps=4)
    s, bound, n = rescues.alternative(
        _Settling([f - 50 * i for i in range(9)]), start, settled, four
    )
    assert n == 4 and bound == f - 150
    s, bound, n = rescues.alternative(_Settling([f, -np.inf, f]), start, settled)
    assert n == 2 and bound == -np.inf


def test_alternative_start_mirrors_the_annotators_leaving_and_carries_on_those_drifting():
    """Over a window of ``moving_min_sweeps``: annotator 0 leaves its end (``1 - eps`` grows
    3% a sweep) and is mirrored; annotator 1 drifts down by changes that shrink by half a
    window (ratio 1/2 per window of ``window`` sweeps: the remaining change is the last
    window's sum again, 0.075), and is carried that far down; annotator 2 is settled;
    annotator 3 drifts up as fast, past 1, and stops at ``1 - eps_pack``. The state itself
    is left alone."""
    w, n = DEFAULT.window, DEFAULT.moving_min_sweeps
    moves = [0.05 * 0.5 ** (i // w) for i in range(n - 1)]  # per sweep, halving each window
    e1 = 0.4 - np.concatenate([[0.0], np.cumsum(moves)])  # 0.175, heading for 0.1
    e3 = 0.75 + np.concatenate([[0.0], np.cumsum(moves)])  # 0.975, heading for 1.05
    window = [np.array([1.0 - 1e-3 * 1.03**i, e1[i], 0.7, e3[i]]) for i in range(n)]
    state = _Toy(window[-1].copy())
    s = rescues.alternative_start(state, window)
    last = moves[-w:]
    before = moves[-2 * w : -w]
    r = sum(last) / sum(before)  # 1/2
    remaining = sum(last) * r / (1 - r)
    assert remaining == pytest.approx(0.075) and r == pytest.approx(0.5)
    assert rescues.still_moving(window, 4).tolist() == [True, True, False, True]
    np.testing.assert_allclose(s.eps[:3], [1e-3 * 1.03 ** (n - 1), e1[-1] - remaining, 0.7])
    assert s.eps[3] == 1 - DEFAULT.eps_pack
    np.testing.assert_array_equal(state.eps, window[-1])  # the winner's state unchanged
    # too few sweeps: nothing moves, nothing changes
    short = rescues.alternative_start(state, window[:-1])
    np.testing.assert_array_equal(short.eps, state.eps)


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "numpy"])
def test_the_memory_engines_slopes_are_the_eps_blocks_derivatives(jit, monkeypatch):
    """``MemorySweeps.eps_slopes``: each annotator's derivative of ``sum_l log(1 - e + e
    r_l)`` (``r_l`` its ratings' likelihood ratio, truth against spam, read from q(y) and the
    eps it was computed with) at its eps, written out here; None before a sweep."""
    from types import SimpleNamespace

    from ordmix_core.vb import kernels

    if jit and not kernels.HAVE_NUMBA:
        pytest.skip("numba not installed")
    monkeypatch.setattr(kernels, "USE_JIT", jit)
    engine, ann = _small_memory_engine(), SMALL_ANN
    omega = np.array([0.9, 0.2, 0.99, 0.5, 0.7, 0.1, 0.95, 0.6])
    used = np.array([0.8, 0.4, 0.9, 0.7])
    eps = np.array([0.85, 0.3, 1.0, 0.6])  # the third at 1: the slope at the clip
    state = SimpleNamespace(omega=omega, omega_eps=used, eps=eps)
    got = engine.eps_slopes(state)
    odds = lambda x: x / (1 - x)  # noqa: E731
    r = odds(omega) / odds(used[ann])
    e = np.clip(eps, 1e-10, 1 - 1e-10)[ann]
    expected = np.bincount(ann, weights=(r - 1) / (1 - e + e * r), minlength=4)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert engine.eps_slopes(SimpleNamespace(omega=None, omega_eps=used, eps=eps)) is None
