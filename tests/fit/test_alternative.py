"""``alternative``: where the verdicts the fit had not settled could go, and the plain sweeps
from there."""

from __future__ import annotations

import numpy as np
import pytest
from test_acceleration import _Toy

from ordmix_core.fit import acceleration, alternative, stopping


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
    ``POLISH_TOL``; the last sweep's state and bound, and the count, are returned."""
    f = -1000.0
    tol = stopping.POLISH_TOL * 1000.0
    bounds = [f - 50, f - 5, f - 1, f - 1 + 1.5 * tol, f - 1 + 2.0 * tol, f]
    engine = _Settling(bounds)
    start = _Toy(np.array([0.9, 0.2, 0.6]))
    settled = [start.eps.copy() for _ in range(acceleration.MOVING_MIN_SWEEPS)]
    s, bound, n = alternative.alternative(engine, start, settled)
    assert n == 5 and bound == f - 1 + 2.0 * tol  # |change| 0.5 tol < tol: the fifth stops
    np.testing.assert_array_equal(s.eps, [0.9, 0.2, 0.6])
    assert s.mu_m.tolist() == [5]
    assert engine.calls == [(True, None)] * 5
    # at most max_sweeps; a non-finite bound ends it at once
    s, bound, n = alternative.alternative(
        _Settling([f - 50 * i for i in range(9)]), start, settled, max_sweeps=4
    )
    assert n == 4 and bound == f - 150
    s, bound, n = alternative.alternative(_Settling([f, -np.inf, f]), start, settled)
    assert n == 2 and bound == -np.inf


def test_alternative_start_mirrors_the_annotators_leaving_and_carries_on_those_drifting():
    """Over a window of ``MOVING_MIN_SWEEPS``: annotator 0 leaves its end (``1 - eps`` grows
    3% a sweep) and is mirrored; annotator 1 drifts down by changes that shrink by half a
    window (ratio 1/2 per window of ``WINDOW`` sweeps: the remaining change is the last
    window's sum again, 0.075), and is carried that far down; annotator 2 is settled;
    annotator 3 drifts up as fast, past 1, and stops at ``1 - EPS_PACK``. The state itself
    is left alone."""
    w, n = stopping.WINDOW, acceleration.MOVING_MIN_SWEEPS
    step = [0.05 * 0.5 ** (i // w) for i in range(n - 1)]  # per sweep, halving each window
    e1 = 0.4 - np.concatenate([[0.0], np.cumsum(step)])  # 0.175, heading for 0.1
    e3 = 0.75 + np.concatenate([[0.0], np.cumsum(step)])  # 0.975, heading for 1.05
    window = [np.array([1.0 - 1e-3 * 1.03**i, e1[i], 0.7, e3[i]]) for i in range(n)]
    state = _Toy(window[-1].copy())
    s = alternative.alternative_start(state, window)
    last = step[-w:]
    before = step[-2 * w : -w]
    r = sum(last) / sum(before)  # 1/2
    remaining = sum(last) * r / (1 - r)
    assert remaining == pytest.approx(0.075) and r == pytest.approx(0.5)
    assert acceleration.still_moving(window, 4).tolist() == [True, True, False, True]
    np.testing.assert_allclose(s.eps[:3], [1e-3 * 1.03 ** (n - 1), e1[-1] - remaining, 0.7])
    assert s.eps[3] == 1 - acceleration.EPS_PACK
    np.testing.assert_array_equal(state.eps, window[-1])  # the winner's state unchanged
    # too few sweeps: nothing moves, nothing changes
    short = alternative.alternative_start(state, window[:-1])
    np.testing.assert_array_equal(short.eps, state.eps)
