"""A block's share of the label path, on its worker: the label fit's passes, the one posterior
of its items, and its ratings' evidence for the annotators' flags.

A block holds every rating of its items, so everything per item is local: the label fit's
E-step (``confusion_ratings.ItemRatings``), its items' posteriors, their report and gain, each
rating's leave-one-out evidence against the posterior the labels come from
(``evidence.ratings_label_evidence`` or ``evidence.ratings_evidence``) and the items' truth
weight.
What is per annotator is summed here over the block's ratings and added by the client
(``label_fit``): the soft tables and the class prior's column sums, the reliability
posterior's pulls and grid. Only the block's own annotators' entries travel, as rows of
``codes`` (their global codes, sorted; the expert of a fit with gold is code N, after every
annotator): the client sends each block the rows of its annotators and adds the rows it gets
back (``add_rows``). The functions are the in-memory engine's, called on the block's ratings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..io.readers import release_freed_memory
from ..labels import confusion_model, confusion_ratings
from ..labels.calibration import tempered
from ..labels.posterior import ITEM_FLAGS, LabelPosterior, expected_gain, mean_and_sd
from ..numerics.fixed_order import matmul
from ..results import agreement, evidence, outputs, reliability
from ..vb import updates
from .blocks import Box, block


@dataclass
class LabelBlock:
    """The block's label fit: ``codes`` (n_b,) the global codes of its annotators (the expert's,
    N, last when it holds gold items), ``ratings`` its ratings with the annotators coded
    0..n_b-1, ``q`` (M_b, K) its items' latent posterior, ``gold`` (M_b,) each item's gold
    class (-1: none; None without gold)."""

    codes: np.ndarray
    ratings: confusion_ratings.ItemRatings
    q: np.ndarray
    gold: np.ndarray | None


def annotator_codes(fit_id: str, index: int) -> np.ndarray:
    """The block's annotators' global codes (n_b,), sorted, kept on the block; each rating's
    local code into them is the label path's (``_ann_local``)."""
    b = block(fit_id, index)
    b.ann_codes = np.unique(b.problem.ann)
    return b.ann_codes


def _ann_local(b) -> np.ndarray:
    """(L,) int32: each of the block's ratings' local code into its annotators' codes, made
    the first time the label path asks (4 bytes a rating the race does without), then kept
    for the per-annotator sums below."""
    if b.ann_local is None:
        b.ann_local = np.searchsorted(b.ann_codes, b.problem.ann).astype(np.int32)
    return b.ann_local


def _rows(codes: np.ndarray, **rows: np.ndarray) -> dict:
    """A block's per-annotator sums as rows of ``codes``; ``add_rows`` adds them."""
    return {"codes": codes, **{f"rows_{k}": v for k, v in rows.items()}}


def add_rows(*parts: dict) -> dict:
    """Blocks' results added (a step of the tree reduction, in the order given): ``rows_*``
    arrays by their rows' ``codes`` (the union of the parts'), ``max_*`` by maximum (NaN if
    any is NaN), other arrays and numbers summed."""
    codes = parts[0]["codes"]
    if len(parts) > 1:
        codes = np.unique(np.concatenate([p["codes"] for p in parts]))
    out: dict = {"codes": codes}
    for key, first in parts[0].items():
        if key == "codes":
            continue
        if key.startswith("rows_"):
            acc = np.zeros((codes.size, *first.shape[1:]))
            for p in parts:
                acc[np.searchsorted(codes, p["codes"])] += p[key]
            out[key] = acc
        elif key.startswith("max_"):
            vals = [float(p[key]) for p in parts]
            out[key] = float("nan") if np.isnan(vals).any() else max(vals)
        elif isinstance(first, np.ndarray):
            acc = first.copy()
            for p in parts[1:]:
                acc += p[key]
            out[key] = acc
        else:
            out[key] = sum(p[key] for p in parts)
    return out


