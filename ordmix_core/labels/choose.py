"""``choose_labels``: one label fit, one posterior, for every item column.

Without gold: the ordinal confusion model is fitted once to the ratings (``confusion_model``),
its latent-level posterior ``q`` is reported through the map of ``calibration.report_map`` (the
latent level, or a careful annotator's answer to it), and ``posterior.LabelPosterior`` reads
every column from that. With gold: the gold items' levels are fixed in the same fit, the
expert's own answers to the latent levels are learned from the gold items
(``calibration.gold_calibration``) and replace the map, and a gold item's probabilities are its
level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..data.scale import MAX_COARSE_LEVELS
from ..numerics.fixed_order import first_sum, last_sum, matmul
from . import calibration, confusion_model
from .policy import DEFAULT, LabelPolicy
from .posterior import LabelPosterior, expected_gain

#: scales of more levels are fitted on this many classes of adjacent levels (``choose_labels``,
#: asked for with ``labels="confusion"``: a fine scale's labels are the continuous model's)
MAX_CLASSES = MAX_COARSE_LEVELS


def fine_labels_reason(k: int) -> str:
    """Why a scale of ``k`` levels, more than ``MAX_CLASSES``, takes its labels from the
    continuous model (``model_["labels"]["why"]``, ``ordmix fit``'s closing line)."""
    return (
        f"a scale of {k} levels (more than {MAX_CLASSES}) is a slider, its truth a value; the "
        f"confusion model would learn {k} x {k} answers an annotator (docs/results.md, Fine "
        "scales)"
    )


@dataclass(frozen=True)
class LabelResult:
    """What ``choose_labels`` made: the ``posterior`` every item column is read from, the
    label model's ``fit`` (``confusion_model.ConfusionFit``; None for the continuous
    posterior), the ``report`` map (K, K) from the latent level to the reported one, whether
    gold taught it (``expert``: the expert's answers; then ``temperature``, the latent
    posterior's), the ``policy`` used, and on a scale of more than ``MAX_CLASSES`` levels the
    class each level was fitted in (``classes`` (K,); None otherwise)."""

    posterior: LabelPosterior
    fit: Any
    report: np.ndarray | None
    expert: bool
    policy: LabelPolicy
    temperature: float = 1.0
    classes: np.ndarray | None = None

    def undetermined_share(self) -> float:
        """The share of the items flagged ``undetermined`` (a tie) under the fit's policy, read
        from the posterior alone (the fit's warning; no item table is built)."""
        tied = self.posterior.undetermined(self.policy)
        return float(np.mean(tied)) if tied.size else 0.0

    def describe(self) -> dict:
        """For ``model_["labels"]`` and ``summary.json``: the model, its size and how sure it is."""
        f = self.fit
        if f is None:
            return {"model": "continuous posterior over the scale's intervals (the paper's)"}
        who = "a careful annotator's answer"
        if self.expert:
            who = "the expert's answer learned from gold"
        grouped = {} if self.classes is None else {
            "classes": f"the {self.classes.size} levels fitted as "
            f"{int(self.classes.max()) + 1} classes of adjacent levels"
        }  # fmt: skip
        return {
            "model": f"ordinal confusion model, reported as {who}",
            **grouped,
            "em_iterations": int(f.n_iter),
            "converged": bool(f.converged),
            "level_prior": [float(x) for x in f.rho],
            "report_agreement": math.fsum(f.rho * np.diagonal(self.report)),
            "temperature": float(self.temperature),
        }


def typical_rater(confusion: np.ndarray, n_ratings: np.ndarray) -> np.ndarray:
    """The next rating's confusion (K, K): the annotators' average, weighted by their ratings
    (the next rating comes from the crowd as it has rated so far)."""
    w = np.asarray(n_ratings, dtype=float)
    return first_sum(w / max(math.fsum(w), 1e-300), confusion)


def choose_labels(
    ann: np.ndarray,
    inst: np.ndarray,
    level: np.ndarray,
    n_annotators: int,
    n_instances: int,
    values: np.ndarray,
    gold: np.ndarray | None = None,
    policy: LabelPolicy = DEFAULT,
    names: tuple[str, ...] | None = None,
) -> LabelResult:
    """Fit the label model once and make the one posterior of every item.

    ``ann``, ``inst``, ``level`` (R,): codes, ratings as level indices; ``values`` (K,): the
    scale (``names``: its levels' names, a scale of named levels); ``gold`` (M,): a gold
    item's level index, -1 elsewhere (None: no gold).

    A scale of more than ``MAX_CLASSES`` levels (a 0..100 slider) is fitted on
    ``MAX_CLASSES`` classes of adjacent levels (``level_classes``), and each class's
    probability is spread over its levels as the ratings are (``spread``): the label model's
    work grows as the cube of its classes per annotator, and a slider's neighbouring values
    are not labels a manager tells apart."""
    k = len(values)
    if k > MAX_CLASSES:
        classes = level_classes(k, MAX_CLASSES)
        centres = np.bincount(classes, weights=np.asarray(values, float)) / np.bincount(classes)
        coarse = choose_labels(
            ann, inst, classes[level], n_annotators, n_instances, centres,
            None if gold is None else np.where(gold >= 0, classes[np.maximum(gold, 0)], -1),
            policy,
        )  # fmt: skip
        return spread(coarse, classes, level, values, gold, names)
    n_ratings = np.bincount(ann, minlength=n_annotators)

    def expert_prior(careful: np.ndarray, rho: np.ndarray) -> np.ndarray:
        return report_map(careful, rho, n_ratings, policy)

    fit = confusion_model.fit(
        ann, inst, level, n_annotators, n_instances, len(values), gold, expert_prior
    )
    return label_posterior(fit, ann, inst, level, values, gold, policy, names)


def level_classes(k: int, n_classes: int) -> np.ndarray:
    """(K,) the class of each level: ``n_classes`` runs of adjacent levels, as equal as the
    levels allow."""
    return np.minimum((np.arange(k) * n_classes) // k, n_classes - 1)


def spread(
    coarse: LabelResult,
    classes: np.ndarray,
    level: np.ndarray,
    values: np.ndarray,
    gold: np.ndarray | None,
    names: tuple[str, ...] | None = None,
) -> LabelResult:
    """A posterior over classes of levels (``coarse``) spread over the levels (K,): each
    class's probability shared among its levels as all the ratings in it are (plus 1e-3 a
    level, so that an unrated level keeps a little); a gold item's on its level."""
    k = len(values)
    within = spread_map(classes, np.bincount(level, minlength=k))
    post = coarse.posterior
    proba = matmul(post.proba, within)
    if gold is not None and (gold >= 0).any():
        known = gold >= 0
        proba[known] = np.eye(k)[gold[known]]
    fine = LabelPosterior(proba, np.asarray(values, float), post.gain, post.source, names=names)
    return replace(coarse, posterior=fine, classes=classes)


def spread_map(classes: np.ndarray, level_counts: np.ndarray) -> np.ndarray:
    """(C, K) each class's share of its levels (``spread``): the levels' ratings
    ``level_counts`` (K,) plus 1e-3 each, normalised within each class (``classes`` (K,))."""
    k = classes.size
    within = np.zeros((classes.max() + 1, k))
    within[classes, np.arange(k)] = level_counts + 1e-3
    within /= last_sum(within)[:, None]
    return within


def report_map(
    careful: np.ndarray, rho: np.ndarray, n_ratings: np.ndarray, policy: LabelPolicy
) -> np.ndarray:
    """The map (K, K) from the latent level to the reported one without gold: the policy's
    mixture of the latent level and a careful annotator's answer (``calibration``)."""
    reference = calibration.reference_confusion(careful, rho, n_ratings, policy.reference_share)
    return calibration.report_map(reference, policy.latent_weight)


def label_posterior(
    fit: confusion_model.ConfusionFit,
    ann: np.ndarray,
    inst: np.ndarray,
    level: np.ndarray,
    values: np.ndarray,
    gold: np.ndarray | None = None,
    policy: LabelPolicy = DEFAULT,
    names: tuple[str, ...] | None = None,
) -> LabelResult:
    """The one posterior of every item from a fitted label model (``choose_labels``' second
    half: the map to a careful annotator's answer, or to the expert's learned from gold)."""
    k = len(values)
    n_ratings = np.bincount(ann, minlength=fit.confusion.shape[0])
    report = report_map(fit.careful, fit.rho, n_ratings, policy)
    expert = fit.expert is not None
    q, temperature = fit.q, 1.0
    if expert:
        known = gold >= 0
        q_own = confusion_model.own_posterior(fit, ann, inst, level, np.flatnonzero(known))
        report = fit.expert
        temperature = calibration.gold_temperature(q_own, gold[known], report)
        q = calibration.tempered(q, temperature)
    proba = matmul(q, report)
    gain = expected_gain(q, typical_rater(fit.confusion, n_ratings), report)
    if expert:
        proba[known] = np.eye(k)[gold[known]]
        gain[known] = 0.0
    post = LabelPosterior(proba, np.asarray(values, float), gain, "confusion", names=names)
    return LabelResult(post, fit, report, expert, policy, temperature)
