"""``OrdinalMixture``: the ordinal-discrete-mixture estimator, and what both engines share.

The math lives in ``vb`` (``updates``, ``bound``; the sweep, compiled in ``kernels``), the
fit's control in ``fit`` (the race, the step, the rescues and their ``policy``). This class
declares the model's parameters (``__init__``: the one declaration; ``DaskOrdinalMixture``
adds only its cluster's), and does for both engines what does not depend on where the
ratings live: the fit's ``vb.Problem`` from the parameters (``_problem``), every restart's
kind and key from one ``numpy.random.Generator`` (``_start``) and its start of the global
factors (``restarts.init_globals``), the race with its step and rescues (``_schedule``) and
the learned attributes (``_store``, through ``outputs``). The in-memory engine adds only its
sweep over all ratings (``MemorySweeps``) and running restarts side by side in threads.

Initialisation and selection (docs/model.md): on real data the highest-bound solution can be
the useless all-spam one. So with ``nospam_warmup`` (and the spam component) the fit first fits
the model without the spam component (stage ``nospam``) and starts the mixture from that fit
with ``eps = 0.99``. Restart 0 runs that warm-up from the per-item means and every restart r >
0 branches from its result, with noise on the means and the expertise keyed on the IDs and the
restart's key (``restarts.branch_*``). Without ``nospam_warmup`` restarts r > 0 start from the
means and expertise plus that noise and also draw eps at random (``fit/restarts.py``). A restart
whose share of ratings attributed to the truth component falls below ``collapse_threshold`` is
*collapsed* and is chosen only if every restart collapsed (then with a ``CollapseWarning``).
Among the rest the highest bound wins, as in the paper; the restarts near-tied with it form the
ensemble (``restarts.ensemble``) whose disagreement marks items and annotators unstable.

Refits (``init_from``): a fitted model or an ``ordmix fit`` folder gives the starts instead
(``refit.refit_starts``: its posteriors matched by ID, the usual start for anything new, and
up to three variants with q(z) restarted from the data), raced with no warm-up stage.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd

from ..data.coding import id_array
from ..data.crowd import CrowdData, prepare
from ..data.gold import gold_vector
from ..data.scale import Scale
from ..errors import CollapseWarning, ConvergenceWarning, FitWarning
from ..fit import race, rescues, restarts, settle
from ..labels import confusion_model
from ..labels.choose import choose_labels, fine_labels_reason
from ..numerics import jit
from ..results import decisions, outputs, reliability
from ..vb import kernels, phases
from ..vb import sweep as vb
from . import compile_ahead, label_thread, option_frontends, option_kinds, options, refit
from .base import CrowdEstimator
from .engine_steps import EngineSteps
from .learned import Learned, StoresLearned
from .memory_engine import MemorySweeps, RestartThreads
from .models import FINE_SCALE, MODELS, difficulty_prior

__all__ = ["MODELS", "CollapseWarning", "ConvergenceWarning", "OrdinalMixture"]

ProgressCallback = Callable[[int, int, float], "bool | None"]


@option_kinds.register_estimator
class OrdinalMixture(CrowdEstimator, EngineSteps, StoresLearned):
    """Lakshminarayanan & Teh's ordinal-discrete-mixture model fitted by variational Bayes.

    {parameters}
    crowd-kit's names: ``fit_predict`` (labels), ``fit_predict_proba`` (level probabilities),
    ``fit_predict_score`` (the posterior means), and after ``fit`` ``labels_``, ``probas_``
    (indexed by ``task``) and ``skills_`` (reliability, by ``worker``); see ``base``.

    Learned attributes: ``label_result_`` (``labels.choose.LabelResult``: the one posterior
    every item column is read from, ``decisions.item_decisions``), ``estimates_``, ``sd_``
    (Series by instance: that posterior's mean and sd of the level's value; the paper's model:
    its continuous posterior's), ``items_``,
    ``annotators_``, ``categories_`` (DataFrames), ``omega_`` (per rating), ``alpha_``,
    ``beta_``, ``hyperparams_`` (with ``lambda_b`` and the learned ``pi``), ``model_`` (the
    model fitted, its stages and why), ``lower_bound_``, ``trace_`` (every restart's bound),
    ``restarts_`` (one row per restart), ``best_restart_``, ``selection_reason_``,
    ``converged_``, ``n_iter_``, ``collapsed_``, ``warnings_``, ``interrupted_``, ``seconds_``,
    ``spam_`` (whether the fitted model has the spam component), ``annotator_flags_``
    (``reliability.annotator_flags`` at its default settings, from the posterior whose median
    is ``annotators_["reliability"]``),
    ``ensemble_`` (the restarts near-tied with the winner, ``restarts.ensemble``),
    ``ensemble_gap_`` and ``alternative_`` (the answer with the still-moving annotators
    carried the way they were going, ``rescues.alternative``; in the ensemble when near-tied;
    None when no annotator was still moving); ``items_`` and ``annotators_`` say what they
    disagree on (``estimate_spread`` / ``reliability_spread`` and ``unstable``, ``outputs``).
    """

    name = "odm"

    def __init__(
        self,
        granularity: str = "instance",
        scale: Scale | Sequence[float] | str | None = None,
        *,
        ordinal: bool = True,
        spam: bool | None = None,
        model: str = "extended",
        bias: bool | None = None,
        spam_dist: str | None = None,
        labels: str | None = None,
        updates: str = "exact",
        n_restarts: int | None = None,
        max_iter: int = 1000,
        tol: float = 1e-6,
        tol_estimate: float = 0.03,
        phi: float | None = None,
        eta: float | None = None,
        lam: float = 0.1,
        mu: float | None = None,
        pi: Sequence[float] | None = None,
        nospam_warmup: bool = True,
        init_from: object | None = None,
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
        self.model = model
        self.bias = bias
        self.spam_dist = spam_dist
        self.labels = labels
        self.updates = updates
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.tol_estimate = tol_estimate
        self.phi = phi
        self.eta = eta
        self.lam = lam
        self.mu = mu
        self.pi = pi
        self.nospam_warmup = nospam_warmup
        self.init_from = init_from
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
        self._validate(scale)
        return options.spam_distribution(self.pi, k)

    def _validate(self, scale: Scale | None = None) -> None:
        options.validate_params(self, scale)

    def _extensions(self) -> tuple[bool, str, str | None]:
        """``(bias, spam_dist, pre_stage)`` of this fit: ``model``'s settings (on a fine
        scale ``FINE_SCALE``'s) unless ``bias`` / ``spam_dist`` are given; ``pre_stage`` is
        ``uniform`` when a learned spam distribution is preceded by a mixture stage with the
        fixed one (warm starts; not in a refit from a previous fit, ``init_from``, which
        already went through it)."""
        base = {**MODELS[self.model], **(FINE_SCALE if self._fine_scale() else {})}
        bias = base["bias"] if self.bias is None else bool(self.bias)
        dist = base["spam_dist"] if self.spam_dist is None else self.spam_dist
        if not self.spam_:
            dist = "uniform"
        pre = "uniform" if (dist != "uniform" and self.nospam_warmup) else None
        if self.init_from is not None:
            pre = None
        return bias, dist, pre

    def _fine_scale(self) -> bool:
        """Whether the scale of this fit is fine (``Scale.fine``); known once ``_problem``
        has made the fit's problem (both engines make it before anything reads this)."""
        scale = getattr(self, "_fit_scale", None)
        return scale is not None and scale.fine

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        ratings: pd.DataFrame | CrowdData,
        callback: ProgressCallback | None = None,
        gold: pd.Series | None = None,
    ) -> OrdinalMixture:
        """Fit to a long ratings table; ``callback(restart, iteration, F)`` reports progress.

        ``gold``: known true values (a Series by instance): those items' z is observed (their
        estimate is the gold value, sd 0) and their raters are judged against it; ``items_``
        gets a ``gold`` column.

        The callback returning ``False`` stops the fit: the best restart so far is kept and
        ``interrupted_`` is True. ``KeyboardInterrupt`` propagates and leaves the estimator
        as it was before ``fit``.
        """
        t0 = time.perf_counter()
        # 1. the parameters, then the ratings validated and coded once (CrowdData)
        self._validate()  # before the data is read: a bad scale= is named as such
        data = prepare(ratings, self.scale, granularity=self.granularity)
        gold_m = gold_vector(gold, data)
        # 2. one Generator for the whole fit: every restart draws its key from it
        rng = np.random.default_rng(self.random_state)
        # 3. the fit (_fit_data: problem, starts, the race of fit.race, the winner). On a
        # first run the label model's kernels compile meanwhile in another process, or all of
        # them have been compiling in the background (the dashboard's) and are waited for;
        # once compiled, the label fit, which reads the ratings alone, runs beside the race
        self.spam_ = self.spam is not False
        compile_ahead.wait_background()
        label_fit = self._label_fit(data, gold_m)
        beside = label_thread.start(label_fit, data.n_ratings) if label_fit else None
        with compile_ahead.label_kernels():
            warn = self._fit_data(data, gold_m, rng, callback)
        # 4. the labels: one posterior per item, every item column read from it
        self._choose_labels(beside.result if beside else label_fit, gold_m)
        # 5. each annotator's reliability, judged against the posterior the labels come
        # from: one posterior for its point, interval and flag
        self.annotator_flags_, median = reliability.fitted_flags(self)
        self.annotators_["reliability"] = median
        label_warn = self._label_warnings()
        self.warnings_ = [*self.warnings_, *(w.message for w in label_warn)]
        self.seconds_ = time.perf_counter() - t0  # the whole fit, the label path included
        _emit(warn + label_warn)
        return self

    def _label_fit(self, data: CrowdData, gold_m: np.ndarray | None) -> Callable | None:
        """``labels.choose_labels`` of ``data`` as a call; None: the labels are the continuous
        posterior's (the paper's model, any model on a fine scale)."""
        if self._label_model(fine=data.scale.fine) == "continuous":
            return None
        values = data.scale.values
        gold = None if gold_m is None else confusion_model.gold_levels(gold_m, values)
        return partial(
            choose_labels, data.ann, data.inst, data.level, data.n_annotators,
            data.n_instances, values, gold, names=data.scale.names,
        )  # fmt: skip

    def _choose_labels(self, label_fit: Callable | None, gold_m: np.ndarray | None) -> None:
        """``label_result_``: the one posterior of every item, ``label_fit()``'s (``_label_fit``),
        or with None the continuous posterior over the scale's intervals
        (``_continuous_labels``); the items' ``estimate`` and ``sd`` read from it;
        ``model_["labels"]`` says which, and on a fine scale why (``_describe_labels``)."""
        if label_fit is None:
            self._continuous_labels(gold_m)
        else:
            self.label_result_ = label_fit()
            self._estimates_from_labels(gold_m)
        self._describe_labels()

    def _continuous_labels(self, gold_m: np.ndarray | None) -> None:
        """``label_result_`` from the continuous posterior over the scale's intervals (both
        engines). On up to 11 levels the items keep q(z)'s estimate and sd (the paper's
        model); on a fine scale they are the levels' posterior mean and sd
        (``_estimates_from_labels``; ``gold_m``: the gold values by item, NaN elsewhere)."""
        result = decisions.continuous_labels(self)
        if not self.scale_.fine:
            self.label_result_ = result
            return
        post = replace(result.posterior, estimate=None, sd=None)
        self.label_result_ = replace(result, posterior=post)
        self._estimates_from_labels(gold_m)

    def _describe_labels(self, result=None) -> None:
        """``model_["labels"]``: ``result``'s description (a ``LabelResult``; default
        ``label_result_``), and on a fine scale whose labels were not asked for, why they are
        the continuous posterior's (both engines)."""
        self.model_["labels"] = (result or self.label_result_).describe()
        if self.scale_.fine and self.labels is None:
            self.model_["labels"]["why"] = fine_labels_reason(self.scale_.k)

    def _estimates_from_labels(self, gold_m: np.ndarray | None) -> None:
        """The items' ``estimate`` and ``sd``: the posterior mean and sd of the level's value
        under ``label_result_`` (inside the scale); a gold item's are its gold and 0."""
        estimate, sd = self.label_result_.posterior.estimates()
        if gold_m is not None:  # a gold item's value is its gold
            known = np.isfinite(gold_m)
            estimate = np.where(known, gold_m, estimate)
            sd = np.where(known, 0.0, sd)
        self.items_["estimate"] = estimate
        self.items_["sd"] = sd
        self.estimates_, self.sd_ = self.items_["estimate"], self.items_["sd"]

    def _label_warnings(self, undetermined: float | None = None) -> list[FitWarning]:
        """What the user should know about the labels (``decisions.label_warnings``), both
        engines': ``undetermined``, the share of tied items, when the posterior is not in this
        process (the Dask engine's items left on the cluster); else read from
        ``label_result_``."""
        if undetermined is None:
            undetermined = self.label_result_.undetermined_share()
        # a collapsed fit says so already (CollapseWarning): no second warning about its spam
        spam = 1.0 - decisions.truth_share(self) if self.spam_ and not self.collapsed_ else 0.0
        return decisions.label_warnings(spam, undetermined)

    @property
    def labels_(self) -> pd.Series:
        """Each task's label as ``decisions.item_decisions`` gives it (the most probable level
        of its posterior; an undetermined item keeps it), Series indexed by ``task`` in the
        order the tasks first appear in the ratings, named ``agg_label``, in the ratings' type
        (``label_index``)."""
        return self._task_labels(self._item_decisions()["label"].to_numpy())

    @property
    def skills_(self) -> pd.Series:
        """Each worker's reliability (``annotators_["reliability"]``: the median of the
        posterior of their share of ratings that give their item's level rather than spam,
        judged against the posterior the labels come from), indexed by ``worker`` and named
        ``skill`` as in crowd-kit."""
        rel = self.annotators_["reliability"]
        return pd.Series(
            rel.to_numpy(), index=pd.Index(rel.index.to_numpy(), name="worker"), name="skill"
        )

    def _level_proba(self) -> np.ndarray:
        dec = self._item_decisions()
        return dec[decisions.level_columns(self.scale_.values, self.scale_.names)].to_numpy()

    def _label_model(self, fine: bool | None = None) -> str:
        """How labels are decided: ``labels``, else as ``model`` says (``MODELS``), on a fine
        scale (``fine``; default: the fit's) from the continuous posterior (``FINE_SCALE``)."""
        if self.labels is not None:
            return self.labels
        fine = self._fine_scale() if fine is None else fine
        return FINE_SCALE["labels"] if fine else MODELS[self.model]["labels"]

    def _fit_data(
        self,
        data: CrowdData,
        gold_m: np.ndarray | None,
        rng: np.random.Generator,
        callback: ProgressCallback | None,
    ) -> list[FitWarning]:
        """One fit of the model with the spam component ``spam_`` to prepared ratings: the
        restarts, the race and the learned attributes. Returns the warnings to issue."""
        self.annotator_flags_ = None
        p, pi = self._problem(
            data.scale, np.bincount(data.ann, minlength=data.n_annotators), data.n_categories
        )
        p = p.with_ratings(data.ann, data.inst, data.cat, data.level, data.n_instances)
        p = p.with_gold(gold_m)
        runs = []
        inputs = self._start_inputs(data)
        for r in range(self._restarts()):
            kind, key = self._start(r, rng)
            state = self._initial_from_key(data, p, r, kind, key, inputs)
            runs.append(restarts.RestartRun(r, kind, state, key=key))
        if self.init_from is not None:  # a refit: starts from the previous posteriors race
            prev = refit.load_previous(self.init_from)
            starts = refit.refit_starts(prev, data, p, [run.state for run in runs])
            runs = [
                restarts.RestartRun(r, *start, key=runs[r].key) for r, start in enumerate(starts)
            ]
        with np.errstate(over="ignore", under="ignore"):
            branch = self._memory_branch(data, p, inputs.inst_hash, inputs.ann_hash)
            sweeps = MemorySweeps(p)
            interrupted = self._race(p, runs, callback, branch, sweeps)
        phases.release_scratch()  # two floats a rating, not needed by what follows

        def alternative_of(s: vb.State, window: list) -> tuple[vb.State, float, int]:
            with np.errstate(over="ignore", under="ignore"):
                out = rescues.alternative(sweeps, s, window, self.fit_policy)
            phases.release_scratch()
            return out

        def learned(s: vb.State) -> Learned:
            n_m = np.bincount(data.inst, minlength=data.n_instances)
            ids = id_array(data.instances)  # made here, after the sweeps (compact_ids)
            cat_ids = ids if data.categories is data.instances else id_array(data.categories)
            cat_names = cat_ids[data.cat_of_inst]
            # the gold items as their own ratings have them: the crowd_estimate column
            known = p.gold_mask is not None and not interrupted
            crowd = settle.own_ratings(p, s) if known else None
            items = outputs.items_frame(
                ids, s.mu_m, s.lam_m, n_m, data.inst_query, cat_names, p.gold_mask, crowd
            )
            n_c = np.bincount(data.cat, minlength=data.n_categories)
            cats = outputs.categories_frame(cat_ids, s.delta_shape, s.delta_rate, n_c)
            w_ann = np.bincount(data.ann, weights=s.omega, minlength=data.n_annotators)
            return items, cats, w_ann, s.omega

        return self._store(
            data, p, pi, data.annotators, runs, interrupted, learned, lambda s: s.mu_m,
            alternative_of,
        )  # fmt: skip

    def _race(
        self,
        p: vb.Problem,
        runs: list[restarts.RestartRun],
        callback: ProgressCallback | None,
        branch: race.BranchFn | None = None,
        sweeps: MemorySweeps | None = None,
    ) -> bool:
        """The shared race (``_schedule``) with this engine's sweep (``sweeps``, made here
        when None); restarts of a round run in ``n_jobs`` threads. Returns True if stopped."""
        sweeps = MemorySweeps(p) if sweeps is None else sweeps
        jobs = self._n_jobs(p, len(runs))
        running = RestartThreads()
        with ThreadPoolExecutor(jobs, thread_name_prefix="ordmix") as pool:

            def map_runs(fn, todo: list[restarts.RestartRun]) -> None:
                if jobs == 1:
                    return restarts.map_sequential(fn, todo)
                futures = [pool.submit(running.run, fn, run) for run in todo]
                errors = [f.exception() for f in futures]  # waits for every one
                for err in errors:
                    if err is not None:
                        raise err

            # a restart sweeping alone takes every core for its passes: the shared warm-up,
            # the last finisher's tail, a fit of one restart (unless n_jobs asks for one thread)
            alone = running.alone if jobs > 1 else (lambda: True) if self.n_jobs is None else None
            kernels.run_alone(alone)
            try:
                return self._schedule(runs, sweeps, callback, map_runs, branch)
            finally:
                kernels.run_alone(None)

    def _n_jobs(self, p: vb.Problem, n_runs: int) -> int:
        """Threads for restarts: the cores, unless the kernel itself is already parallel."""
        if self.n_jobs is not None:
            return max(1, min(int(self.n_jobs), n_runs))
        if p.n_ratings >= kernels.PARALLEL_MIN_RATINGS or not kernels.USE_JIT:
            return 1
        return max(1, min(jit.cores(), n_runs))

    # ------------------------------------------------------------------ both engines
    def _problem(
        self, scale: Scale, n_per_ann: np.ndarray, n_categories: int
    ) -> tuple[vb.Problem, np.ndarray]:
        """The fit's ``vb.Problem`` without ratings, from this estimator's parameters (the one
        place they become the model's constants), and the spam distribution ``pi`` (K,).
        ``lam`` is in ``scale.fit_unit``s (a tenth of a fine scale's range).

        ``n_per_ann`` (N,): ratings per annotator; ``n_categories``: global categories (0 when
        they are local to the Dask engine's blocks).
        """
        pi = self._check_params(scale.k, scale)
        self._fit_scale = scale  # what ``_fine_scale`` reads
        bias, spam_dist, _ = self._extensions()
        phi, eta = difficulty_prior(self.model, self.phi, self.eta)
        problem = vb.Problem.create(
            scale,
            pi=pi,
            mu=scale.center if self.mu is None else float(self.mu),
            lam=self.lam / scale.fit_unit**2,  # lam is in the fit's units
            phi=phi,
            eta=eta,
            ordinal=self.ordinal,
            spam=self.spam_,
            exact=self.updates == "exact",
            n_per_ann=n_per_ann,
            n_categories=n_categories,
            bias=bias,
            spam_dist=spam_dist,
        )
        return problem, pi


# the one description of each parameter is the options table's (``option_frontends.parameters_doc``)
OrdinalMixture.__doc__ = OrdinalMixture.__doc__.replace(
    "    {parameters}", option_frontends.parameters_doc()
)


def _emit(warn: list[FitWarning]) -> None:
    """Issue a fit's warnings with their classes, attributed to the line that called ``fit``
    (this is called from ``fit`` itself)."""
    for w in warn:
        warnings.warn(w.message, w.category, stacklevel=3)
