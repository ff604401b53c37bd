"""The winner among the restarts, the ensemble of near-tied ones, the warnings and the
trace and restarts tables.

The ensemble (``ensemble``): the restarts that finished (not pruned, not collapsed) with a
bound within ``ensemble_gap`` of the best; what differs across them is what the data cannot
decide (``OrdinalMixture`` marks such items and annotators unstable).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..errors import CollapseWarning, ConvergenceWarning
from .restarts import RestartRun
from .stopping import remaining_change


def select(
    results: list[RestartRun], spam: bool, collapse_threshold: float, interrupted: bool = False
) -> tuple[RestartRun, str, bool]:
    """Highest bound among the restarts not pruned and not collapsed; says why in plain words.

    ``interrupted``: the fit was stopped, so the candidates are the restarts finished or still
    running at the stop (the wording says so, and says which were pruned before it); when
    none had reached the mixture (``results`` are warm-ups) their last bounds are compared.
    Returns ``(best, reason, collapsed)`` with ``collapsed`` True when every candidate
    collapsed.
    """
    thr = collapse_threshold if spam else -np.inf
    finished = [res for res in results if not res.dropped] or results
    ok = [res for res in finished if res.truth_share >= thr]
    collapsed = [res for res in results if res.truth_share < thr]
    dropped = [res for res in results if res.dropped]
    pool = ok or finished
    best = max(pool, key=lambda res: res.lower_bound)
    if not any(res.trace or res.stage_trace for res in results):
        bound = best.warmup_trace[-1] if best.warmup_trace else -np.inf
        reason = (
            "the fit was stopped during the no-spam warm-up, before any mixture iteration: "
            f"restart {best.restart} is kept, the highest last warm-up bound ({bound:,.1f}) "
            f"of the {len(results)} warm-up(s) run"
        )
        return best, reason, False
    if interrupted:
        running = sum(res.stopped for res in finished)
        reason = (
            f"the fit was stopped: restart {best.restart} ({best.init} start) is kept, the "
            f"highest lower bound ({best.lower_bound:,.1f}) among the {len(pool)} restart(s) "
            f"not pruned ({running} still running at the stop, {len(finished) - running} "
            "finished)"
        )
        if not ok:
            reason += "; every one of them had collapsed to the all-spam solution"
    elif ok:
        reason = (
            f"restart {best.restart} ({best.init} start) has the highest lower bound "
            f"({best.lower_bound:,.1f}) of the {len(ok)} finished restart(s) that did not "
            "collapse"
        )
    else:
        reason = (
            f"every finished restart collapsed to the all-spam solution; restart "
            f"{best.restart} has the highest bound ({best.lower_bound:,.1f})"
        )
    halved = [res for res in dropped if not res.outrun]
    if halved:
        at = ", ".join(str(n) for n in sorted({r.pruned_at for r in halved if r.pruned_at}))
        verb = "had been pruned before the stop" if interrupted else "were pruned"
        reason += (
            f"; {len(halved)} restart(s) {verb} by successive halving (the worse half by "
            f"bound, collapsed ones first, after sweep {at} of their stage)"
        )
    for res in (res for res in dropped if res.outrun):
        reason += (
            f"; restart {res.restart} was stopped after mixture sweep {res.pruned_at}, out of "
            f"reach: its bound ({res.lower_bound:,.1f}) with its projected gain was more than "
            f"{OUTRUN_GAPS:g} near-tie gaps below the leader's"
        )
    if collapsed and ok:
        top = max(collapsed, key=lambda res: res.lower_bound)
        higher = " (one with a higher bound)" if top.lower_bound > best.lower_bound else ""
        reason += (
            f"; {len(collapsed)} restart(s) collapsed to the all-spam solution (truth share "
            f"< {collapse_threshold:g}){higher} and were not chosen"
        )
    return best, reason, not ok


#: near-tied: within this share of the best bound (1e-4: 12 nats on TREC RF10's ~-120,000,
#: well above the bound's change at convergence, tol 1e-6 relative) ...
ENSEMBLE_RTOL = 1e-4
#: ... or within this many nats (posterior odds e^3 ~ 20:1, "strong" evidence) on small data
ENSEMBLE_MIN_NATS = 3.0


def ensemble_gap(best_bound: float) -> float:
    """How far below the best bound a restart still counts as near-tied: ``ENSEMBLE_RTOL`` of
    the bound, at least ``ENSEMBLE_MIN_NATS``."""
    return max(ENSEMBLE_MIN_NATS, ENSEMBLE_RTOL * abs(best_bound))


#: a restart still running is out of reach when its bound plus the gain still projected for it
#: is below the leader's by more than this many ensemble gaps: it can neither win nor be
#: near-tied, so running it on changes nothing the fit returns (``schedule.race`` stops it)
OUTRUN_GAPS = 4.0


def out_of_reach(bound: float, projected_gain: float, leader_bound: float) -> bool:
    """Whether a restart at ``bound`` with ``projected_gain`` still to come is more than
    ``OUTRUN_GAPS`` ensemble gaps below ``leader_bound``."""
    return leader_bound - (bound + projected_gain) > OUTRUN_GAPS * ensemble_gap(leader_bound)


def ensemble(
    results: list[RestartRun], best: RestartRun, spam: bool, collapse_threshold: float
) -> list[RestartRun]:
    """The restarts near-tied with ``best``: not pruned, not collapsed, with mixture sweeps
    and a bound within ``ensemble_gap`` of ``best``'s; ``best`` first, then by restart."""
    thr = collapse_threshold if spam else -np.inf
    gap = ensemble_gap(best.lower_bound)
    near = [
        res
        for res in results
        if res is not best
        and (res.trace or res.stage_trace)
        and not res.dropped
        and res.truth_share >= thr
        and res.lower_bound >= best.lower_bound - gap
    ]
    return [best, *sorted(near, key=lambda res: res.restart)]


