"""Record every call of the engine's sweep during a fit (tests that need the states)."""

from __future__ import annotations

from typing import NamedTuple

from ordmix_core import vb


class Sweep(NamedTuple):
    """One call of ``vb.sweep``: problem, state before, state after, the F it reported."""

    problem: vb.Problem
    before: vb.State
    after: vb.State
    bound: float


def record_sweeps(monkeypatch) -> list[Sweep]:
    """Wrap ``ordmix_core.vb.sweep`` (the estimator calls it through the module) so that every
    call appends a :class:`Sweep` with copies of the states as they were; returns the list."""
    calls: list[Sweep] = []
    inner = vb.sweep

    def recording(p, s):
        before = s.copy()
        new, f = inner(p, s)
        calls.append(Sweep(p, before, new.copy(), f))
        return new, f

    monkeypatch.setattr(vb, "sweep", recording)
    return calls
