"""The decision columns of the output files, computed once per fit (``decide``): each item's
label, level probabilities, interval and flag (by partition for a Dask ``items_``), each
annotator's evidence-aware flag and agreement with the others, or why there are none, and the
crowd's agreement (``agreement``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..labels.policy import DEFAULT as DEFAULT_POLICY
from ..labels.posterior import LabelPosterior
from . import agreement, decisions, reliability

# --------------------------------------------------------------------------- learned frames

#: the decision columns of items.csv, after the model's (``lower_90``/``upper_90`` at the
#: default interval; one ``p_level_<v>`` per level, in the scale's order)
DECISION_COLUMNS = ("label", "p_wrong", "p_level_<v>", "lower_90", "upper_90", "truth_weight",
                    "expected_gain", "flag")  # fmt: skip

#: the flag columns of annotators.csv (``reliability.annotator_flags``)
FLAG_COLUMNS = ("flag", "p_unreliable", "reliability_lower", "reliability_upper",
                "flag_threshold", "flag_confidence")  # fmt: skip
#: annotators.csv's last column: each annotator's agreement with the others
#: (``agreement.annotator_agreement``), beside the flags' evidence
AGREEMENT_COLUMN = "agreement"

#: why a fit with neither per-rating omega nor flags of its own has no annotator flags
NO_FLAGS = (
    "not computed: the flags weigh each rating's evidence, and this fit kept neither the "
    "per-rating results nor its flags; annotators.csv has no flag columns. Fit again (or run "
    "ordmix next on the ratings) for them"
)


@dataclass(frozen=True)
class Decisions:
    """The decision columns of one fit, computed once for its tables and its summary.

    ``items``: ``decisions.item_decisions`` indexed by instance, or None when ``items_`` is a
    Dask DataFrame (joined per partition instead) or when not asked for (``decide(model,
    items=False)``: ``write_fit_outputs`` computes them a chunk at a time and fills
    ``item_counts``, the items per flag); ``annotators``: ``annotator_flags`` with each
    annotator's ``agreement``, or None when the fit kept no per-rating omega (``no_flags``
    says why); ``threshold``, ``confidence``: the settings used; ``agreement``: the crowd's
    (``agreement.crowd_agreement``), None without the ratings.
    """

    items: pd.DataFrame | None
    annotators: pd.DataFrame | None
    threshold: float
    confidence: float
    no_flags: str | None = None
    item_counts: dict[str, int] | None = None
    agreement: agreement.CrowdAgreement | None = None


def decide(
    model: Any,
    *,
    threshold: float = decisions.THRESHOLD,
    confidence: float = decisions.CONFIDENCE,
    items: bool = True,
) -> Decisions:
    """The decision columns of a fitted model (``decisions.item_decisions`` and
    ``reliability.annotator_flags`` at these settings, the annotators' and the crowd's
    agreement: the fit's ``annotator_agreement_`` and ``crowd_agreement_`` when it has them,
    else computed from its ``data_``); ``items=False``: the annotators' only."""
    threshold, confidence = decisions.check_flag_settings(threshold, confidence)
    want_items, items = items, None
    if want_items and isinstance(model.items_, pd.DataFrame):
        items = decisions.item_decisions(model, confidence=confidence)
    if getattr(model, "omega_", None) is None and getattr(model, "annotator_flags_", None) is None:
        return Decisions(items, None, threshold, confidence, NO_FLAGS)
    flags = reliability.annotator_flags(model, threshold=threshold, confidence=confidence)
    # the fit's own agreement when it computed it where its ratings are (the Dask engine's)
    each = getattr(model, "annotator_agreement_", None)
    crowd = getattr(model, "crowd_agreement_", None)
    if each is None or crowd is None:
        each = agreement.annotator_agreement(model.data_)
        crowd = agreement.crowd_agreement(model.data_)
    # a new frame: the fit's own flags (``annotator_flags_``) stay as they are
    flags = flags.assign(**{AGREEMENT_COLUMN: each.to_numpy()})
    return Decisions(items, flags, threshold, confidence, agreement=crowd)


