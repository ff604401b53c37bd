"""SQUAREM's pieces (``acceleration.py``): the one-process proposal and the same math split by group
and by block, as the Dask engine runs it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from scipy.special import expit, logit

from ordmix_core.data.scale import Scale
from ordmix_core.fit import acceleration
from ordmix_core.vb.sweep import State

LO, HI = 0.5, 5.5


def _states(seed: int = 0, m: int = 40, n: int = 6, c: int = 3, f: float = 0.8):
    """Three states along a slowly bending path (so the step length is usable)."""
    rng = np.random.default_rng(seed)

    def pos(k):
        return rng.gamma(3.0, 1.0, k)

    s0 = State(
        rng.uniform(1.5, 4.5, m), pos(m), pos(n), pos(n), pos(c), pos(c),
        rng.uniform(0.2, 0.9, n), 1.3, 0.7,
    )  # fmt: skip
    out = [s0]
    d = {
        g: 0.05 * rng.normal(size=np.shape(acceleration.group_value(s0, g)))
        for g in acceleration.GROUPS
    }
    for step in (1.0, 1.0 + f):
        kw = {}
        for g in acceleration.GROUPS:
            x = acceleration.group_value(s0, g)
            if g == "mu_m":
                kw[g] = x + step * d[g]
            elif g == "eps":
                kw[g] = expit(logit(x) + step * d[g])
            else:
                kw[g] = x * np.exp(step * d[g])
        alpha, beta = kw.pop("ab")
        out.append(State(**kw, alpha=float(alpha), beta=float(beta)))
    return out


def test_proposal_is_the_squarem_formula():
    s0, s1, s2 = _states()
    prop = acceleration.squarem_proposal(s0, s1, s2, LO, HI)
    assert prop is not None
    packed = [
        [acceleration.pack(g, acceleration.group_value(s, g)) for g in acceleration.GROUPS]
        for s in (s0, s1, s2)
    ]
    r = [b - a for a, b in zip(packed[0], packed[1], strict=True)]
    v = [c - 2 * b + a for a, b, c in zip(*packed, strict=True)]
    nr = np.sqrt(sum(float(x @ x) for x in r))
    nv = np.sqrt(sum(float(x @ x) for x in v))
    a = -min(nr / nv, acceleration.MAX_STEP)
    assert a <= -1.0
    q = [p - 2 * a * rx + a * a * vx for p, rx, vx in zip(packed[0], r, v, strict=True)]
    np.testing.assert_allclose(prop.mu_m, np.clip(q[0], LO, HI), rtol=1e-12)
    np.testing.assert_allclose(prop.lam_m, np.exp(q[1]), rtol=1e-12)
    np.testing.assert_allclose(prop.eps, expit(q[6]), rtol=1e-12)
    assert [prop.alpha, prop.beta] == pytest.approx(np.exp(q[7]), rel=1e-12)


def test_split_by_block_gives_the_same_proposal():
    """Per-instance groups in two blocks, the rest on a 'client': norms summed per group."""
    s0, s1, s2 = _states(seed=1)
    ref = acceleration.squarem_proposal(s0, s1, s2, LO, HI)
    inst = ("mu_m", "lam_m")
    halves = (slice(0, 17), slice(17, None))
    r2, v2 = np.zeros(len(acceleration.GROUPS)), np.zeros(len(acceleration.GROUPS))
    terms = {}
    for i, g in enumerate(acceleration.GROUPS):
        vals = [acceleration.group_value(s, g) for s in (s0, s1, s2)]
        parts = [tuple(x[h] for x in vals) for h in halves] if g in inst else [tuple(vals)]
        terms[g] = [acceleration.group_terms(g, *p) for p in parts]
        for _, r, v in terms[g]:
            gr, gv = acceleration.sq_norms(r, v)
            r2[i] += gr
            v2[i] += gv
    a = acceleration.step_length(r2.tolist(), v2.tolist())
    assert a is not None
    for g in acceleration.GROUPS:
        x = np.concatenate([acceleration.extrapolate(g, *t, a, LO, HI) for t in terms[g]])
        want = acceleration.group_value(ref, g)
        np.testing.assert_allclose(x, want, rtol=1e-12)


def test_step_length_limits():
    assert acceleration.step_length([4.0, 0.0], [1.0]) == -2.0
    assert acceleration.step_length([1e6], [1.0]) == -acceleration.MAX_STEP
    assert acceleration.step_length([0.25], [1.0]) is None  # shorter than a plain double step
    assert acceleration.step_length([0.0], [1.0]) is None
    assert acceleration.step_length([1.0], [0.0]) is None
    assert acceleration.step_length([np.inf], [1.0]) is None
    assert acceleration.step_length([np.nan], [1.0]) is None


def test_extrapolate_clips_and_rejects():
    z = np.zeros(3)
    mu = acceleration.extrapolate("mu_m", np.array([0.0, 3.0, 9.0]), z, z, -2.0, LO, HI)
    np.testing.assert_array_equal(mu, [LO, 3.0, HI])
    eps = acceleration.extrapolate("eps", np.array([-800.0, 0.0, 800.0]), z, z, -2.0, LO, HI)
    np.testing.assert_array_equal(eps, [1e-10, 0.5, 1 - 1e-10])
    assert (
        acceleration.extrapolate("lam_m", np.array([0.0, np.nan]), z[:2], z[:2], -2.0, LO, HI)
        is None
    )
    assert (
        acceleration.extrapolate("ab", np.array([0.0, np.nan]), z[:2], z[:2], -2.0, LO, HI) is None
    )
    tiny = acceleration.extrapolate("ab", np.array([0.0, -800.0]), z[:2], z[:2], -2.0, LO, HI)
    np.testing.assert_allclose(tiny, [1.0, np.exp(-700.0)])  # clipped, still positive
    ok = acceleration.extrapolate("tau_rate", np.log([2.0, 3.0]), z[:2], z[:2], -2.0, LO, HI)
    np.testing.assert_allclose(ok, [2.0, 3.0])


def test_no_direction_gives_none():
    s0, _, _ = _states(seed=2)
    assert acceleration.squarem_proposal(s0, s0, s0, LO, HI) is None


@pytest.mark.filterwarnings("ignore::ordmix_core.errors.ConvergenceWarning")
def test_history_keeps_the_older_state_without_omega(monkeypatch):
    """``make_step`` keeps the state two sweeps back without its per-rating omega (memory),
    the current one whole, and the fit is bit-identical to keeping both whole."""
    from ordmix_core.data.simulate import simulate_crowd
    from ordmix_core.estimators.ordinal_mixture import OrdinalMixture

    ratings = simulate_crowd(
        n_items=150, n_annotators=12, ratings_per_item=4, random_state=3
    ).ratings
    kept = []
    real = acceleration.for_history

    def spy(s):
        out = real(s)
        kept.append((s, out))
        return out

    monkeypatch.setattr(acceleration, "for_history", spy)
    kw = dict(n_restarts=2, max_iter=40, random_state=1, n_jobs=1)
    lean = OrdinalMixture(**kw).fit(ratings)
    assert kept and all(s.omega is not None and out.omega is None for s, out in kept)
    assert all(
        np.array_equal(acceleration.group_value(s, g), acceleration.group_value(out, g))
        for s, out in kept
        for g in acceleration.GROUPS
    )
    monkeypatch.setattr(acceleration, "for_history", lambda s: s)
    whole = OrdinalMixture(**kw).fit(ratings)
    assert lean.trace_.equals(whole.trace_)
    np.testing.assert_array_equal(lean.omega_, whole.omega_)
    np.testing.assert_array_equal(lean.estimates_.to_numpy(), whole.estimates_.to_numpy())


@pytest.mark.filterwarnings("ignore::ordmix_core.errors.ConvergenceWarning")
def test_the_sweep_from_a_proposal_runs_without_the_omega_of_the_state_before(monkeypatch):
    """While the proposal is swept, the per-rating omega of the state the step swept from is
    gone (8 bytes a rating: 80 MB of the 10M-rating fit's peak), also when the step started
    from that state with its block-optimal eps (``eps_start``, which shares the omega)."""
    import weakref

    from ordmix_core.data.simulate import simulate_crowd
    from ordmix_core.estimators import memory_engine
    from ordmix_core.estimators.ordinal_mixture import OrdinalMixture

    ratings = simulate_crowd(
        n_items=150, n_annotators=12, ratings_per_item=4, random_state=3
    ).ratings
    before, alive = [], []
    real_history, real_proposal = (
        acceleration.for_history,
        memory_engine.MemorySweeps.sweep_proposal,
    )

    def spy_history(s):
        before.append(weakref.ref(s.omega))
        return real_history(s)

    def spy_proposal(self, proposal, spam, states):
        alive.append(before[-1]() is not None)
        return real_proposal(self, proposal, spam, states)

    monkeypatch.setattr(acceleration, "for_history", spy_history)
    monkeypatch.setattr(memory_engine.MemorySweeps, "sweep_proposal", spy_proposal)
    OrdinalMixture(n_restarts=1, max_iter=40, random_state=1, n_jobs=1).fit(ratings)
    assert len(alive) >= 3 and not any(alive)


def test_escaping_finds_a_geometric_escape_towards_the_other_side():
    """Over the window, ``1 - eps`` of a reliable annotator (``eps`` of an unreliable one)
    growing by more than ``FLIP_GROWTH`` a sweep in log: growth 2% and 1% are found, 0.3%,
    a shrinking one and one at exactly 1 are not."""
    t = np.arange(acceleration.FLIP_WINDOW)[:, None]
    window = np.hstack(
        [
            1.0 - 1e-3 * 1.02**t,  # reliable, leaving at 2% a sweep
            1e-4 * 1.01**t,  # unreliable, leaving at 1%
            1.0 - 1e-3 * 1.003**t,  # reliable, 0.3%: below the threshold
            1.0 - 1e-2 * 0.97**t,  # reliable, settling
            np.ones_like(t, dtype=float),  # exactly 1: left out
        ]
    )
    assert acceleration.escaping(list(window)).tolist() == [0, 1]
    assert acceleration.escaping(list(window), growth=0.0025).tolist() == [0, 1, 2]


@dataclass
class _Toy:
    eps: np.ndarray
    omega: np.ndarray | None = None
    mu_m: np.ndarray | None = None


def test_flipped_mirrors_only_the_chosen_annotators():
    s = _Toy(np.array([0.9, 0.2, 0.6]), mu_m=np.zeros(2))
    f = acceleration.flipped(s, np.array([0, 2]))
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


def _escape_run(
    sign: float, accelerate: bool = True, polish: int | None = 0, n: int = acceleration.FLIP_WINDOW
):
    """``n`` steps of the toy escape from the stopping rule's plain sweeps (``polish`` 0;
    None: before them), each appended to the trace as ``stopping.advance`` does;
    ``(engine, run, the bound after each step)``."""
    from ordmix_core.fit.restarts import RestartRun

    engine = _Escape(sign)
    step = acceleration.make_step(engine, accelerate=accelerate)
    run = RestartRun(0, "warm", _Toy(np.array([1.0 - 1e-3, 0.99, 0.3])))
    run.polish_from = polish
    for _ in range(n):
        run.trace.append(step(run, True))
    return engine, run, run.trace


def test_a_flip_replaces_the_plain_sweep_when_it_raises_the_bound():
    """After ``FLIP_WINDOW`` plain sweeps the escaping annotator 0 is mirrored and swept once
    more (one extra sweep); the bound is higher, so that sweep is the step's result."""
    engine, run, fs = _escape_run(1.0)
    assert engine.sweeps == acceleration.FLIP_WINDOW + 1
    assert run.state.eps[0] < 0.5  # flipped: about 1e-3 * 1.03**FLIP_WINDOW
    assert run.state.eps[1:].tolist() == [0.99, 0.3]  # not escaping: left alone
    assert fs[-1] == -float(run.state.eps.sum())
    assert np.all(np.diff(fs) >= 0)
    assert run.eps_window == []  # a new window starts


