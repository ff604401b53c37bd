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

import os
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from . import accel, init, kernels, restarts, updates, vb
from .base import CrowdEstimator
from .data import CrowdData, Scale, prepare
from .errors import InputError
from .rand import id_hash

ProgressCallback = Callable[[int, int, float], "bool | None"]


class CollapseWarning(UserWarning):
    """The chosen fit attributes (nearly) every rating to spam."""


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
        prune_restarts: successive halving: after ``prune_start`` mixture iterations, then
            after each doubling, drop the worse half of the unfinished restarts.
        accelerate: SQUAREM extrapolation every third sweep, kept only when it raises the
            bound (the trace stays monotone); fewer sweeps to the same optimum.
        n_jobs: threads running restarts side by side (None: the cores, when the crowd is
            small enough that the sweep itself runs on one thread); results do not change.
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
        prune_restarts: bool = True,
        prune_start: int = 5,
        accelerate: bool = True,
        n_jobs: int | None = None,
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
        self.prune_restarts = prune_restarts
        self.prune_start = prune_start
        self.accelerate = accelerate
        self.n_jobs = n_jobs
        self.random_state = random_state

    @property
    def _granularity(self) -> str:  # type: ignore[override]
        return self.granularity

    # ------------------------------------------------------------------ checks
    def _check_params(self, k: int, scale: Scale | None = None) -> np.ndarray:
        """Check every parameter against the options table (InputError naming the first bad
        one); ``scale``: the fit's scale, when known. Returns the spam distribution (K,)."""
        from . import options

        options.validate_params(self, scale)
        return options.spam_distribution(self.pi, k)

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
        runs = [restarts.RestartRun(r, kind, st) for r, (kind, st) in enumerate(inits)]
        with np.errstate(over="ignore", under="ignore"):
            interrupted = self._race(problem, runs, callback)
        results = restarts.race_results(runs)
        if not results:
            raise InputError("the fit was stopped before the first restart finished an iteration")
        self._store(data, problem, pi, results, interrupted, time.perf_counter() - t0)
        return self

    def _race(
        self, p: vb.Problem, runs: list[restarts.RestartRun], callback: ProgressCallback | None
    ) -> bool:
        """The shared restart schedule (``restarts.race``) with this engine's sweep.

        Restarts of a round run in ``n_jobs`` threads; with ``accelerate`` every third sweep
        starts from a SQUAREM proposal and is kept only if its bound beats the plain sweep
        (``accel.py``). Returns True if stopped.
        """
        lo, hi = p.thresholds[0], p.thresholds[-1]
        problems = {True: p, False: p.with_spam(False)}

        def step(run: restarts.RestartRun, spam: bool) -> float:
            q = problems[spam]
            new, f = vb.sweep(q, run.state)
            if self.accelerate and run.history is not None and len(run.trace) % 3 == 2:
                prop = accel.squarem_proposal(*run.history, new, lo, hi)
                if prop is not None:
                    cand, fc = vb.sweep(q, prop)
                    if np.isfinite(fc) and fc > f:
                        new, f = cand, fc
            run.history = (run.state, new) if run.state.omega is not None else None
            run.state = new
            run.truth_share = float(np.mean(new.omega)) if new.omega.size else 1.0
            return f

        eps0 = {run.restart: run.state.eps.copy() for run in runs}

        def start_mixture(run: restarts.RestartRun) -> None:
            run.state.eps = eps0[run.restart].copy()

        jobs = self._n_jobs(p, len(runs))
        with ThreadPoolExecutor(jobs, thread_name_prefix="ordmix") as pool:

            def map_runs(fn, todo: list[restarts.RestartRun]) -> None:
                if jobs == 1:
                    return restarts.map_sequential(fn, todo)
                futures = [pool.submit(fn, run) for run in todo]
                errors = [f.exception() for f in futures]  # waits for every one
                for err in errors:
                    if err is not None:
                        raise err

            return self._schedule(runs, step, start_mixture, callback, map_runs)

    def _schedule(
        self,
        runs: list[restarts.RestartRun],
        step: restarts.StepFn,
        start_mixture: Callable[[restarts.RestartRun], None],
        callback: ProgressCallback | None,
        map_runs: restarts.MapRuns = restarts.map_sequential,
    ) -> bool:
        """``restarts.race`` with this estimator's settings (both engines call it)."""
        return restarts.race(
            runs,
            step,
            start_mixture,
            spam=self.spam,
            max_iter=self.max_iter,
            tol=self.tol,
            prune=self.prune_restarts,
            prune_start=self.prune_start,
            collapse_threshold=self.collapse_threshold,
            callback=callback,
            map_runs=map_runs,
        )

    def _n_jobs(self, p: vb.Problem, n_runs: int) -> int:
        """Threads for restarts: the cores, unless the kernel itself is already parallel."""
        if self.n_jobs is not None:
            return max(1, min(int(self.n_jobs), n_runs))
        if p.n_ratings >= kernels.PARALLEL_MIN_RATINGS or not kernels.USE_JIT:
            return 1
        return max(1, min(len(os.sched_getaffinity(0)), n_runs))

    def _initial_state(
        self, data: CrowdData, p: vb.Problem, restart: int, rng: np.random.Generator
    ) -> tuple[str, vb.State]:
        """Restart 0: per-item means (the warm-up then refines it); others: means plus noise.

        The noise is keyed on IDs and on a key drawn from ``rng`` (``init.py``), so it does not
        depend on row order or on how the data is partitioned.
        """
        key = restarts.restart_key(rng)
        kind = restarts.restart_kind(restart, self.warm_start, self.spam)
        n_m, n_n = data.counts()
        step = data.scale.step
        sum_m = np.bincount(data.inst, weights=data.values, minlength=data.n_instances)
        mu_m, lam_m = init.init_instances(
            sum_m, n_m, id_hash(data.instances), key, restart, p.mu, p.lam,
            data.scale.thresholds, step,
        )  # fmt: skip
        tau_shape, tau_rate, eps = init.init_annotators(
            n_n, id_hash(data.annotators), key, restart, step, self.spam, kind == "random"
        )
        delta_shape, delta_rate = init.init_categories(
            np.bincount(data.cat, minlength=data.n_categories), p.phi, p.eta
        )
        state = vb.State(
            mu_m=mu_m,
            lam_m=lam_m,
            tau_shape=tau_shape,
            tau_rate=tau_rate,
            delta_shape=delta_shape,
            delta_rate=delta_rate,
            eps=eps,
            alpha=1.0,
            beta=step**2,
        )
        return kind, state

    # ------------------------------------------------------------------ results
    def _store(
        self,
        data: CrowdData,
        p: vb.Problem,
        pi: np.ndarray,
        results: list[restarts.RestartRun],
        interrupted: bool,
        seconds: float,
    ) -> None:
        best, reason, collapsed = restarts.select(results, self.spam, self.collapse_threshold)
        s = best.state
        warn = restarts.fit_warnings(best, collapsed, interrupted, self.max_iter, self.tol)
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
        self.trace_ = restarts.trace_frame(results, self.spam)
        self.restarts_ = restarts.restarts_frame(results, self.spam, self.collapse_threshold)
        self.best_restart_ = best.restart
        self.selection_reason_ = reason
        self.lower_bound_ = best.lower_bound
        self.converged_ = bool(best.converged)
        self.n_iter_ = len(best.trace)
        self.collapsed_ = collapsed
        self.interrupted_ = interrupted
        self.warnings_ = warn
        self.seconds_ = seconds
