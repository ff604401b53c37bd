"""The dashboard's fit, without streamlit: settings, a background job, and a plain summary.

:class:`FitParams` holds the Fit page's settings as the estimator's keyword arguments, with the
options table's defaults (``options``); :class:`FitJob` runs
:class:`~ordmix_core.estimators.ordinal_mixture.OrdinalMixture` on a data set's prepared
ratings in a worker thread; its progress callback records each restart's iteration and obeys Stop,
so a page can poll it and a Stop keeps the best restart found so far. :func:`fit_summary` and
:func:`selection_explanation` say in plain words what a fit found, with the evidence-aware
flags of ``decisions.py`` (through ``decision_columns.decide``).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..estimators import compile_ahead, option_frontends, option_kinds
from ..estimators.models import difficulty_prior
from ..estimators.ordinal_mixture import OrdinalMixture
from ..fit.policy import DEFAULT as FIT_POLICY
from ..numerics import jit
from .report import Dataset

#: sweeps of the first halving round (``OrdinalMixture``'s ``prune_start``)
PRUNE_START = option_kinds.estimator_default("prune_start")
#: options the Fit page does not show: the scale is the data set's (set on the Data page)
NOT_ON_FIT_PAGE = ("scale",)
#: the dashboard's defaults where they are not the command line's: query granularity, the
#: paper's choice for TREC (the Fit page falls back to the first offered without queries)
DASHBOARD_DEFAULTS: dict[str, Any] = {"granularity": "query"}
#: Fit page settings that are not estimator parameters: ``use_gold`` (fit with the data set's
#: gold items known) is an argument of ``fit``
FIT_SETTINGS: dict[str, Any] = {"use_gold": False}


def fit_page_options(group: str | None = None) -> list[option_kinds.Option]:
    """The options table's entries the Fit page shows (of one group: basic / advanced)."""
    return [o for o in option_frontends.dashboard_options(group) if o.name not in NOT_ON_FIT_PAGE]


class FitParams:
    """The Fit page's settings: estimator keyword arguments named as in the options table.

    Unset ones take the table's command-line default (seed 0) or :data:`DASHBOARD_DEFAULTS`;
    the values are not checked here (the Fit page checks them with
    ``option_frontends.to_estimator_kwargs``; a bad one given directly makes the fit fail with the
    estimator's message). Read a setting as an attribute: ``params.n_restarts``.
    """

    def __init__(self, **kwargs: Any) -> None:
        names = [o.name for o in fit_page_options()] + list(FIT_SETTINGS)
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise TypeError(f"not a Fit page setting: {', '.join(unknown)}")
        values = {o.name: o.ui_default for o in fit_page_options()}
        self._values = {**values, **DASHBOARD_DEFAULTS, **FIT_SETTINGS, **kwargs}

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FitParams) and other._values == self._values

    def __repr__(self) -> str:  # for debugging; users see describe()
        return f"FitParams({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`OrdinalMixture` (``use_gold`` is ``fit``'s)."""
        return {k: v for k, v in self._values.items() if k not in FIT_SETTINGS}

    def describe(self) -> str:
        """The settings in words, for the result box (not a Python repr)."""
        mu = "the mean of the scale" if self.mu is None else f"{self.mu:g}"
        restarts = (
            "restarts as the labels need" if self.n_restarts is None
            else f"{self.n_restarts} restart(s)"
        )  # fmt: skip
        phi, eta = difficulty_prior(self.model, self.phi, self.eta)
        return (
            f"{self.granularity} granularity, {restarts}, at most "
            f"{self.max_iter} sweeps each, tolerance {self.tol:g} relative and "
            f"{self.tol_estimate:g} on estimates; "
            + ("ordinal" if self.ordinal else "real-valued")
            + " likelihood, "
            + {
                None: "the spam component as the model decides",
                True: "with the spam component",
                False: "without the spam component",
            }[self.spam]
            + f", {self.model} model, {self.updates} updates"
            + (", gold items known" if self.use_gold else "")
            + f"; priors phi {phi:g}, "
            f"eta {eta:g}, lambda {self.lam:g}, mu {mu}; seed {self.random_state}"
        )


@dataclass
class FitResult:
    """A finished fit and what it was fitted on."""

    model: OrdinalMixture
    params: FitParams
    dataset: str
    stopped: bool = False  # the user pressed Stop: the best restart so far was kept
    fit_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # names it in caches


