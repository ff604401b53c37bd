"""The end of both engines' fits: the winning restart chosen and every learned attribute set.

``StoresLearned`` is a part of ``OrdinalMixture`` (the in-memory and the Dask engine both
end with ``_store``); it reads the estimator's ``spam_``, ``collapse_threshold``,
``max_iter``, ``tol``, ``model`` and ``_extensions()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..data.scale import Scale
from ..errors import InputError
from ..fit import acceleration, restarts, schedule, selection
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
        t0: float,
        learned: Callable[[Any], Learned],
        member_mu: Callable[[Any], np.ndarray] | None = None,
        alternative: Callable[[Any, list], tuple[Any, float, int]] | None = None,
    ) -> list[selection.FitWarning]:
        """Choose the winning restart and set every learned attribute (both engines).

        ``data``: what ``data_`` holds (``CrowdData``, or the Dask engine's sizes);
        ``annotators`` (N,): their IDs; ``learned(state)`` gives from the winner's state what
        only the engine can (``Learned``). The state is read by ``vb.State``'s names (q(tau),
        eps, alpha, beta). ``member_mu(state)``: its items' posterior means (M,) in
        ``items_``'s order, for the ensemble's item columns (None: items get none);
        ``alternative(state, window)``: the engine's ``alternative.alternative`` (None: no
        alternative answer is made). Returns the warnings for ``fit`` to issue.
        """
        results = schedule.race_results(runs)
        if not results:
            raise InputError("the fit was stopped before the first restart finished an iteration")
        best, reason, collapsed = selection.select(
            results, self.spam_, self.collapse_threshold, interrupted
        )
        s = best.state
        items, categories, w_ann, omega = learned(s)
        warn = selection.fit_warnings(best, collapsed, interrupted, self.max_iter, self.tol)
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
            s.alpha, s.beta, p, pi, sc.values, sc.thresholds, s, sc.names
        )
        self.model_ = outputs.model_description(
            self.model, p, self._extensions()[2], self.hyperparams_, p.gold_mask
        )
        self.trace_ = selection.trace_frame(results, self.spam_)
        self.restarts_ = selection.restarts_frame(results, self.spam_, self.collapse_threshold)
        self.best_restart_ = best.restart
        self.selection_reason_ = reason
        self.lower_bound_ = best.lower_bound
        self.converged_ = bool(best.converged)
        self.n_iter_ = len(best.stage_trace) + len(best.trace)
        self.collapsed_ = collapsed
        self.interrupted_ = interrupted
        self.warnings_ = [w.message for w in warn]
        self.seconds_ = time.perf_counter() - t0
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
        winner first, ``selection.ensemble``), ``ensemble_gap_``, and the stability columns of
        ``items_`` (with ``member_mu``) and ``annotators_`` (``outputs``); and what the fit
        has not settled: ``annotators_['still_moving']``, the annotators whose reliability
        was still leaving its end, or drifting, over the winner's last plain sweeps
        (``acceleration.still_moving``; all False without the spam component).

        With ``alternative`` and annotators still moving, ``alternative_`` is the answer with
        them carried the way they were going (``alternative.alternative``: mirrored if leaving
        their end, moved on if drifting): ``annotators`` (their IDs), ``lower_bound``,
        ``bound_above_winner`` (its bound minus the winner's), ``n_iter`` and ``near_tied``
        (a bound no lower than the winner's by more than ``ensemble_gap_``).
        A near-tied alternative joins the ensemble's stability columns: an answer the data
        support as well as the winner's (or better) that differs from it. None otherwise."""
        members = selection.ensemble(results, best, self.spam_, self.collapse_threshold)
        self.ensemble_ = [m.restart for m in members]
        self.ensemble_gap_ = selection.ensemble_gap(best.lower_bound)
        n = len(self.annotators_)
        moving = (
            acceleration.still_moving(best.eps_window, n) if self.spam_ else np.zeros(n, dtype=bool)
        )
        states = [m.state for m in members]
        self.alternative_ = None
        if alternative is not None and moving.any():
            idx = np.flatnonzero(moving)
            alt, f, n_iter = alternative(best.state, best.eps_window)
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
            it = stability.item_stability(mu, sc.values, sc.step)
            self.items_["estimate_spread"] = it["estimate_spread"].to_numpy()
            self.items_["unstable"] = it["unstable"].to_numpy()
        elif member_mu is not None:  # items left on a cluster: the engine adds them per part
            self.items_ = self._partitioned_stability(states, sc)
