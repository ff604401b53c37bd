"""The dashboard's fit, without streamlit: settings, a background job, and a plain summary.

:class:`FitParams` holds the Fit page's settings as the estimator's keyword arguments, with the
options table's defaults (``options``); :class:`FitJob` runs
:class:`~ordmix_core.estimators.ordinal_mixture.OrdinalMixture` on a data set's prepared
ratings in a worker thread; its progress callback records each restart's iteration and obeys Stop,
so a page can poll it and a Stop keeps the best restart found so far. :func:`fit_summary` and
:func:`selection_explanation` say in plain words what a fit found, with the evidence-aware
flags of ``decisions.py`` (through ``outputs.decide``).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..estimators import options
from ..estimators.ordinal_mixture import MODELS, OrdinalMixture, difficulty_prior
from ..estimators.spam_decision import spam_left_out
from ..fit import acceleration
from ..fit.schedule import KEEP
from ..results import decisions, outputs
from .report import Dataset

#: sweeps of the first halving round (``OrdinalMixture``'s ``prune_start``)
PRUNE_START = OrdinalMixture().prune_start
#: options the Fit page does not show: the scale is the data set's (set on the Data page)
NOT_ON_FIT_PAGE = ("scale",)
#: the dashboard's defaults where they are not the command line's: query granularity, the
#: paper's choice for TREC (the Fit page falls back to the first offered without queries)
DASHBOARD_DEFAULTS: dict[str, Any] = {"granularity": "query"}
#: Fit page settings that are not estimator parameters: ``use_gold`` (fit with the data set's
#: gold items known) is an argument of ``fit``
FIT_SETTINGS: dict[str, Any] = {"use_gold": False}


def fit_page_options(group: str | None = None) -> list[options.Option]:
    """The options table's entries the Fit page shows (of one group: basic / advanced)."""
    return [o for o in options.dashboard_options(group) if o.name not in NOT_ON_FIT_PAGE]


