"""The alternative answer: where the verdicts a fit had not settled could go.

At the winner's stop some annotators may still be leaving their end of (0, 1), or drifting
between the ends (``acceleration.still_moving`` over the winner's last plain sweeps). Their
verdicts, and their items' estimates, could change with a longer fit. ``alternative`` starts
from the winner with those reliabilities where they were heading and runs plain sweeps of the
mixture from there: where its estimates differ from the winner's, the winner's answer rests
on those verdicts (``OrdinalMixture``'s ensemble; both engines call it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .acceleration import EPS_PACK, Sweeps, flipped, still_moving_parts
from .stopping import POLISH_TOL, WINDOW

#: the most plain sweeps ``alternative`` runs (measured on TREC RF10 and Web at seeds 0-3: it
#: stops at ``POLISH_TOL`` after 4-16 sweeps on TREC, 24-38 on Web)
ALT_MAX_SWEEPS = 100


def alternative_start(state: Any, window: Sequence[np.ndarray]) -> Any:
    """Where the verdicts the fit had not settled (``still_moving`` over ``window``, the
    winner's ``eps_window``) could go: ``state`` with the reliability of the annotators
    leaving their end mirrored (``flipped``: the other side of the saddle) and that of those
    drifting carried by their estimated remaining change (``stopping.remaining_changes``) in
    the direction they moved over its last ``2 * WINDOW`` sweeps, within ``[EPS_PACK,
    1 - EPS_PACK]`` (mirroring a drift, 0.27 to 0.73, would only send it back)."""
    e = np.asarray(window, dtype=float)
    leaving, drifting, remaining = still_moving_parts(window, e.shape[1])
    s = flipped(state, np.flatnonzero(leaving))
    if drifting.any():
        toward = np.sign(e[-1] - e[-1 - 2 * WINDOW])
        eps = np.asarray(s.eps, dtype=float).copy()
        eps[drifting] += toward[drifting] * remaining[drifting]
        eps[drifting] = np.clip(eps[drifting], EPS_PACK, 1.0 - EPS_PACK)
        s = dataclasses.replace(s, eps=eps)
    return s


def alternative(
    engine: Sweeps, state: Any, window: Sequence[np.ndarray], max_sweeps: int = ALT_MAX_SWEEPS
) -> tuple[Any, float, int]:
    """The answer with the still-moving annotators' verdicts as they could go
    (``alternative_start`` from the winner's ``state`` and ``window``), then plain sweeps of
    the mixture until the bound's relative change is below ``POLISH_TOL`` or after
    ``max_sweeps``. Returns ``(state, bound, sweeps)``.

    Another optimum near the winner's, past the verdicts the fit had not settled: where its
    estimates differ from the winner's, the winner's answer rests on those verdicts
    (``model.OrdinalMixture``'s ensemble). The sweeps may carry an annotator back
    to where it was; the result says where they end."""
    s, f, n = alternative_start(state, window), -np.inf, 0
    while n < max_sweeps:
        s, f_new, _ = engine.sweep(s, True, None)
        n += 1
        done = abs(f_new - f) < POLISH_TOL * abs(f_new)
        f = f_new
        if done or not np.isfinite(f):
            break
    return s, float(f), n