def test_a_flip_that_lowers_the_bound_is_dropped():
    engine, run, fs = _escape_run(-1.0)
    assert engine.sweeps == acceleration.FLIP_WINDOW + 1  # tried
    assert run.state.eps[0] > 0.5  # but the plain sweep kept
    assert fs[-1] == float(run.state.eps.sum())


def test_no_flips_without_acceleration_or_before_the_plain_sweeps():
    for accelerate, polish in ((False, 0), (True, None)):
        engine, run, _ = _escape_run(1.0, accelerate, polish)
        assert engine.sweeps == acceleration.FLIP_WINDOW and run.state.eps[0] > 0.5


def test_the_plain_sweeps_keep_their_last_window_and_an_accepted_flip_empties_it():
    """The window slides over the last ``FLIP_WINDOW`` plain sweeps (a refused flip leaves it;
    flips are still tried every ``FLIP_WINDOW`` sweeps), is kept without acceleration too
    (for ``still_moving``), and starts again after an accepted flip."""
    w = acceleration.FLIP_WINDOW
    engine, run, _ = _escape_run(-1.0, n=w + 5)
    assert engine.sweeps == w + 5 + 1  # one try, at the w-th plain sweep
    assert len(run.eps_window) == w
    np.testing.assert_array_equal(run.eps_window[-1], run.state.eps)
    assert run.eps_window[0][0] > 1.0 - 1e-3 * 1.03**6  # the 6th sweep's, not the 1st's
    engine, run, _ = _escape_run(-1.0, n=2 * w)
    assert engine.sweeps == 2 * w + 2  # tried again at 2w
    engine, run, _ = _escape_run(1.0, accelerate=False, n=w + 3)
    assert engine.sweeps == w + 3 and len(run.eps_window) == w  # kept, never flipped
    engine, run, _ = _escape_run(1.0, n=w + 3)
    assert len(run.eps_window) == 3  # the sweeps since the accepted flip


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
    from ordmix_core.fit.restarts import RestartRun

    engine = _ItemsSettle(move, gain)
    step = acceleration.make_step(engine, accelerate=True, exact_eps=exact_eps)
    run = RestartRun(0, "warm", _Toy(np.array([0.99, 0.98, 0.3])))  # none escaping
    run.polish_from = 0
    for _ in range(n or acceleration.FLIP_WINDOW):
        run.trace.append(step(run, True))
    return engine, run, run.trace