@dataclass
class FitJob:
    """A fit running in a worker thread; the callback reports progress and obeys Stop.

    The worker touches nothing but this object; a page polls :meth:`fraction` /
    :meth:`status` and takes the result with :meth:`outcome` once :attr:`done` is set.
    """

    dataset: Dataset
    params: FitParams
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    restart: int = 0  # the restart that reported last
    iteration: int = 0
    bound: float = float("nan")
    iters: dict[int, int] = field(default_factory=dict)  # latest iteration of each restart
    warmup_sweeps: int | None = None  # the shared warm-up's sweeps, once the others branched
    reports: int = 0  # sweeps reported, of every restart
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    model: OrdinalMixture | None = None
    error: str | None = None
    collected: bool = False
    peak: float = 0.0  # the bar never goes back
    compile_note: str | None = None  # "compiling (once, about N s)" once numba started
    compile_expected: float = 0.0  # its N
    compile_started: float | None = None
    compiling: bool = False  # numba is compiling a kernel right now

    #: sweeps a kept restart typically needs a stage, for the progress estimate (the TREC
    #: demo's two finalists take 96-137 a stage, the simulated demo's fewer; at 40 the TREC
    #: demo's bar runs 0.30 ahead of its sweeps)
    TYPICAL_ITERATIONS = 60

    def callback(self, restart: int, iteration: int, bound: float) -> bool:
        """The engine's progress callback: record, and return False once Stop was pressed.

        Restarts may run side by side and in rounds, so progress is kept per restart.
        """
        if restart not in self.iters and len(self.iters) == 1:  # the warm-up is over
            self.warmup_sweeps = self.reports
        self.iters[restart] = iteration
        self.reports += 1
        self.restart, self.iteration, self.bound = restart, iteration, bound
        return not self.stop.is_set()

    def compile_report(self, done: int, total: int, active: bool) -> None:
        """numba compiling the fit's kernels (``jit.compile_progress``), in the worker."""
        if self.compile_started is None:
            self.compile_started = time.perf_counter()
            self.compile_note = jit.compile_note(total)
            self.compile_expected = float(jit.compile_seconds(total))
        self.compiling = active

    def run(self) -> None:
        """Fit (in the worker thread); errors become :attr:`error`, never an exception.

        The engine gets the data set's prepared ratings, so nothing is validated again.
        """
        try:
            model = OrdinalMixture(scale=self.dataset.scale, **self.params.engine_kwargs())
            gold = self.dataset.gold if self.params.use_gold else None
            with jit.compile_progress(self.compile_report) as pending:
                if pending and compile_ahead.background_running():  # said while waited for
                    self.compile_report(0, len(pending), True)
                    compile_ahead.wait_background()
                self.model = model.fit(self.dataset.data, callback=self.callback, gold=gold)
        except InputError as err:
            self.error = str(err)
        except Exception as err:  # noqa: BLE001 - shown to the user instead of a traceback
            self.error = f"the fit failed unexpectedly ({type(err).__name__}: {err})"
        finally:
            self.finished = time.perf_counter()
            self.done.set()

    def start(self) -> FitJob:
        threading.Thread(target=self.run, name="ordmix-fit", daemon=True).start()
        return self

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    @property
    def seconds(self) -> float:
        return (self.finished or time.perf_counter()) - self.started

    @property
    def n_restarts(self) -> int:
        """The restarts the fit races (the estimator's ``planned_restarts`` on the data set's
        scale)."""
        model = OrdinalMixture(scale=self.dataset.scale, **self.params.engine_kwargs())
        return model.planned_restarts(self.dataset.scale)

    def schedule(self) -> tuple[list[tuple[int, int]], int]:
        """The successive-halving rounds a fit of ``n_restarts`` runs after the warm-up:
        ``(restarts in the race, sweeps each)`` per round, and how many are kept to the end
        (``FitPolicy.keep``; the estimator's ``prune_start`` sweeps in the first round)."""
        keep = FIT_POLICY.keep
        active, budget, rounds = self.n_restarts, PRUNE_START, []
        while active > keep:
            rounds.append((active, budget))
            active, budget = max((active + 1) // 2, keep), 2 * budget
        return rounds, active

    def stage(self) -> tuple[str, float]:
        """Where the fit is (in words) and the sweeps it is expected to take in all.

        The warm-up (restart 1 alone, no spam) until the others branch from it; then the
        halving rounds (each restart a round's sweeps, the worse half dropped after it); then
        the restarts kept run to convergence, taken as ``TYPICAL_ITERATIONS`` sweeps each for
        the model's stages. An estimate of sweeps, so the bar moves with the work done
        (:meth:`fraction` slows down past it: a refit without the spam component, a slow
        restart).
        """
        t, n = self.TYPICAL_ITERATIONS, self.n_restarts
        if n == 1:
            return "restart 1 of 1", float(3 * t)
        rounds, kept = self.schedule()
        halving = sum(a * b for a, b in rounds)
        if self.warmup_sweeps is None:
            warm = max(t, self.reports + 1)
            return "shared warm-up (no spam)", float(warm + halving + 2 * kept * t)
        total = self.warmup_sweeps + halving + 2 * kept * t
        done = self.reports - self.warmup_sweeps
        for k, (active, budget) in enumerate(rounds):
            if done < active * budget:
                return (
                    f"halving round {k + 1} of {len(rounds)}: {active} of {n} restarts in the race",
                    float(total),
                )
            done -= active * budget
        return (
            f"the best {kept} of {n} restarts run to convergence",
            float(total),
        )

    def fraction(self) -> float:
        """Progress in [0, 1]: the sweeps done against those the fit is expected to take
        (:meth:`stage`), so a restart branched from the shared warm-up, which reports its
        iterations counted on from the warm-up's, is not taken as half done. Never goes back;
        1 only once the fit is done."""
        if self.done.is_set():
            return 1.0
        if self.compile_started is not None and self.reports == 0:
            # compiling before the first sweep: half of the bar over the expected seconds
            spent = time.perf_counter() - self.compile_started
            self.peak = max(self.peak, 0.5 * min(spent / self.compile_expected, 0.95))
            return float(self.peak)
        _, total = self.stage()
        x = self.reports / total
        # 90% at the expected number of sweeps; beyond it the bar slows down towards 1
        part = 0.9 * x if x <= 1 else 0.9 + 0.099 * (1.0 - np.exp(-3.0 * (x - 1.0)))
        self.peak = max(self.peak, part)
        return float(self.peak)

    def status(self) -> str:
        """One line: restart, iteration, current bound, elapsed time."""
        if self.done.is_set():
            return f"finished in {self.seconds:.1f} s"
        stopping = " - stopping ..." if self.stop.is_set() else ""
        if self.compiling and self.compile_started is not None:
            spent = time.perf_counter() - self.compile_started
            return f"{self.compile_note}: {spent:.0f} s so far{stopping}"
        bound = "..." if np.isnan(self.bound) else f"{self.bound:,.2f}"
        n = self.n_restarts
        stage, _ = self.stage()
        return (
            f"{stage} - restart {self.restart} of 0-{n - 1}, iteration {self.iteration} "
            f"- lower bound {bound} - {self.seconds:.0f} s{stopping}"
        )

    def outcome(self, has_previous: bool) -> tuple[FitResult | None, str]:
        """A finished job's result (None if it kept nothing) and the message for the user.

        Stop keeps the best restart so far once any restart finished a sweep (the engine
        reports only after a sweep, so a stopped fit always has one); a failed fit keeps
        nothing, and the page keeps its previous result (``has_previous``).
        """
        if self.running:
            raise RuntimeError("the fit is still running")
        m = self.model
        if m is not None:
            stopped = bool(m.interrupted_)
            if stopped:
                msg = (
                    f"Stopped after {self.seconds:.1f} s: kept the best restart found so far "
                    f"(restart {m.best_restart_}, of the {len(m.restarts_)} started, numbered "
                    "from 0 as in restarts.csv)."
                )
            else:
                msg = f"Fit finished in {self.seconds:.1f} s."
            return FitResult(m, self.params, self.dataset.name, stopped=stopped), msg
        keep = "the previous result is kept" if has_previous else "there is no previous result"
        what = (
            "Stopped before any restart finished an iteration"
            if self.stop.is_set()
            else f"The fit failed: {self.error}"
        )
        return None, f"{what}; {keep}."


# --------------------------------------------------------------------------- in words
