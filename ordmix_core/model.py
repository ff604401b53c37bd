"""``OrdinalMixture``: the ordinal-discrete-mixture estimator (restarts, selection, results).

The math lives in ``tn.py``, ``updates.py``, ``bound.py`` and ``vb.py``; this class prepares
the data, draws every restart's initialisation from one ``numpy.random.Generator``, runs
them, picks the winner and exposes the results as pandas frames.

Initialisation and selection (model-notes.md): on real data the highest-bound solution can be
the useless all-spam one. So restart 0 first fits the model without the spam component (stage
``nospam``) and warm-starts the mixture from it with ``eps = 0.99``; the other restarts start
from per-item means plus noise. A restart whose share of ratings attributed to the truth
component falls below ``collapse_threshold`` is *collapsed* and is chosen only if every restart
collapsed (then with a warning). Among the rest the highest bound wins, as in the paper.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import updates, vb
from .base import CrowdEstimator
from .data import CrowdData, Scale, prepare
from .errors import InputError

ProgressCallback = Callable[[int, int, float], "bool | None"]


class CollapseWarning(UserWarning):
    """The chosen fit attributes (nearly) every rating to spam."""


@dataclass
class RestartResult:
    restart: int
    init: str
    state: vb.State
    trace: list[float]
    warmup_trace: list[float]
    converged: bool
    truth_share: float  # mean omega: share of ratings explained by the truth component

    @property
    def lower_bound(self) -> float:
        return self.trace[-1] if self.trace else -np.inf


class OrdinalMixture(CrowdEstimator):
    """Lakshminarayanan & Teh's ordinal-discrete-mixture model fitted by variational Bayes.

    Parameters (stored as given; see the paper and model-notes.md):
        granularity: category of instance difficulty, ``instance`` (c(m)=m), ``query`` (needs a
            ``query`` column) or ``global`` (c(m)=1).
        scale: the ordinal scale ``v_1 < ... < v_K``; default the distinct ratings seen.
        ordinal: ordinal (thresholded) likelihood, or the real-valued one (x = rating).
        spam: include the spam component (else omega = eps = 1).
        updates: ``exact`` coordinate-ascent update of q(y) (bound never decreases) or
            ``paper`` for the literal eq. (4).
        n_restarts, max_iter, tol: restarts, iteration cap, stop when ``|dF| < tol``.
        phi, eta: Gamma prior of the inverse difficulty (fixed for identifiability).
        lam, mu: precision and mean of the prior of z (``mu=None``: the mean of the scale).
        pi: spam distribution over the K levels (``None``: uniform).
        warm_start: restart 0 starts from the no-spam fit (recommended on real data).
        collapse_threshold: a fit whose truth share is below this counts as collapsed.
        random_state: seed or Generator; one Generator per fit, every restart draws from it.

    Learned attributes: ``estimates_``, ``sd_`` (Series by instance), ``items_``,
    ``annotators_``, ``categories_`` (DataFrames), ``omega_`` (per rating), ``alpha_``,
    ``beta_``, ``hyperparams_``, ``lower_bound_``, ``trace_`` (every restart's bound),
    ``restarts_`` (one row per restart), ``best_restart_``, ``selection_reason_``,
    ``converged_``, ``n_iter_``, ``collapsed_``, ``warnings_``, ``interrupted_``, ``seconds_``.
    """

    name = "odm"

    def __init__(
        self,
        granularity: str = "instance",
        scale: Scale | Sequence[float] | str | None = None,
        *,
        ordinal: bool = True,
        spam: bool = True,
        updates: str = "exact",
        n_restarts: int = 10,
        max_iter: int = 1000,
        tol: float = 0.1,
        phi: float = 10.0,
        eta: float = 5.0,
        lam: float = 0.1,
        mu: float | None = None,
        pi: Sequence[float] | None = None,
        warm_start: bool = True,
        collapse_threshold: float = 0.05,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.granularity = granularity
        self.scale = scale
        self.ordinal = ordinal
        self.spam = spam
        self.updates = updates
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.phi = phi
        self.eta = eta
        self.lam = lam
        self.mu = mu
        self.pi = pi
        self.warm_start = warm_start
        self.collapse_threshold = collapse_threshold
        self.random_state = random_state

    @property
    def _granularity(self) -> str:  # type: ignore[override]
        return self.granularity

    # ------------------------------------------------------------------ checks
    def _check_params(self, k: int) -> np.ndarray:
        if self.updates not in ("exact", "paper"):
            raise InputError(f"updates must be 'exact' or 'paper', not {self.updates!r}")
        for name in ("n_restarts", "max_iter"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError(f"{name} must be a whole number >= 1, not {v!r}")
        for name in ("phi", "eta", "lam"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise InputError(f"{name} must be a positive number, not {v!r}")
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise InputError(f"tol must be a number >= 0, not {self.tol!r}")
        if self.pi is None:
            pi = np.full(k, 1.0 / k)
        else:
            pi = np.asarray(self.pi, dtype=float)
            if pi.shape != (k,) or np.any(pi <= 0) or not np.all(np.isfinite(pi)):
                raise InputError(
                    f"pi must be {k} positive numbers (one per level), not {self.pi!r}"
                )
            pi = pi / pi.sum()
        return pi

    # ------------------------------------------------------------------ fit
    def fit(
        self, ratings: pd.DataFrame | CrowdData, callback: ProgressCallback | None = None
    ) -> OrdinalMixture:
        """Fit to a long ratings table; ``callback(restart, iteration, F)`` reports progress.

        The callback returning ``False`` stops the fit: the best restart so far is kept and
        ``interrupted_`` is True. ``KeyboardInterrupt`` propagates and leaves the estimator
        as it was before ``fit``.
        """
        t0 = time.perf_counter()
        data = prepare(ratings, self.scale, granularity=self.granularity)
        pi = self._check_params(data.scale.k)
        mu = data.scale.center if self.mu is None else float(self.mu)
        problem = vb.Problem.from_data(
            data,
            mu=mu,
            lam=self.lam,
            phi=self.phi,
            eta=self.eta,
            pi=pi,
            ordinal=self.ordinal,
            spam=self.spam,
            exact=self.updates == "exact",
        )
        rng = np.random.default_rng(self.random_state)
        inits = [self._initial_state(data, problem, r, rng) for r in range(self.n_restarts)]

        results: list[RestartResult] = []
        interrupted = False
        for r, (kind, state) in enumerate(inits):
            res, interrupted = self._run_restart(problem, r, kind, state, callback)
            if res is not None:
                results.append(res)
            if interrupted:
                break
        if not results:
            raise InputError("the fit was stopped before the first restart finished an iteration")
        self._store(data, problem, pi, results, interrupted, time.perf_counter() - t0)
        return self

    def _initial_state(
        self, data: CrowdData, p: vb.Problem, restart: int, rng: np.random.Generator
    ) -> tuple[str, vb.State]:
        """Restart 0: per-item means (the warm-up then refines it); others: means plus noise."""
        n_m, n_n = data.counts()
        n_c = np.bincount(data.cat, minlength=data.n_categories)
        step = data.scale.step
        b = data.scale.thresholds
        tau0 = 1.0 / step**2
        mu_m = (p.mu * p.lam + n_m * data.per_instance_mean()) / (p.lam + n_m)
        tau_e = np.full(data.n_annotators, tau0)
        eps = np.full(data.n_annotators, 0.99)
        kind = "warm" if (self.warm_start and self.spam) else "data"
        if restart > 0:
            mu_m = np.clip(mu_m + rng.normal(0.0, 0.5 * step, mu_m.size), b[0], b[-1])
            tau_e = tau0 * np.exp(rng.normal(0.0, 1.0, data.n_annotators))
            if kind == "warm":
                # diversity comes from the no-spam stage's random start; the mixture starts at eps 0.99
                eps = np.full(data.n_annotators, 0.99)
            else:
                kind = "random"
                eps = rng.uniform(0.5, 0.99, data.n_annotators)
        if not self.spam:
            eps = np.ones(data.n_annotators)
        tau_shape = 1.0 + 0.5 * n_n
        delta_shape = p.phi + 0.5 * n_c
        state = vb.State(
            mu_m=mu_m,
            lam_m=p.lam + n_m * tau0,
            tau_shape=tau_shape,
            tau_rate=tau_shape / tau_e,
            delta_shape=delta_shape,
            delta_rate=delta_shape * p.eta / p.phi,
            eps=eps,
            alpha=1.0,
            beta=1.0 / tau0,
        )
        return kind, state

    def _run_restart(
        self,
        p: vb.Problem,
        r: int,
        kind: str,
        state: vb.State,
        callback: ProgressCallback | None,
    ) -> tuple[RestartResult | None, bool]:
        """Run one restart (after the no-spam warm-up if ``kind == 'warm'``).

        Returns the result (None if stopped before any mixture iteration) and whether the
        callback asked to stop.
        """
        offset = 0
        warm_trace: list[float] = []
        eps0 = state.eps

        def report(it: int, f: float) -> bool | None:
            return None if callback is None else callback(r, offset + it, f)

        try:
            if kind == "warm":
                state, warm_trace, _ = vb.run(
                    p.with_spam(False), state, self.max_iter, self.tol, report
                )
                offset = len(warm_trace)
                state.eps = eps0
            state, trace, converged = vb.run(p, state, self.max_iter, self.tol, report)
        except vb.Stop as stop:
            if offset == 0 and kind == "warm" or not stop.trace:
                return None, True
            return RestartResult(
                r, kind, stop.state, stop.trace, warm_trace, False, _truth_share(stop.state)
            ), True
        return RestartResult(
            r, kind, state, trace, warm_trace, converged, _truth_share(state)
        ), False

    # ------------------------------------------------------------------ results
    def _select(self, results: list[RestartResult]) -> tuple[RestartResult, str, bool]:
        thr = self.collapse_threshold if self.spam else -np.inf
        ok = [res for res in results if res.truth_share >= thr]
        collapsed = [res for res in results if res.truth_share < thr]
        if ok:
            best = max(ok, key=lambda res: res.lower_bound)
            reason = (
                f"restart {best.restart} ({best.init} start) has the highest lower bound "
                f"({best.lower_bound:,.1f}) of the {len(ok)} restart(s) that did not collapse"
            )
            if collapsed:
                top = max(collapsed, key=lambda res: res.lower_bound)
                higher = (
                    " including one with a higher bound"
                    if top.lower_bound > best.lower_bound
                    else ""
                )
                reason += (
                    f"; {len(collapsed)} restart(s) collapsed to the all-spam solution (truth share "
                    f"< {self.collapse_threshold:g}){higher} (restart {top.restart}, "
                    f"{top.lower_bound:,.1f}) and were not chosen"
                )
            return best, reason, False
        best = max(results, key=lambda res: res.lower_bound)
        reason = (
            f"every restart collapsed to the all-spam solution (truth share < "
            f"{self.collapse_threshold:g}); restart {best.restart} has the highest bound"
        )
        return best, reason, True

    def _store(
        self,
        data: CrowdData,
        p: vb.Problem,
        pi: np.ndarray,
        results: list[RestartResult],
        interrupted: bool,
        seconds: float,
    ) -> None:
        best, reason, collapsed = self._select(results)
        s = best.state
        warn: list[str] = []
        if collapsed:
            warn.append(
                "the fit collapsed: almost every rating is explained as spam, so the estimates "
                "are the prior mean. Try warm_start=True, fewer restarts' noise, or the no-spam "
                "model."
            )
        if interrupted:
            warn.append(
                "the fit was stopped before every restart finished; best restart so far kept"
            )
        if not best.converged and not interrupted:
            warn.append(
                f"the chosen restart did not converge within max_iter={self.max_iter} "
                f"(last change of the bound {abs(best.trace[-1] - best.trace[-2]) if len(best.trace) > 1 else float('nan'):.3g})"
            )
        for w in warn:
            warnings.warn(w, CollapseWarning if "collapsed" in w else UserWarning, stacklevel=3)

        n_m, n_n = data.counts()
        e_tau, e_logtau = updates.gamma_moments(s.tau_shape, s.tau_rate)
        e_delta, _ = updates.gamma_moments(s.delta_shape, s.delta_rate)
        inst_idx = pd.Index(data.instances, name="instance")
        sd = 1.0 / np.sqrt(s.lam_m)
        self.data_ = data
        self.scale_ = data.scale
        self.estimates_ = pd.Series(s.mu_m, index=inst_idx, name="estimate")
        self.sd_ = pd.Series(sd, index=inst_idx, name="sd")
        items = pd.DataFrame({"estimate": s.mu_m, "sd": sd, "n_ratings": n_m}, index=inst_idx)
        if data.inst_query is not None:
            items["query"] = data.inst_query
        items["category"] = data.categories[data.cat_of_inst]
        self.items_ = items
        omega = s.omega
        spam_share = 1.0 - np.bincount(
            data.ann, weights=omega, minlength=data.n_annotators
        ) / np.maximum(n_n, 1)
        self.annotators_ = pd.DataFrame(
            {
                "n_ratings": n_n,
                "expertise": e_tau,
                "expertise_sd": np.sqrt(s.tau_shape) / s.tau_rate,
                "reliability": s.eps if self.spam else np.ones(data.n_annotators),
                "spam_share": spam_share,
            },
            index=pd.Index(data.annotators, name="annotator"),
        )
        self.categories_ = pd.DataFrame(
            {
                "difficulty": e_delta,
                "n_ratings": np.bincount(data.cat, minlength=data.n_categories),
            },
            index=pd.Index(data.categories, name="category"),
        )
        self.omega_ = omega
        self.alpha_, self.beta_ = float(s.alpha), float(s.beta)
        self.hyperparams_ = {
            "alpha": self.alpha_,
            "beta": self.beta_,
            "phi": float(p.phi),
            "eta": float(p.eta),
            "mu": float(p.mu),
            "lambda": float(p.lam),
            "pi": [float(x) for x in pi],
            "scale": [float(v) for v in data.scale.values],
            "thresholds": [float(v) for v in data.scale.thresholds],
        }
        rows = []
        for res in results:
            for i, f in enumerate(res.warmup_trace, 1):
                rows.append((res.restart, "nospam", i, f))
            for i, f in enumerate(res.trace, 1):
                rows.append((res.restart, "mixture" if self.spam else "model", i, f))
        self.trace_ = pd.DataFrame(rows, columns=["restart", "stage", "iteration", "lower_bound"])
        self.restarts_ = pd.DataFrame(
            {
                "restart": [r.restart for r in results],
                "init": [r.init for r in results],
                "lower_bound": [r.lower_bound for r in results],
                "n_iter": [len(r.trace) for r in results],
                "warmup_iter": [len(r.warmup_trace) for r in results],
                "converged": [r.converged for r in results],
                "truth_share": [r.truth_share for r in results],
                "collapsed": [
                    self.spam and r.truth_share < self.collapse_threshold for r in results
                ],
            }
        ).set_index("restart")
        self.best_restart_ = best.restart
        self.selection_reason_ = reason
        self.lower_bound_ = best.lower_bound
        self.converged_ = bool(best.converged)
        self.n_iter_ = len(best.trace)
        self.collapsed_ = collapsed
        self.interrupted_ = interrupted
        self.warnings_ = warn
        self.seconds_ = seconds


def _truth_share(s: vb.State) -> float:
    return float(np.mean(s.omega)) if s.omega is not None and s.omega.size else 1.0