def test_a_window_without_a_flip_tries_the_items_settled_and_keeps_a_higher_bound():
    """At the ``FLIP_WINDOW``-th plain sweep, no annotator escaping: the items' blocks are
    solved (the still-moving annotators named: none here) and one sweep is made from there;
    its bound is higher, so it is the step's result."""
    w = acceleration.FLIP_WINDOW
    engine, run, fs = _settle_run(move=0.01, gain=1.0)
    assert engine.settles == 1 and engine.sweeps == w + 1
    assert not engine.asked[0].any() and engine.asked[0].shape == (3,)
    assert run.state.mu_m is not None  # the settled state's sweep
    assert fs[-1] - fs[-2] > 0.5 and np.all(np.diff(fs) >= 0)
    engine, run, _ = _settle_run(move=0.01, gain=1.0, n=2 * w - 1)
    assert engine.settles == 1  # the next try at 2w


def test_a_settle_that_moves_nothing_or_lowers_the_bound_is_not_kept():
    move = acceleration.WINDOW_SETTLE_MOVE
    engine, run, _ = _settle_run(move=0.5 * move, gain=1.0)
    assert engine.settles == 1 and engine.sweeps == acceleration.FLIP_WINDOW  # no sweep made
    assert run.state.mu_m is None
    engine, run, fs = _settle_run(move=move, gain=-1.0)
    assert engine.sweeps == acceleration.FLIP_WINDOW + 1  # tried
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
    from ordmix_core.fit.restarts import RestartRun

    engine = _ItemEscape(**kw)
    step = acceleration.make_step(engine, accelerate=True)
    run = RestartRun(0, "warm", _Toy(np.array([0.99, 0.98, 0.3])))
    run.polish_from = 0
    for _ in range(windows * acceleration.FLIP_WINDOW):
        run.trace.append(step(run, True))
    return engine, run