# --------------------------------------------------------------------------- the label fit
def set_gold(fit_id: str, index: int, box: Box) -> int:
    """The block's gold (``box``: a Series of gold values by instance ID as text): its
    problem's known truth (``Problem.with_gold``; NaN where none) and its items' gold level
    indices (``b.gold_levels``). Returns its gold items' count."""
    b = block(fit_id, index)
    g = box.value.reindex(pd.Index(b.instance_ids()).astype(str)).to_numpy(dtype=float)
    b.problem = b.problem.with_gold(g)
    b.gold_levels = confusion_model.gold_levels(g, b.problem.values)
    return int(np.isfinite(g).sum())


def label_start(fit_id: str, index: int, box: Box) -> dict:
    """Start the block's label fit (``confusion_model.fit``'s start on its ratings); its
    first soft tables and column sums. ``box``: ``(n_annotators, classes)``, ``classes``
    (K,) the class each level is fitted in (``choose.level_classes``) or None."""
    b = block(fit_id, index)
    n, classes = box.value
    p = b.problem
    k = p.n_levels if classes is None else int(classes.max()) + 1
    # the block's own int32 codes, not copies (``ItemRatings`` keeps int32 codes as they are)
    ann, inst = _ann_local(b), p.inst
    rating = p.level if classes is None else classes[p.level].astype(np.int32)
    q = confusion_ratings.start(inst, rating, p.n_instances, k)
    gold = getattr(b, "gold_levels", None)
    if gold is not None and classes is not None:
        gold = np.where(gold >= 0, classes[np.maximum(gold, 0)], -1)
    codes = b.ann_codes
    if gold is not None and (gold >= 0).any():  # the expert's ratings after the crowd's
        ann, inst, rating = confusion_ratings.with_expert(ann, inst, rating, gold, codes.size)
        codes = np.append(codes, n)
    ratings = confusion_ratings.ItemRatings(ann, inst, rating, codes.size, p.n_instances)
    b.labels = LabelBlock(codes, ratings, q, gold)
    return _tables(b.labels)


def _tables(lb: LabelBlock) -> dict:
    return {
        **_rows(lb.codes, t=lb.ratings.tables(lb.q)),
        "q_sums": confusion_ratings.column_sums(lb.q),
    }


def label_round(fit_id: str, index: int, logp: np.ndarray, rho: np.ndarray) -> dict:
    """The E-step on the block's items with its annotators' log confusions ``logp`` (n_b, K,
    K) and the class prior ``rho`` (K,); the soft tables and column sums of the new
    posteriors, their log evidence and how far they moved (``max_moved``)."""
    lb = block(fit_id, index).labels
    lb.q, ev, moved = lb.ratings.e_step(logp, rho, lb.q)
    return {**_tables(lb), "evidence": ev, "max_moved": moved}