class FitWarning(NamedTuple):
    """A warning about the chosen restart: its class (``errors.py``) and its message."""

    category: type[Warning]
    message: str


#: the warning of a fit stopped before every restart finished (the Fit page, which says so in
#: its own words, leaves it out: ``fit_summary.page_warnings``)
STOP_WARNING = "the fit was stopped before every restart finished; best restart so far kept"


def fit_warnings(
    best: RestartRun, collapsed: bool, interrupted: bool, max_iter: int, tol: float
) -> list[FitWarning]:
    """What a user should hear about the chosen restart (collapse, stop, no convergence)."""
    warn = []
    if collapsed:
        warn.append(
            FitWarning(
                CollapseWarning,
                "the fit collapsed: almost every rating is explained as spam, so the estimates "
                "sit at the prior mean. Compare with the model without its spam component (the "
                "spam option off: spam=False, --spam off, or Spam component on the Fit page) "
                "and check the data.",
            )
        )
    if interrupted:
        warn.append(FitWarning(ConvergenceWarning, STOP_WARNING))
    if not best.converged and not interrupted:
        measured = []  # what the stopping rules saw (nothing yet after a sweep or two)
        if len(best.trace) > 1:
            last = abs(best.trace[-1] - best.trace[-2]) / max(abs(best.trace[-1]), 1e-300)
            measured.append(f"last relative change of the bound {last:.3g}, tol {tol:g}")
        remaining = remaining_change(best.changes)
        if np.isfinite(remaining):
            measured.append(f"estimated remaining change of an estimate {remaining:.3g}")
        why = f"({'; '.join(measured)})" if measured else "(too few sweeps to measure a change)"
        warn.append(
            FitWarning(
                ConvergenceWarning,
                f"the chosen restart did not converge within max_iter={max_iter} sweeps {why}",
            )
        )
    return warn


def trace_frame(results: list[RestartRun], spam: bool) -> pd.DataFrame:
    """``restart, stage, iteration, lower_bound`` of every sweep (warm-ups as stage nospam, the
    extended model's mixture with the spam distribution held uniform as stage uniform)."""
    rows = []
    for res in results:
        rows.extend((res.restart, "nospam", i, f) for i, f in enumerate(res.warmup_trace, 1))
        rows.extend((res.restart, "uniform", i, f) for i, f in enumerate(res.stage_trace, 1))
        stage = "mixture" if spam else "model"
        rows.extend((res.restart, stage, i, f) for i, f in enumerate(res.trace, 1))
    return pd.DataFrame(rows, columns=["restart", "stage", "iteration", "lower_bound"])


def restarts_frame(
    results: list[RestartRun], spam: bool, collapse_threshold: float
) -> pd.DataFrame:
    """One row per restart: how it started, its bound, sweeps per stage (``shared_iter``: of
    the shared warm-up it branched from) and how it ended (``pruned_at``: the sweep of its
    stage after which successive halving dropped it; ``stopped``: running at a stop)."""
    return pd.DataFrame(
        {
            "restart": [r.restart for r in results],
            "init": [r.init for r in results],
            "lower_bound": [r.lower_bound for r in results],
            "n_iter": [len(r.trace) for r in results],
            "warmup_iter": [len(r.warmup_trace) for r in results],
            "uniform_iter": [len(r.stage_trace) for r in results],
            "shared_iter": [r.shared_iter for r in results],
            "converged": [r.converged for r in results],
            "dropped": [r.dropped for r in results],
            "pruned_at": pd.array([r.pruned_at for r in results], dtype="Int64"),
            "stopped": [r.stopped for r in results],
            "truth_share": [r.truth_share for r in results],
            "collapsed": [spam and r.truth_share < collapse_threshold for r in results],
        }
    ).set_index("restart")