def test_an_item_leaving_a_slow_point_faster_each_window_is_settled_with_its_raters():
    """Item 1 moves most at two windows running, more at the second (3e-4 after 2e-4): its
    raters' blocks are solved with it, which moves it by 0.5, and the sweep from there is
    kept (its bound is higher)."""
    engine, run = _item_escape_run(2, moves=[2e-4, 3e-4])
    assert engine.settles == 3  # one a window, and the second window's again with the rater
    assert engine.asked[2].tolist() == [False, False, True]
    assert run.state.mu_m is not None and run.trace[-1] - run.trace[-2] > 0.5
    assert run.settle_top is None  # a move the sweep took: the next window starts afresh


@pytest.mark.parametrize(
    ("moves", "top", "with_raters"),
    [
        ([3e-4, 2e-4], None, True),  # shrinking: a slow point it is settling into
        ([2e-4, 3e-4], [1, 3], True),  # another item at the second window
        ([0.4e-4, 0.6e-4], None, True),  # growing, below ESCAPE_FLOOR
        ([2e-4, 3e-3], None, True),  # the second window's settle moves enough by itself
        ([2e-4, 3e-4], None, False),  # an engine that cannot name raters
    ],
)
def test_no_raters_settled_unless_the_same_item_grows_from_the_floor(moves, top, with_raters):
    assert acceleration.ESCAPE_FLOOR == 0.1 * acceleration.WINDOW_SETTLE_MOVE
    engine, run = _item_escape_run(2, moves=moves, top=top, with_raters=with_raters)
    assert engine.settles == 2 and not any(a[2] for a in engine.asked)


