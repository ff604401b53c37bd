"""The end of both engines' fits: the winning restart chosen and every learned attribute set.

``StoresLearned`` is a part of ``OrdinalMixture`` (the in-memory and the Dask engine both
end with ``_store``); it reads the estimator's ``spam_``, ``collapse_threshold``,
``max_iter``, ``tol``, ``model``, ``fit_policy`` and ``_extensions()``. The warnings about
the chosen restart (``fit_warnings``) and the trace and restarts tables are made here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..data.scale import Scale
from ..errors import CollapseWarning, ConvergenceWarning, FitWarning, InputError
from ..fit import race, rescues, restarts
from ..fit.policy import DEFAULT, FitPolicy
from ..results import decisions, outputs, stability
from ..vb import sweep as vb

#: what an engine gives ``_store`` from the winning state: ``items_``, ``categories_``, the
#: sum of omega per annotator (N,) and ``omega_`` (per rating, or None)
Learned = tuple[Any, Any, np.ndarray, "np.ndarray | None"]


class StoresLearned:
    """``_store`` and ``_store_ensemble``: the learned attributes of a fit, from its restarts;
    ``_item_decisions``: the items' decisions behind ``labels_`` and ``probas_``."""

    def _item_decisions(self) -> pd.DataFrame:
        """``decisions.item_decisions`` of this fit at its defaults, computed once per fit:
        ``labels_`` and ``probas_`` share it (kept with the ``label_result_`` it was read from,
        so a refit, which makes a new one, computes it again)."""
        cached = getattr(self, "_decisions_of", None)
        if cached is None or cached[0] is not self.label_result_:
            cached = (self.label_result_, decisions.item_decisions(self))
            self._decisions_of = cached
        return cached[1]

    def _store(
        self,
        data: Any,
        p: vb.Problem,
        pi: np.ndarray,
        annotators: np.ndarray,
        runs: list[restarts.RestartRun],
        interrupted: bool,
        learned: Callable[[Any], Learned],
        member_mu: Callable[[Any], np.ndarray] | None = None,
        alternative: Callable[[Any, list], tuple[Any, float, int]] | None = None,
    ) -> list[FitWarning]:
        """Choose the winning restart and set every learned attribute (both engines).

        ``data``: what ``data_`` holds (``CrowdData``, or the Dask engine's sizes);
        ``annotators`` (N,): their IDs; ``learned(state)`` gives from the winner's state what
        only the engine can (``Learned``). The state is read by ``vb.State``'s names (q(tau),
        eps, alpha, beta). ``member_mu(state)``: its items' posterior means (M,) in
        ``items_``'s order, for the ensemble's item columns (None: items get none);
        ``alternative(state, window)``: the engine's ``rescues.alternative`` (None: no
        alternative answer is made). Returns the warnings for ``fit`` to issue.
        """
        policy = self.fit_policy
        results = race.race_results(runs)
        if not results:
            raise InputError("the fit was stopped before the first restart finished an iteration")
        best, reason, collapsed = restarts.select(
            results, self.spam_, self.collapse_threshold, interrupted, policy
        )
        s = best.state
        items, categories, w_ann, omega = learned(s)
        warn = fit_warnings(best, collapsed, interrupted, self.max_iter, self.tol, policy)
        sc = data.scale
        self.data_ = data
        self.scale_ = sc
        self.items_ = items
        self.estimates_ = items["estimate"]
        self.sd_ = items["sd"]
        self.annotators_ = outputs.annotators_frame(
            annotators,
            p.n_per_ann,
            s.tau_shape,
            s.tau_rate,
            s.eps if self.spam_ else np.ones(p.n_annotators),
            w_ann,
            s.bias_mean if p.bias else None,
            s.bias_prec if p.bias else None,
        )
        settled = interrupted or collapsed  # no sweeps after a Stop, nor for an all-spam answer
        self._store_ensemble(results, best, sc, member_mu, None if settled else alternative)
        self.spam_distributions_ = outputs.spam_distributions_frame(
            annotators, sc.values, s.dir_a if (self.spam_ and p.spam_dist == "annotator") else None
        )
        self.categories_ = categories
        self.omega_ = omega
        self.alpha_, self.beta_ = float(s.alpha), float(s.beta)
        self.hyperparams_ = outputs.hyperparams(
            s.alpha, s.beta, p, pi, sc.values, p.thresholds, s, sc.names
        )
        self.model_ = outputs.model_description(
            self.model, p, self._extensions()[2], self.hyperparams_, p.gold_mask
        )
        self.trace_ = trace_frame(results, self.spam_)
        self.restarts_ = restarts_frame(results, self.spam_, self.collapse_threshold)
        self.best_restart_ = best.restart
        self.selection_reason_ = reason
        self.lower_bound_ = best.lower_bound
        self.converged_ = bool(best.converged)
        self.n_iter_ = len(best.stage_trace) + len(best.trace)
        self.collapsed_ = collapsed
        self.interrupted_ = interrupted
        self.warnings_ = [w.message for w in warn]
        return warn

    def _store_ensemble(
        self,
        results: list[restarts.RestartRun],
        best: restarts.RestartRun,
        sc: Scale,
        member_mu: Callable[[Any], np.ndarray] | None,
        alternative: Callable[[Any, list], tuple[Any, float, int]] | None = None,
    ) -> None:
        """What the data cannot decide: ``ensemble_`` (the near-tied restarts, the
        winner first, ``restarts.ensemble``), ``ensemble_gap_``, and the stability columns of
        ``items_`` (with ``member_mu``) and ``annotators_`` (``outputs``); and what the fit
        has not settled: ``annotators_['still_moving']``, the annotators whose reliability
        was still leaving its end, or drifting, over the winner's last plain sweeps
        (``rescues.still_moving``; all False without the spam component).

        With ``alternative`` and annotators still moving, ``alternative_`` is the answer with
        them carried the way they were going (``rescues.alternative``: mirrored if leaving
        their end, moved on if drifting): ``annotators`` (their IDs), ``lower_bound``,
        ``bound_above_winner`` (its bound minus the winner's), ``n_iter`` and ``near_tied``
        (a bound no lower than the winner's by more than ``ensemble_gap_``).
        A near-tied alternative joins the ensemble's stability columns: an answer the data
        support as well as the winner's (or better) that differs from it. None otherwise."""
        policy = self.fit_policy
        members = restarts.ensemble(results, best, self.spam_, self.collapse_threshold, policy)
        self.ensemble_ = [m.restart for m in members]
        self.ensemble_gap_ = restarts.ensemble_gap(best.lower_bound, policy)
        n = len(self.annotators_)
        window = best.watch.eps_window
        no = np.zeros(n, dtype=bool)
        moving = rescues.still_moving(window, n, policy) if self.spam_ else no
        states = [m.state for m in members]
        self.alternative_ = None
        if alternative is not None and moving.any():
            idx = np.flatnonzero(moving)
            alt, f, n_iter = alternative(best.state, window)
            near = bool(f >= best.lower_bound - self.ensemble_gap_)
            self.alternative_ = {
                "annotators": self.annotators_.index[idx].tolist(),
                "lower_bound": f,
                "bound_above_winner": float(f - best.lower_bound),
                "n_iter": n_iter,
                "near_tied": near,
            }
            if near:
                states.append(alt)
        eps = np.stack([np.asarray(s.eps, dtype=float) for s in states])
        if not self.spam_:
            eps = np.ones_like(eps)
        ann = stability.annotator_stability(eps)
        self.annotators_["reliability_spread"] = ann["reliability_spread"].to_numpy()
        self.annotators_["unstable"] = ann["unstable"].to_numpy()
        self.annotators_["still_moving"] = moving
        if member_mu is not None and isinstance(self.items_, pd.DataFrame):
            mu = np.stack([member_mu(s) for s in states])
            # a fine scale's estimates are unstable by a share of its fit unit, not of a step
            it = stability.item_stability(mu, sc.values, sc.fit_unit if sc.fine else sc.step)
            self.items_["estimate_spread"] = it["estimate_spread"].to_numpy()
            self.items_["unstable"] = it["unstable"].to_numpy()
        elif member_mu is not None:  # items left on a cluster: the engine adds them per part
            self.items_ = self._partitioned_stability(states, sc)


#: the warning of a fit stopped before every restart finished (the Fit page, which says so in
#: its own words, leaves it out: ``fit_summary.page_warnings``)
STOP_WARNING = "the fit was stopped before every restart finished; best restart so far kept"


def fit_warnings(
    best: restarts.RestartRun,
    collapsed: bool,
    interrupted: bool,
    max_iter: int,
    tol: float,
    policy: FitPolicy = DEFAULT,
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
        remaining = race.remaining_change(best.changes, policy)
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


def trace_frame(results: list[restarts.RestartRun], spam: bool) -> pd.DataFrame:
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
    results: list[restarts.RestartRun], spam: bool, collapse_threshold: float
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
