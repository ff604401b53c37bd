"""The items' level probabilities of an in-memory fit: which model they come from, and the
clear majorities of trusted raters that decide a label whatever the model says.

``fit_levels(model, data, gold_m, mode)`` runs after the continuous fit (the last step of
``OrdinalMixture.fit``; ``mode``: the ``labels`` option, or the named model's) and sets
``level_proba_``, ``items_["clear_majority"]``, ``annotator_flags_`` and ``model_["labels"]``
(plus ``model_["label_choice"]`` when the labels were chosen, ``model_["label_weights"]``
when the spam component's omega could weigh the confusion model's ratings, and
``model_["gold_labels"]`` when gold was given). The model math is in ``results.label_model``
(the ordinal confusion model), ``results.label_choice`` (the choice from held-out ratings) and
``results.decisions`` (the continuous posterior's levels).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from ..data.crowd import CrowdData
from ..numerics import libm
from ..results import decisions, label_choice, label_model, label_rules, reliability


def plain_fit(data: CrowdData) -> label_model.LevelFit:
    """The ordinal confusion model of ``data`` with every rating counting 1 and no gold: it
    depends on the ratings alone, so ``OrdinalMixture.fit`` starts it beside the spam
    decision and hands it to every ``fit_levels`` of the fit."""
    return label_model.fit_levels(
        data.ann, data.inst, data.level, data.n_annotators, data.n_instances, data.scale.k
    )


def plain_fit_used(mode: str, spam: bool, gold: bool) -> bool:
    """Whether ``fit_levels`` in ``mode`` would use ``plain_fit``: for the choice, for the
    weights check when the fit may keep the spam component (``spam``), and as the labels of
    the confusion model without gold (with ``gold`` and without spam it fits its own)."""
    return mode != "continuous" and (mode == "choose" or spam or not gold)


def fit_levels(
    model: Any,
    data: CrowdData,
    gold_m: np.ndarray | None,
    mode: str,
    plain_job: Future | None = None,
) -> None:
    """Set ``model.level_proba_`` (M, K) and what goes with it (see the module).

    ``mode``: ``"confusion"`` (the ordinal confusion model, each rating counting for its
    ``omega_``, with gold moved by what it teaches: ``gold_map``, read from the gold items' own
    ratings, ``settle.own_ratings``), ``"choose"`` (the continuous posterior's levels when the
    held-out ratings say the continuous model predicts them better, else as
    ``"confusion"``: ``label_choice``) or ``"continuous"`` (no level probabilities here: the
    decisions take the continuous posterior's, with its credible interval). With the spam
    component the confusion model's ratings count for their omega only when, so weighted, it
    still predicts the held-out ratings (``label_choice.weights_check``,
    ``model_["label_weights"]``); else every rating counts 1. None and no column when the fit
    was stopped. ``items_["clear_majority"]``: the level of an item no flagged
    annotator rated whose ratings give one level at least ``label_rules.CLEAR_MAJORITY`` of the
    time, else missing (its label whatever the model says); never a gold item's (its label is
    its gold). ``plain_job``: ``plain_fit(data)`` on its way (a future), else it is fitted
    here when needed."""
    model.level_proba_ = None
    own, model._gold_own = getattr(model, "_gold_own", None), None  # used once, not kept
    model.model_["labels"] = mode
    model.model_["gold_labels"] = None  # what gold did to the labels: set below when given
    if mode == "continuous" or model.interrupted_:
        model.model_["labels"] = "continuous"
        return
    gold = None if gold_m is None else label_model.gold_levels(gold_m, data.scale.values)
    args = (data.ann, data.inst, data.level, data.n_annotators, data.n_instances, data.scale.k)
    n = len(data.ann)
    weighted = bool(model.spam_)  # the ratings count for their omega (all 1 without spam)
    fits = []  # (confusion fit, weight) to predict the held-out ratings with
    if mode == "choose" or weighted:
        # every rating counts 1: a model of all of them
        plain = plain_fit(data) if plain_job is None else plain_job.result()
        fits = [(plain, None)]
        if weighted:  # and each counting for its omega, for the check below
            fits.append((label_model.fit_levels(*args, weight=model.omega_), model.omega_))
    sums = _flags_beside_held_out(model, data, fits, gold)
    ready = None  # a confusion fit that is the one to ship without gold, when the choice made it
    if sums is not None:
        alone, *spam = sums
        ready = fits[-1][0]
    if weighted:  # does the confusion model, so weighted, still see the items?
        check = label_choice.weights_check(alone, spam[0], n)
        model.model_["label_weights"] = check.as_dict()
        weighted = check.used
        ready = ready if weighted else plain
    if mode == "choose":
        choice = label_choice.choose(alone, n, "alone")
        if choice.labels == "continuous" and weighted:  # and with the spam component
            mixed = label_choice.choose(spam[0], n, "with spam")
            choice = replace(min(choice, mixed, key=lambda c: c.z), both=True)
        model.model_["label_choice"] = choice.as_dict()
        model.model_["labels"] = choice.labels
        if choice.labels == "continuous":
            _continuous_levels(model, gold)
            return
    if not fits and plain_job is not None and gold is None:  # the plain fit is the one to ship
        ready = plain_job.result()
    if ready is not None and gold is None:  # level_posterior would fit the same again
        model.level_proba_ = ready.q
        return
    estimate, own_omega = own if gold is not None and own is not None else (None, None)
    model.level_proba_, fit = label_model.level_posterior(
        *args, gold=gold, weight=model.omega_ if weighted else None, estimate=estimate,
        own_weight=own_omega if weighted else None,
    )  # fmt: skip
    model.model_["gold_labels"] = fit.taught and fit.taught.describe()  # None: no gold


def _flags_beside_held_out(
    model: Any, data: CrowdData, fits: list, gold: np.ndarray | None
) -> np.ndarray | None:
    """The flags (unless the spam decision made them) and ``held_out`` of ``fits`` (None
    without fits), side by side: both are mostly one core's numpy. Sets
    ``annotator_flags_`` and ``items_["clear_majority"]`` from the flags (none for a gold
    item: its label is its gold, whatever its raters say); returns the held-out sums."""
    with ThreadPoolExecutor(1) as pool:
        flags_job = pool.submit(reliability.annotator_flags, model)
        sums = held_out(model, data, fits) if fits else None
        flags = flags_job.result()
    model.annotator_flags_ = flags  # the fit's own flags: the outputs reuse them
    flagged = (flags["flag"] == "unreliable").to_numpy()[data.ann]
    clear = label_rules.clear_majority(
        data.inst, data.level, flagged, data.n_instances, data.scale.k
    )
    if gold is not None:
        clear = np.where(gold >= 0, -1, clear)
    model.items_["clear_majority"] = decisions.clear_majority_column(
        clear, data.scale.values, data.scale.names
    )
    return sums


def _continuous_levels(model: Any, gold: np.ndarray | None) -> None:
    """The continuous posterior's level probabilities as ``level_proba_`` (the held-out
    ratings chose them), and what gold did (``model_["gold_labels"]``)."""
    items = model.items_
    model.level_proba_ = decisions.level_probabilities(
        items["estimate"].to_numpy(float),
        items["sd"].to_numpy(float),
        np.asarray(model.hyperparams_["thresholds"], dtype=float),
    )
    if gold is not None:
        model.model_["gold_labels"] = (
            f"{int((gold >= 0).sum()):,} gold items anchored the continuous fit, whose "
            "posterior gives the labels (the held-out ratings chose it): they set their "
            "raters' parameters, and no map from evidence to level is learned"
        )


def held_out(
    model: Any, data: CrowdData, fits: list[tuple[label_model.LevelFit, np.ndarray | None]]
) -> np.ndarray:
    """``label_choice.held_out_sums`` for a fitted in-memory model and confusion fits
    ``fits``, each ``(fit, weight)``: made with every rating counting 1 (``weight`` None: the
    confusion model alone) or each counting for ``weight`` (the continuous fit's omega: with
    the spam component). Every rating predicted from the others by the continuous model, by
    each fit and by chance; (len(fits), 5)."""
    ann = model.annotators_
    k = data.scale.k
    if model.spam_ and model.spam_distributions_ is not None:
        spam_table = model.spam_distributions_.iloc[:, :k].to_numpy(dtype=float)
    else:
        pi = np.asarray(model.hyperparams_["pi"], dtype=float)
        spam_table = np.broadcast_to(pi, (data.n_annotators, k))
    bias_sd = ann["bias_sd"].to_numpy(dtype=float)
    per_annotator = {
        "expertise": ann["expertise"].to_numpy(dtype=float),
        "reliability": ann["reliability"].to_numpy(dtype=float),
        "bias": ann["bias"].to_numpy(dtype=float),
        "bias_var": bias_sd * bias_sd,
    }
    sd = model.items_["sd"].to_numpy(dtype=float)
    hyper = dict(
        model.hyperparams_, spam_table=spam_table, ordinal=model.ordinal, estimate_var=sd * sd
    )
    return label_choice.held_out_sums(
        data,
        model.omega_,
        per_annotator,
        model.categories_["difficulty"].to_numpy(dtype=float),
        model.items_["estimate"].to_numpy(dtype=float),
        hyper,
        [(fit.q, libm.log(fit.confusion), weight) for fit, weight in fits],
    )