def test_the_escaping_item_remembers_the_last_window_only():
    """``settle_top`` keeps the last window's item and move; a move of ``WINDOW_SETTLE_MOVE``
    or an engine's single largest move leaves nothing to compare with."""
    from ordmix_core.fit.restarts import RestartRun

    run = RestartRun(0, "warm", None)
    item = acceleration._escaping_item
    assert item(run, np.array([0.0, 2e-4, 1e-4])) is None and run.settle_top == (1, 2e-4)
    assert item(run, np.array([0.0, 3e-4, 1e-4])) == 1 and run.settle_top == (1, 3e-4)
    assert item(run, np.array([0.0, 4e-4, 0.0])) == 1  # still growing: again
    assert item(run, np.array([0.0, 2e-3, 0.0])) is None and run.settle_top is None
    assert item(run, np.array([0.0, 5e-4, 0.0])) is None  # a fresh start


def test_an_engine_that_returns_its_largest_move_names_its_top_item():
    """The Dask engine's settle returns only its largest move; its ``settle_top(restart)``
    names the item (any key its ``raters`` takes), and the escape step follows it."""
    from ordmix_core.fit.restarts import RestartRun

    run = RestartRun(0, "warm", None)
    item = acceleration._escaping_item
    assert item(run, np.array([2e-4]), ((1, 5), 2e-4)) is None and run.settle_top == ((1, 5), 2e-4)
    assert item(run, np.array([3e-4]), ((0, 5), 3e-4)) is None  # another block's item
    assert item(run, np.array([4e-4]), ((0, 5), 4e-4)) == (0, 5)

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
    step = acceleration.make_step(engine, accelerate=True)
    run = RestartRun(4, "warm", _Toy(np.array([0.99, 0.98, 0.3])))
    run.polish_from = 0
    for _ in range(2 * acceleration.FLIP_WINDOW):
        run.trace.append(step(run, True))
    assert engine.named == [("block", 1)] and set(engine.asked_for) == {4}
    assert engine.settles == 3 and run.state.mu_m is not None


def test_the_memory_engine_names_the_raters_of_items():
    from ordmix_core.estimators.memory_engine import MemorySweeps
    from ordmix_core.vb import sweep

    p = sweep.Problem.create(
        Scale(np.arange(1.0, 4.0)), pi=np.full(3, 1 / 3), mu=2.0, lam=0.1, phi=2.0, eta=1.0,
        ordinal=True, spam=True, exact=True, n_per_ann=np.full(4, 2), n_categories=3,
    )  # fmt: skip
    ann, inst = np.array([0, 1, 2, 3, 0, 1, 3, 2]), np.array([0, 0, 1, 1, 2, 2, 2, 1])
    p = p.with_ratings(ann, inst, inst, np.zeros(8, dtype=int), 3)
    engine = MemorySweeps(p)
    assert engine.raters(1).tolist() == [False, False, True, True]
    assert engine.raters(2).tolist() == [True, True, False, True]


def test_no_window_settle_without_the_exact_eps_step():
    """Where the exact eps step does not apply (the earlier schedule, a uniform spam
    distribution), neither does the settle: as at a stop (``make_settle``)."""
    engine, run, _ = _settle_run(move=0.01, gain=1.0, exact_eps=False)
    assert engine.settles == 0 and run.state.mu_m is None


