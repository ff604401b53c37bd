"""One step (``step.py``): SQUAREM's proposal in one process and split by group and by
block, as the Dask engine runs it; the history kept without the older state's omega; the
exact eps step on a toy engine."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from scipy.special import expit, logit

from ordmix_core.fit import step
from ordmix_core.fit.policy import DEFAULT
from ordmix_core.fit.restarts import RestartRun
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
    d = {g: 0.05 * rng.normal(size=np.shape(step.group_value(s0, g))) for g in step.GROUPS}
    for length in (1.0, 1.0 + f):
        kw = {}
        for g in step.GROUPS:
            x = step.group_value(s0, g)
            if g == "mu_m":
                kw[g] = x + length * d[g]
            elif g == "eps":
                kw[g] = expit(logit(x) + length * d[g])
            else:
                kw[g] = x * np.exp(length * d[g])
        alpha, beta = kw.pop("ab")
        out.append(State(**kw, alpha=float(alpha), beta=float(beta)))
    return out


def test_proposal_is_the_squarem_formula():
    s0, s1, s2 = _states()
    prop = step.squarem_proposal(s0, s1, s2, LO, HI)
    assert prop is not None
    packed = [[step.pack(g, step.group_value(s, g)) for g in step.GROUPS] for s in (s0, s1, s2)]
    r = [b - a for a, b in zip(packed[0], packed[1], strict=True)]
    v = [c - 2 * b + a for a, b, c in zip(*packed, strict=True)]
    nr = np.sqrt(sum(float(x @ x) for x in r))
    nv = np.sqrt(sum(float(x @ x) for x in v))
    a = -min(nr / nv, DEFAULT.max_step)
    assert a <= -1.0
    q = [p - 2 * a * rx + a * a * vx for p, rx, vx in zip(packed[0], r, v, strict=True)]
    np.testing.assert_allclose(prop.mu_m, np.clip(q[0], LO, HI), rtol=1e-12)
    np.testing.assert_allclose(prop.lam_m, np.exp(q[1]), rtol=1e-12)
    np.testing.assert_allclose(prop.eps, expit(q[6]), rtol=1e-12)
    assert [prop.alpha, prop.beta] == pytest.approx(np.exp(q[7]), rel=1e-12)


def test_split_by_block_gives_the_same_proposal():
    """Per-instance groups in two blocks, the rest on a 'client': norms summed per group."""
    s0, s1, s2 = _states(seed=1)
    ref = step.squarem_proposal(s0, s1, s2, LO, HI)
    inst = ("mu_m", "lam_m")
    halves = (slice(0, 17), slice(17, None))
    r2, v2 = np.zeros(len(step.GROUPS)), np.zeros(len(step.GROUPS))
    terms = {}
    for i, g in enumerate(step.GROUPS):
        vals = [step.group_value(s, g) for s in (s0, s1, s2)]
        parts = [tuple(x[h] for x in vals) for h in halves] if g in inst else [tuple(vals)]
        terms[g] = [step.group_terms(g, *p) for p in parts]
        for _, r, v in terms[g]:
            gr, gv = step.sq_norms(r, v)
            r2[i] += gr
            v2[i] += gv
    a = step.step_length(r2.tolist(), v2.tolist())
    assert a is not None
    for g in step.GROUPS:
        x = np.concatenate([step.extrapolate(g, *t, a, LO, HI) for t in terms[g]])
        want = step.group_value(ref, g)
        np.testing.assert_allclose(x, want, rtol=1e-12)


def test_step_length_limits():
    assert step.step_length([4.0, 0.0], [1.0]) == -2.0
    assert step.step_length([1e6], [1.0]) == -DEFAULT.max_step
    assert step.step_length([0.25], [1.0]) is None  # shorter than a plain double step
    assert step.step_length([0.0], [1.0]) is None
    assert step.step_length([1.0], [0.0]) is None
    assert step.step_length([np.inf], [1.0]) is None
    assert step.step_length([np.nan], [1.0]) is None


def test_extrapolate_clips_and_rejects():
    z = np.zeros(3)
    mu = step.extrapolate("mu_m", np.array([0.0, 3.0, 9.0]), z, z, -2.0, LO, HI)
    np.testing.assert_array_equal(mu, [LO, 3.0, HI])
    eps = step.extrapolate("eps", np.array([-800.0, 0.0, 800.0]), z, z, -2.0, LO, HI)
    np.testing.assert_array_equal(eps, [1e-10, 0.5, 1 - 1e-10])
    assert step.extrapolate("lam_m", np.array([0.0, np.nan]), z[:2], z[:2], -2.0, LO, HI) is None
    assert step.extrapolate("ab", np.array([0.0, np.nan]), z[:2], z[:2], -2.0, LO, HI) is None
    tiny = step.extrapolate("ab", np.array([0.0, -800.0]), z[:2], z[:2], -2.0, LO, HI)
    np.testing.assert_allclose(tiny, [1.0, np.exp(-700.0)])  # clipped, still positive
    ok = step.extrapolate("tau_rate", np.log([2.0, 3.0]), z[:2], z[:2], -2.0, LO, HI)
    np.testing.assert_allclose(ok, [2.0, 3.0])


def test_no_direction_gives_none():
    s0, _, _ = _states(seed=2)
    assert step.squarem_proposal(s0, s0, s0, LO, HI) is None


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
    real = step.for_history

    def spy(s):
        out = real(s)
        kept.append((s, out))
        return out

    monkeypatch.setattr(step, "for_history", spy)
    kw = dict(n_restarts=2, max_iter=40, random_state=1, n_jobs=1)
    lean = OrdinalMixture(**kw).fit(ratings)
    assert kept and all(s.omega is not None and out.omega is None for s, out in kept)
    assert all(
        np.array_equal(step.group_value(s, g), step.group_value(out, g))
        for s, out in kept
        for g in step.GROUPS
    )
    monkeypatch.setattr(step, "for_history", lambda s: s)
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
        step.for_history,
        memory_engine.MemorySweeps.sweep_proposal,
    )

    def spy_history(s):
        before.append(weakref.ref(s.omega))
        return real_history(s)

    def spy_proposal(self, proposal, spam, states):
        alive.append(before[-1]() is not None)
        return real_proposal(self, proposal, spam, states)

    monkeypatch.setattr(step, "for_history", spy_history)
    monkeypatch.setattr(memory_engine.MemorySweeps, "sweep_proposal", spy_proposal)
    OrdinalMixture(n_restarts=1, max_iter=40, random_state=1, n_jobs=1).fit(ratings)
    assert len(alive) >= 3 and not any(alive)


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
    make = step.make_step(engine, accelerate, exact)
    run = RestartRun(0, "warm", _EpsToy(np.array([0.99, 0.01])))
    for _ in range(n):
        run.trace.append(make(run, spam))
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