class FitParams:
    """The Fit page's settings: estimator keyword arguments named as in the options table.

    Unset ones take the table's command-line default (seed 0) or :data:`DASHBOARD_DEFAULTS`;
    the values are not checked here (the Fit page checks them with
    ``options.to_estimator_kwargs``; a bad one given directly makes the fit fail with the
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
        phi, eta = difficulty_prior(self.model, self.phi, self.eta)
        return (
            f"{self.granularity} granularity, {self.n_restarts} restart(s), at most "
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

    #: sweeps a restart typically needs (warm-up and mixture), for the progress estimate
    TYPICAL_ITERATIONS = 40

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

    def run(self) -> None:
        """Fit (in the worker thread); errors become :attr:`error`, never an exception.

        The engine gets the data set's prepared ratings, so nothing is validated again.
        """
        try:
            model = OrdinalMixture(scale=self.dataset.scale, **self.params.engine_kwargs())
            gold = self.dataset.gold if self.params.use_gold else None
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

    def schedule(self) -> tuple[list[tuple[int, int]], int]:
        """The successive-halving rounds a fit of ``n_restarts`` runs after the warm-up:
        ``(restarts in the race, sweeps each)`` per round, and how many are kept to the end
        (``schedule.KEEP``; the estimator's ``prune_start`` sweeps in the first round)."""
        active, budget, rounds = self.params.n_restarts, PRUNE_START, []
        while active > KEEP:
            rounds.append((active, budget))
            active, budget = max((active + 1) // 2, KEEP), 2 * budget
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
        t, n = self.TYPICAL_ITERATIONS, self.params.n_restarts
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
        bound = "..." if np.isnan(self.bound) else f"{self.bound:,.2f}"
        stopping = " - stopping ..." if self.stop.is_set() else ""
        n = self.params.n_restarts
        stage, _ = self.stage()
        return (
            f"{stage} - restart {self.restart + 1}/{n}, iteration {self.iteration} "
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
                    f"(restart {m.best_restart_ + 1} of the {len(m.restarts_)} started)."
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


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _first_names(ids: Any, n: int = 5) -> str:
    """The first ``n`` IDs, comma-separated, with ", ..." when there are more."""
    ids = list(ids)
    return ", ".join(str(a) for a in ids[:n]) + (", ..." if len(ids) > n else "")


def restarts_from_one(text: str) -> str:
    """``text`` with every "restart N" counted from 1 (the engine counts restarts from 0; the
    dashboard shows them to a user from 1)."""
    return re.sub(r"\b(restart) (\d+)\b", lambda m: f"{m[1]} {int(m[2]) + 1}", text)


def selection_explanation(model: OrdinalMixture) -> str:
    """Why this restart was chosen, in words.

    A finished fit: the engine's own reason. A stopped one is described from ``restarts_``
    and ``interrupted_``: which restart was kept and in what state, and what became of the
    others (finished, still running at the stop, pruned earlier, not yet in the mixture).
    """
    if not model.interrupted_:
        return model.selection_reason_
    r = model.restarts_
    row = r.loc[model.best_restart_]
    mixing = (r["n_iter"] > 0).to_numpy()
    pruned = r["dropped"].to_numpy(bool)
    stages = [c for c in ("n_iter", "uniform_iter", "warmup_iter", "shared_iter") if c in r]
    total = r[stages].sum(axis=1).to_numpy()  # max_iter caps a restart's sweeps of all stages
    finished = ~pruned & (r["converged"].to_numpy(bool) | (total >= model.max_iter))
    running = mixing & ~pruned & ~finished
    if row["n_iter"] == 0:
        warm = model.trace_[model.trace_["restart"] == model.best_restart_]["lower_bound"]
        bound = f" (lower bound {warm.iloc[-1]:,.1f})" if len(warm) else ""
        kept = (
            "the fit was stopped before any restart reached the mixture stage: the no-spam "
            f"warm-up fit of restart {model.best_restart_}{bound} is kept"
        )
    else:
        candidates = int((~pruned).sum()) or len(r)
        state = "converged" if row["converged"] else "had not converged"
        kept = (
            f"the fit was stopped: restart {model.best_restart_} is kept, the highest lower "
            f"bound at the stop ({row['lower_bound']:,.1f}) among {_count(candidates, 'restart')} "
            f"still in the race; it ran {_count(int(row['n_iter']), 'iteration')} and {state}"
        )
    n_running = int(running.sum())
    parts = [
        (int(finished.sum()), "finished"),
        (n_running, "was still running" if n_running == 1 else "were still running"),
        (int(pruned.sum()), "had been pruned earlier by successive halving"),
        (
            model.n_restarts - int(mixing.sum()),
            "had not reached the mixture stage (still in the warm-up, or not started)",
        ),
    ]
    others = ", ".join(f"{n} {what}" for n, what in parts if n)
    return f"{kept}. Of the {model.n_restarts} restarts: {others}"


def _in_words(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def model_line(model: OrdinalMixture) -> str:
    """Which model was fitted and why, with what it learned (``model_``), in one sentence.

    The sentence says what the default (``model="extended"``) adds to the paper's model (its
    difficulty prior too, when not the paper's), the learned spread of the annotators' biases
    and the spammers' answer distribution, and, when the fit decided its spam component from
    the evidence (``model_["spam_choice"]``), which way and why.
    """
    d = getattr(model, "model_", None) or {}
    if d.get("model") == "paper":
        text = "Model: the paper's (Lakshminarayanan & Teh), as published"
    else:
        parts = []
        if d.get("bias"):
            parts.append("a bias per annotator (lenient raters score high, strict ones low)")
        if d.get("spam_dist") == "global":
            parts.append("a spam answer distribution learned from the data")
        elif d.get("spam_dist") == "annotator":
            parts.append("a spam answer distribution learned per annotator")
        hp = getattr(model, "hyperparams_", None) or {}
        if (hp.get("phi"), hp.get("eta")) != (MODELS["paper"]["phi"], MODELS["paper"]["eta"]):
            parts.append(
                f"a difficulty prior Gamma({hp.get('phi', 0):g}, {hp.get('eta', 0):g}) in place "
                "of the paper's Gamma(10, 5)"
            )
        added = _in_words(parts) or "nothing"
        text = (
            f"Model: {d.get('model', 'extended')}, the paper's model plus {added}, so that a "
            "rater who is consistently lenient or strict is not mistaken for a spammer"
        )
    learned = []
    if d.get("bias_sd_prior"):
        learned.append(f"annotators' biases spread about ±{d['bias_sd_prior']:.2f}")
    pi = d.get("pi")
    if pi is not None and model.spam_:
        levels = getattr(model, "scale_", None)
        names = [f"{v:g}" for v in levels.values] if levels is not None else []
        if len(names) != len(pi):
            names = [str(i + 1) for i in range(len(pi))]
        dist = ", ".join(f"{n}: {p:.0%}" for n, p in zip(names, pi, strict=True))
        learned.append(f"spam answers {dist}")
    if d.get("n_gold"):
        learned.append(f"{d['n_gold']:,} gold items anchored the fit")
    choice = d.get("spam_choice")
    text += f" (learned: {'; '.join(learned)})" if learned else ""
    return text + (f". Spam component: {choice['why']}" if choice else "")


def no_spam_note(model: OrdinalMixture) -> str:
    """Why a fit without the spam component has none (the model's decision and its reason, or
    the user's switch), and what the annotator flags then rest on."""
    left_out = spam_left_out(model)
    why = (
        f"The model left its spam component out: {left_out}. "
        if left_out is not None
        else "This fit has no spam component (it was switched off): it took every rating as "
        "honest; refit with it on for reliabilities the fit itself estimates. "
    )
    return why + (
        "The flags below still weigh each annotator's ratings against the other ratings of "
        "their items."
    )


def ensemble_line(model: OrdinalMixture) -> str:
    """What the data cannot decide: how many items and annotators the answers
    near-tied with the winner disagree on, with the largest spread. Those answers are the
    restarts that finished near the best bound (``model.ensemble_``) and, when near-tied, the
    answer with the still-moving annotators carried the way they were going
    (``model.alternative_``)."""
    ens = outputs.stability_summary(model)
    n = len(ens["restarts"])
    gap = f"{ens['bound_gap']:,.1f}"
    alt = ens["alternative"]
    near = alt is not None and alt["near_tied"]
    judged = ""
    if alt is not None:
        d = alt["bound_above_winner"]
        judged = (
            f"carrying the {_count(len(alt['annotators']), 'still-moving annotator')} "
            f"({_first_names(alt['annotators'])}) "
            f"the way they were going gives an answer whose lower bound is {abs(d):,.1f} "
            f"{'above' if d >= 0 else 'below'} the chosen one's"
        )
    if n < 2 and not near:
        text = (
            f"Unstable: no other restart finished within {gap} of the best lower bound, so "
            "there is no near-tied answer to compare it with."
        )
        return text + (f" And {judged} (more than {gap} below)." if judged else "")
    answers = [f"{n} restarts finished within {gap} of the best lower bound"] if n >= 2 else []
    if near:
        answers.append(judged + ("" if alt["bound_above_winner"] >= 0 else f" (within {gap})"))
    items = ens["unstable_items"]
    about = (
        ""
        if items is None
        else f"{items:,} item(s) (largest spread of an estimate {ens['max_estimate_spread']:.3f}) "
        "and "
    )
    return (
        f"Unstable: {', and '.join(answers)}. These answers disagree on {about}"
        f"{ens['unstable_annotators']:,} annotator(s), marked unstable on the Items and "
        "Annotators pages: the data do not settle them."
    )


def moving_line(model: OrdinalMixture) -> str | None:
    """The annotators the fit had not settled (``still_moving``), or None if there are none:
    a longer fit may change their reliability, and their items' estimates with it."""
    ann = model.annotators_
    if "still_moving" not in ann or not ann["still_moving"].any():
        return None
    moving = ann.index[ann["still_moving"].to_numpy()]
    return (
        f"Still moving: the reliability of {_count(len(moving), 'annotator')} "
        f"({_first_names(moving)}) was "
        f"still changing when the fit stopped (leaving its end by more than "
        f"{acceleration.MOVING_GROWTH:.1%} a sweep, or expected to move by more than "
        f"{acceleration.MOVING_DRIFT:g}); a longer fit (a tighter tolerance) may change their "
        "verdict and the estimates of the items they rated. Marked still_moving on the "
        "Annotators page."
    )


def fit_summary(model: OrdinalMixture, dec: outputs.Decisions | None = None) -> list[str]:
    """What the fit says about the data and about itself, one plain sentence each.

    ``dec``: the fit's decisions (``outputs.decide(model)`` by default): the annotators
    flagged unreliable / ok / undetermined from the evidence of their ratings, and the items
    whose ratings are too weak to label them.
    """
    dec = outputs.decide(model) if dec is None else dec
    ann, items = model.annotators_, model.items_
    lines = []
    warm_up_only = model.interrupted_ and model.restarts_.loc[model.best_restart_, "n_iter"] == 0
    if warm_up_only:
        lines.append(
            "The kept fit is the no-spam warm-up (stopped before the mixture), so it cannot "
            "judge spammers yet; run the fit to the end for that."
        )
    elif dec.annotators is not None:
        flag = dec.annotators["flag"]
        n = {f: int((flag == f).sum()) for f in ("unreliable", "ok", "undetermined")}
        unreliable = (flag == "unreliable").to_numpy()
        share = ann["n_ratings"].to_numpy()[unreliable].sum() / max(int(ann["n_ratings"].sum()), 1)
        t, c = dec.threshold, dec.confidence
        lines.append(
            f"{n['unreliable']:,} of {_count(len(ann), 'annotator')} are unreliable: their "
            f"ratings make a reliability below {t:g} at least {c:.0%} probable; they gave "
            f"{share:.1%} of the ratings. {n['ok']:,} are ok (reliability {t:g} or more with "
            f"{c:.0%} probability) and {n['undetermined']:,} undetermined: too few ratings, or "
            "ratings of items nobody else rated well, to judge either way."
        )
        if not model.spam_:
            lines.append(
                "This fit has no spam component: it took every rating as honest; the flags "
                "still weigh each rating against the other ratings of its item."
            )
    else:
        lines.append(f"Annotator flags: {dec.no_flags}.")
    if dec.items is not None:
        und = int((dec.items["flag"] == "undetermined").sum())
        lines.append(
            f"{und:,} of {_count(len(items), 'item')} are undetermined: their ratings carry "
            f"less than {decisions.MIN_INFO:.0%} of what is known about them (the prior "
            "weighs more), so their labels are guesses; they are marked in the Items table."
        )
    if model.spam_ and not warm_up_only:
        lines.append(
            f"Ratings taken as spam: {outputs.spam_share(model):.1%} (the mean over all ratings "
            "of the probability that a rating is spam rather than drawn from the item's truth)."
        )
    lines.append(model_line(model) + ".")
    lines.append(f"Chosen: {restarts_from_one(selection_explanation(model))}.")
    if not warm_up_only:
        lines.append(ensemble_line(model))
    if model.interrupted_ and not model.converged_:
        lines.append("Not converged: the fit was stopped, so treat the estimates as provisional.")
    elif model.converged_:
        lines.append(
            f"Converged: the chosen restart's lower bound settled (changed by less than "
            f"{model.tol:g} of itself)"
            + (
                f" and its estimates are expected to move by less than {model.tol_estimate:g} more"
                if model.tol_estimate > 0
                else ""
            )
            + f", after {_count(model.n_iter_, 'iteration')}."
        )
    else:
        lines.append(
            f"Not converged: the chosen restart reached the cap of {model.max_iter} sweeps; "
            "raise Max sweeps per restart or the tolerances."
        )
    moving = None if warm_up_only else moving_line(model)
    if moving is not None:
        lines.append(moving)
    if model.collapsed_:
        lines.append(
            "Collapsed: every restart explains almost all ratings as spam; compare with the "
            "model without spam."
        )
    return lines