def gold_own_posterior(
    fit_id: str, index: int, log_conf: np.ndarray, rho: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The block's gold items' posteriors from their own ratings (``confusion_model.
    own_posterior``: ``log_conf`` (n_b, K, K) its annotators' log confusions, ``rho`` the class
    prior) and their gold classes: (G_b, K) and (G_b,)."""
    lb = block(fit_id, index).labels
    if lb.gold is None:  # a block without gold items
        return np.zeros((0, lb.q.shape[1])), np.zeros(0, np.int64)
    items = np.flatnonzero(lb.gold >= 0)
    crowd = slice(0, lb.ratings.annotator.size - items.size)  # the expert's ratings are last
    r = lb.ratings
    q_own = confusion_model.own_posterior_of(
        log_conf, rho, r.annotator[crowd], r.instance[crowd], r.rating[crowd], items, r.m
    )
    return q_own, lb.gold[items]


@dataclass(frozen=True)
class Report:
    """The client's part of ``choose.label_posterior`` for the blocks: the ``report`` map
    (K, K), the typical ``rater`` (K, K), the latent posterior's ``temperature`` (1: none),
    the scale's ``values`` (K_fine,), ``within`` (K, K_fine) each class spread over its levels
    (``choose.spread``; None when the classes are the levels)."""

    report: np.ndarray
    rater: np.ndarray
    temperature: float
    values: np.ndarray
    within: np.ndarray | None = None


def label_posterior(fit_id: str, index: int, box: Box) -> dict:
    """The block's items' one posterior (``choose.label_posterior`` and, with classes,
    ``choose.spread``, on its items; ``box``: a ``Report``): kept on the block as
    ``b.posterior``; returns the items per flag at the default policy (``count_*``)."""
    b = block(fit_id, index)
    lb, rep = b.labels, box.value
    q = lb.q if rep.temperature == 1.0 else tempered(lb.q, rep.temperature)
    proba = matmul(q, rep.report)
    gain = expected_gain(q, rep.rater, rep.report)
    known = None if lb.gold is None else lb.gold >= 0
    if known is not None and known.any():
        proba[known] = np.eye(proba.shape[1])[lb.gold[known]]
        gain[known] = 0.0
    if rep.within is not None:
        proba = matmul(proba, rep.within)
        fine = getattr(b, "gold_levels", None)
        if known is not None and known.any():
            proba[known] = np.eye(rep.values.size)[fine[known]]
    b.posterior = LabelPosterior(proba, rep.values, gain, "confusion")
    b.labels = None  # the fit's ratings and posteriors are no longer needed
    flags = b.posterior.read()["flag"]
    return {f"count_{f}": int((flags == f).sum()) for f in ITEM_FLAGS}


def level_counts(fit_id: str, index: int, k: int) -> np.ndarray:
    """The block's ratings at each of the ``k`` levels (K,)."""
    return np.bincount(block(fit_id, index).problem.level, minlength=k).astype(float)


def label_frame(fit_id: str, index: int) -> pd.DataFrame:
    """The block's items' posterior as a frame (indexed by instance): ``proba_<k>``, ``gain``,
    ``truth_weight`` and the ``estimate``, ``sd`` read from it (a gold item's: its value, 0);
    ``truth_weight`` alone when the labels are the continuous posterior's (no ``posterior``)."""
    b = block(fit_id, index)
    post = b.posterior
    if post is None:
        index = pd.Index(b.instance_ids(), dtype=object, name="instance")
        return pd.DataFrame({"truth_weight": b.truth_weight}, index=index)
    estimate, sd = mean_and_sd(post.proba, post.values)
    gold = b.problem.gold
    if gold is not None:
        known = np.isfinite(gold)
        estimate, sd = np.where(known, gold, estimate), np.where(known, 0.0, sd)
    index = pd.Index(b.instance_ids(), dtype=object, name="instance")
    out = pd.DataFrame(post.proba, index=index)
    out.columns = [f"proba_{k}" for k in range(post.proba.shape[1])]
    out["gain"], out["truth_weight"] = post.gain, b.truth_weight
    out["estimate"], out["sd"] = estimate, sd
    return out


# --------------------------------------------------------------------------- the flags
def weights_and_evidence(
    fit_id: str, index: int, expertise: np.ndarray, restart: int, slot: int, box: Box
) -> None:
    """The items' truth weight (the sum of q(y) over each item's ratings) of the restart's
    state in ``slot`` (its q(y): the in-memory ``omega_``; ones for a state of the no-spam
    stage, which keeps none), and, when the labels are the continuous posterior's, each of
    the block's ratings' evidence against its q(z) (``evidence.ratings_evidence``), both kept
    on the block. ``expertise`` (n_b,): its annotators' E[tau]; ``box``: ``(difficulty (C,)
    or None at instance granularity, hyperparams_, ordinal, continuous)``. The first task of
    the label path: the block's race is over, its slots and buffers go (``_end_race``)."""
    b = block(fit_id, index)
    p = b.problem
    difficulty, hp, ordinal, continuous = box.value
    loc = b.states[restart][slot]
    omega = np.ones(p.n_ratings) if loc.omega is None else loc.omega
    b.truth_weight = np.bincount(p.inst, weights=omega, minlength=p.n_instances)
    if continuous:
        if b.local_categories:
            names = pd.Index(b.instance_ids(), dtype=object)
            cats = outputs.categories_frame(names, loc.delta_shape, loc.delta_rate, b.n_m)
            difficulty = cats["difficulty"].to_numpy(dtype=float)
        b.log_r = evidence.ratings_evidence(
            _ann_local(b), p.inst, p.cat_l, p.level, omega, expertise, difficulty,
            updates.apply_gold(loc.mu_m, p.gold), hp, ordinal,
        )  # fmt: skip
    del loc, omega  # the winner's q(y) goes with the slots
    _end_race(b)


def _end_race(b) -> None:
    """The race's per-rating buffers (``phases.Work``, 24 bytes a rating) and every restart's
    slots (their q(z) and q(y)) dropped, and the freed memory handed back: the label path,
    which starts here, reads neither, and its own arrays take their place."""
    b.states, b.work = {}, None
    release_freed_memory()


def label_evidence(fit_id: str, index: int, confusion: np.ndarray, log_pi: np.ndarray) -> None:
    """Each of the block's ratings' evidence against the label fit
    (``evidence.ratings_label_evidence``), kept on the block: ``confusion`` (n_b, K, K) its
    annotators', ``log_pi`` (K,) the log of every block's ratings' share of each level."""
    b = block(fit_id, index)
    lb = b.labels
    r = lb.ratings
    crowd = slice(0, b.problem.n_ratings)  # the expert's ratings are last
    b.log_r = evidence.ratings_label_evidence(
        r.annotator[crowd], r.instance[crowd], r.rating[crowd], lb.q, confusion, log_pi
    )


def flag_pulls(fit_id: str, index: int, e: np.ndarray, square: bool) -> dict:
    """The reliability posterior's pulls (``reliability.PullSums``) of the block's annotators
    at their reliabilities ``e`` (n_b,), as rows."""
    b = block(fit_id, index)
    pulls = reliability.pull_sums(_ann_local(b), b.log_r, b.ann_codes.size)
    return _rows(b.ann_codes, s=pulls(e, square))


def flag_grid(fit_id: str, index: int, mode: np.ndarray, width: np.ndarray, z: np.ndarray) -> dict:
    """The reliability posterior's grid sums (``reliability.grid_sums``) of the block's
    annotators (``mode``, ``width`` (n_b,) theirs, ``z`` (G,), some of the grid's nodes), as
    rows (n_b, G): the sums' transposed view, not a copy. The block keeps its ratings' order
    by annotator (``grid_order``, 8 bytes a rating) for the grid's next nodes."""
    b = block(fit_id, index)
    if b.grid_order is None:
        b.grid_order = np.argsort(_ann_local(b), kind="stable")
    lik = reliability.grid_sums(
        _ann_local(b), b.log_r, b.ann_codes.size, mode, width, z, b.grid_order
    )
    return _rows(b.ann_codes, g=lik.T)


def flags_done(fit_id: str, index: int) -> None:
    """Drop the block's evidence and its grid's order (8 bytes a rating each) once the flags
    are made, and hand the memory back."""
    b = block(fit_id, index)
    b.log_r = b.grid_order = None
    release_freed_memory()


# --------------------------------------------------------------------------- the agreement
def agreement_patterns(fit_id: str, index: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rating patterns of the block's items rated at least twice and their
    counts (``agreement.rating_patterns``, ``k`` levels); the block keeps its items' level
    counts (M_b, K) for ``agreement_rows``."""
    b = block(fit_id, index)
    p = b.problem
    flat = np.bincount(p.inst.astype(np.int64) * k + p.level, minlength=p.n_instances * k)
    b.item_levels = flat.reshape(p.n_instances, k)
    return agreement.rating_patterns(b.item_levels)


def agreement_rows(fit_id: str, index: int, d: np.ndarray) -> dict:
    """The block's annotators' agreement sums (``agreement.agreement_sums``) at the crowd's
    ordinal distance ``d`` (K, K), as rows; the level counts are dropped."""
    b = block(fit_id, index)
    p = b.problem
    total, used = agreement.agreement_sums(
        p.inst, _ann_local(b), p.level, b.item_levels, b.ann_codes.size, d
    )
    b.item_levels = None
    return _rows(b.ann_codes, total=total, used=used)