def _partitioned_item_decisions(model: Any, items: Any, confidence: float) -> Any:
    """A Dask ``items_`` with the decision columns joined in each partition, read from each
    block's posterior (``item_posterior_``, aligned with ``items_``: the confusion model's
    ``proba_<k>`` and ``gain``, and ``truth_weight``) or, for the continuous labels, from the
    partition's q(z) (``decisions.continuous_posterior``; at instance granularity each
    partition's categories alongside: both come from the same blocks)."""
    parts = getattr(model, "item_posterior_", None)
    policy = replace(DEFAULT_POLICY, confidence=confidence)
    if parts is not None and getattr(model, "label_result_", None) is not None:
        values = np.asarray(model.hyperparams_["scale"], dtype=float)
        names = model.hyperparams_.get("levels")
        names = None if names is None else tuple(names)

        def read(part: pd.DataFrame, post: pd.DataFrame) -> pd.DataFrame:
            cols = [c for c in post.columns if c.startswith("proba_")]
            proba, gain = post[cols].to_numpy(), post["gain"].to_numpy()
            lp = LabelPosterior(proba, values, gain, "confusion", names=names)
            weight = post["truth_weight"].to_numpy()
            return part.join(decisions.item_columns(lp, part.index, policy, weight))

        meta = read(items._meta, parts._meta)
        return items.map_partitions(read, parts, align_dataframes=False, meta=meta)
    share = decisions.annotators_truth_share(model.annotators_)
    hp = model.hyperparams_

    def join(part: pd.DataFrame, cats: pd.DataFrame, post: pd.DataFrame | None) -> pd.DataFrame:
        difficulty = cats["difficulty"].reindex(part["category"].astype(object))
        cont = decisions.continuous_posterior(
            part["z_mean"].to_numpy(dtype=float),
            part["z_sd"].to_numpy(dtype=float),
            hp,
            difficulty.to_numpy(dtype=float),
            share,
        )
        weight = None if post is None else post["truth_weight"].to_numpy()
        return part.join(decisions.item_columns(cont, part.index, policy, weight))

    cats = model.categories_
    if isinstance(cats, pd.DataFrame):  # query or global granularity: one small table
        if parts is None:
            return items.map_partitions(
                lambda part: join(part, cats, None), meta=join(items._meta, cats, None)
            )
        meta = join(items._meta, cats, parts._meta)
        return items.map_partitions(
            lambda part, post: join(part, cats, post), parts, align_dataframes=False, meta=meta
        )
    if parts is None:
        meta = join(items._meta, cats._meta, None)
        return items.map_partitions(
            lambda part, c: join(part, c, None), cats, align_dataframes=False, meta=meta
        )
    meta = join(items._meta, cats._meta, parts._meta)
    return items.map_partitions(join, cats, parts, align_dataframes=False, meta=meta)


# --------------------------------------------------------------------------- ordmix next's files
#: the ID columns of ``ordmix next``'s files, protected against spreadsheet formulas
NEXT_IDS = ("instance", "query")
REVIEW_IDS = ("annotator",)


def next_table(
    model: Any, n: int = 50, by: str = "expected_gain", dec: Decisions | None = None
) -> pd.DataFrame:
    """``next.csv`` of a fitted model (``ordmix next --out``, the Items page's batch): the
    ``n`` items one more rating would help most (``decisions.next_batch``), from the items'
    decision columns (``dec``'s, default ``decide(model)``'s): full numbers, the bytes the
    command writes for the same fit."""
    dec = decide(model) if dec is None else dec
    items = dec.items
    if items is None:
        items = decisions.item_decisions(model, confidence=dec.confidence)
    return decisions.next_batch(model.items_.join(items), n, by=by)


def review_table(model: Any, dec: Decisions | None = None) -> pd.DataFrame:
    """``review.csv`` of a fitted model (``ordmix next --review``, the Items and Annotators
    pages' download): the annotators flagged unreliable at ``dec``'s settings, with the
    evidence (``decisions.annotators_to_review``): full numbers, never display text."""
    dec = decide(model, items=False) if dec is None else dec
    if dec.annotators is None:
        raise InputError(f"no annotators to review: the flags were {dec.no_flags}")
    return decisions.annotators_to_review(model.annotators_.join(dec.annotators))