def test_still_moving_marks_annotators_leaving_their_end_or_drifting():
    t = np.arange(acceleration.FLIP_WINDOW)[:, None]
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
    assert acceleration.still_moving(list(window), 5).tolist() == expected
    short = list(window[: acceleration.MOVING_MIN_SWEEPS - 1])
    assert acceleration.still_moving(short, 5).tolist() == [False] * 5
    assert (
        acceleration.still_moving(list(window[: acceleration.MOVING_MIN_SWEEPS]), 5).tolist()
        == expected
    )
    assert acceleration.escaping(list(window)).tolist() == []  # below the flips' FLIP_GROWTH
    # the drift is the stopping rule's estimate: 3 sweeps of 5e-4, the ratio clipped at 0.99
    assert 1.5e-3 * 0.99 / 0.01 > acceleration.MOVING_DRIFT > 0.05 * 0.5**8


# ------------------------------------------------------------------ the exact eps step


@dataclass
class _EpsToy:
    eps: np.ndarray
    omega: np.ndarray | None = None
    omega_eps: np.ndarray | None = None


class _EpsEngine:
    """A toy engine for the exact eps step: a sweep's bound is ``-|eps - target|`` summed
    (``target`` is where the block optimum is), plus ``bias``, so a sweep from the block
    optimum scores higher (``bias`` 0) or, with a large negative ``jump_bias``, lower than
    the last bound; ``eps_block`` returns the target."""

    def __init__(self, target, jump_bias=0.0) -> None:
        self.target, self.jump_bias = np.asarray(target, float), jump_bias
        self.starts: list[np.ndarray] = []

    def sweep(self, state, spam, history):
        self.starts.append(np.array(state.eps))
        eps = 0.9 * state.eps + 0.1 * self.target  # a slow EM step towards the target
        f = -float(np.abs(eps - self.target).sum())
        if np.array_equal(state.eps, self.target):
            f += self.jump_bias
        return _EpsToy(eps, np.ones(2), state.eps), f, None

    def eps_block(self, state):
        return _EpsToy(self.target.copy(), state.omega, state.omega_eps)

    def propose(self, *args):
        return None

    swept = staticmethod(lambda state: state.omega is not None)
    truth_share = staticmethod(lambda state: 1.0)
    estimate_change = staticmethod(lambda before, after: 0.0)


def _eps_steps(engine, n=3, spam=True, accelerate=True, exact=True):
    from ordmix_core.fit.restarts import RestartRun

    step = acceleration.make_step(engine, accelerate, exact)
    run = RestartRun(0, "warm", _EpsToy(np.array([0.99, 0.01])))
    for _ in range(n):
        run.trace.append(step(run, spam))
    return run


def test_a_sweep_starts_from_the_exact_eps_when_the_bound_does_not_fall():
    """The first sweep (no q(y) yet, no trace) is plain; every later one starts from the
    block optimum, which the sweep's bound keeps: one sweep per step, no extra."""
    engine = _EpsEngine([0.5, 0.5])
    run = _eps_steps(engine)
    assert len(engine.starts) == 3
    np.testing.assert_array_equal(engine.starts[0], [0.99, 0.01])
    np.testing.assert_array_equal(engine.starts[1], [0.5, 0.5])
    np.testing.assert_array_equal(run.state.omega_eps, [0.5, 0.5])
    assert np.all(np.diff(run.trace) >= 0)


def test_a_jump_that_lowers_the_bound_is_replaced_by_the_plain_sweep():
    engine = _EpsEngine([0.5, 0.5], jump_bias=-10.0)
    run = _eps_steps(engine)
    assert len(engine.starts) == 1 + 2 * 2  # each later step: the jump, then the plain sweep
    assert not np.array_equal(run.state.omega_eps, [0.5, 0.5])  # the plain sweep's
    assert np.all(np.diff(run.trace) >= 0)


def test_no_exact_eps_step_without_acceleration_outside_the_mixture_or_when_switched_off():
    for kw in (dict(accelerate=False), dict(spam="uniform"), dict(exact=False)):
        engine = _EpsEngine([0.5, 0.5])
        _eps_steps(engine, **kw)
        assert len(engine.starts) == 3
        assert not any(np.array_equal(s, [0.5, 0.5]) for s in engine.starts), kw
