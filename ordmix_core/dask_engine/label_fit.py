"""The label path on the Dask engine's blocks, the client's side: the in-memory default's label
fit, one posterior per item and the annotators' flags, with the blocks' sums.

- The label fit (``confusion_model.fit``'s EM): each block starts its items' posteriors and
  sends the soft tables of its annotators and its column sums (``block_labels.label_start``);
  the client adds them and runs the M-step (``confusion_model.m_step``: the careless split,
  the Newton step per annotator, the anchored prior, the class prior, the expert's confusion
  with gold), and sends each block its annotators' log confusions; each block runs the E-step
  and sends the next round's sums, how far its items moved and its log evidence
  (``label_round``): one round trip a round, the in-memory stopping rule.
- The one posterior (``choose.label_posterior``): the report map, the gold items' temperature
  (from their own posteriors, ``gold_own_posterior``) and the typical rater on the client;
  ``q @ report``, the gain and the gold items' rows on the blocks (``label_posterior``).
- The flags (``reliability.fitted_flags``): each block's ratings' evidence against the
  posterior the labels come from, the label fit (``label_evidence``, before the posterior
  drops it) or the continuous fit's winner (``weights_and_evidence``); the reliability posterior's
  bisection and grid from the blocks' per-annotator sums (``reliability.posterior_from_sums``),
  the grid's nodes as many at a time as keep the blocks' sums within ``GRID_BYTES``.
- The agreement (``agreement``): the crowd's alpha from the blocks' distinct rating patterns,
  added (the in-memory figure's bits), each annotator's from the blocks' per-annotator sums.

Per annotator only the block's own annotators' entries travel (``block_labels.add_rows``).
The sums are the in-memory ones added in another order, so the answers agree to rounding
(``tests/dask_engine/test_label_fit.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd
from distributed import wait

from ..labels import calibration, choose, confusion_model
from ..labels.choose import LabelResult
from ..labels.policy import DEFAULT as DEFAULT_POLICY
from ..labels.policy import LabelPolicy
from ..labels.posterior import LabelPosterior
from ..numerics import libm
from ..results import agreement, evidence, reliability
from ..results.decision_columns import _partitioned_item_decisions
from ..results.decisions import CONFIDENCE, THRESHOLD
from . import block_labels
from .block_tasks import Blocks, add_arrays, empty_frame
from .blocks import Box


class BlockLabels:
    """The label path over the blocks of a fit of ``n_annotators`` annotators (module
    docstring); ``codes[i]``: block i's annotators (``block_labels.annotator_codes``)."""

    def __init__(self, bl: Blocks, n_annotators: int) -> None:
        self.bl = bl
        self.n = int(n_annotators)
        self.codes = bl.client.gather(bl.run(block_labels.annotator_codes))
        self.gold_counts = [0] * len(self.codes)

    def each(self, fn: Callable, rows: Callable[[np.ndarray], tuple], *args) -> list:
        """``fn(fit_id, i, *rows(codes_i), *args)`` on every block i, on its worker: each block
        gets its own annotators' entries (``rows`` of its codes)."""
        return self.bl.run_each(fn, [rows(codes) for codes in self.codes], *args)

    def reduce(self, futs: list) -> dict:
        return self.bl.reduce(futs, block_labels.add_rows)

    @staticmethod
    def dense(part: dict, key: str, n: int) -> np.ndarray:
        """The rows ``key`` of a reduced result as an (n, ...) array (zeros where no block
        had an entry)."""
        rows = part[key]
        out = np.zeros((n, *rows.shape[1:]))
        out[part["codes"]] = rows
        return out

    # ------------------------------------------------------------------ gold
    def set_gold(self, gold: pd.Series) -> int:
        """Every block's gold (``block_labels.set_gold``: a Series of gold values by instance
        ID as text); the gold items in all."""
        sent = self.bl.send(gold)
        self.gold_counts = self.bl.client.gather(self.bl.run(block_labels.set_gold, sent))
        return int(sum(self.gold_counts))

    def _label_codes(self, i: int) -> np.ndarray:
        """Block i's rows of the label fit: its annotators and, with gold items, the expert."""
        codes = self.codes[i]
        return np.append(codes, self.n) if self.gold_counts[i] else codes

    # ------------------------------------------------------------------ the label fit
    def fit(
        self,
        n_levels: int,
        classes: np.ndarray | None,
        expert_prior: Callable | None,
        max_iter: int = confusion_model.MAX_ITER,
        tol: float = confusion_model.TOL,
    ) -> confusion_model.ConfusionFit:
        """``confusion_model.fit`` on the blocks (``q`` stays on them: the fit's ``q`` is
        None); ``classes``: the class of each level (``choose.level_classes``) or None;
        ``expert_prior``: with gold items, as ``confusion_model.fit``'s."""
        k = n_levels if classes is None else int(classes.max()) + 1
        d = confusion_model.design(k)
        expert = sum(self.gold_counts) > 0
        n_all = self.n + int(expert)
        par = confusion_model.first_parameters(self.n, k)
        sums = self.reduce(self.bl.run(block_labels.label_start, Box((self.n, classes))))
        evidence, converged, n_iter = -np.inf, False, 0
        logp_of = [self._label_codes(i) for i in range(len(self.codes))]
        while n_iter < max_iter:
            n_iter += 1
            t = self.dense(sums, "rows_t", n_all)
            par = confusion_model.m_step(
                par, t, sums["q_sums"], d, expert_prior if expert else None
            )
            own = [(par.logp[rows],) for rows in logp_of]
            sums = self.reduce(self.bl.run_each(block_labels.label_round, own, par.rho))
            evidence, moved = float(sums["evidence"]), sums["max_moved"]
            if moved < tol:
                converged = True
                break
        return confusion_model.fitted(None, par, evidence, n_iter, converged)

    def posterior(
        self,
        fit: confusion_model.ConfusionFit,
        n_ratings: np.ndarray,
        values: np.ndarray,
        classes: np.ndarray | None = None,
        level_counts: np.ndarray | None = None,
        policy: LabelPolicy = DEFAULT_POLICY,
    ) -> tuple[LabelResult, dict]:
        """``choose.label_posterior`` (and ``choose.spread`` with ``classes``, the levels'
        ratings ``level_counts`` (K,)) of the blocks' items, kept on the blocks; the
        ``LabelResult`` without its posterior (None: the items' rows are read from the blocks,
        ``rows``) and the items per flag at the default policy (``count_<flag>``)."""
        report = choose.report_map(fit.careful, fit.rho, n_ratings, policy)
        temperature = 1.0
        expert = fit.expert is not None
        if expert:
            log_conf = libm.log(fit.confusion)
            futs = self.each(block_labels.gold_own_posterior, lambda c: (log_conf[c],), fit.rho)
            got = [
                g for g, n in zip(self.bl.client.gather(futs), self.gold_counts, strict=True) if n
            ]
            q_own = np.concatenate([g[0] for g in got])
            gold = np.concatenate([g[1] for g in got])
            report = fit.expert
            temperature = calibration.gold_temperature(q_own, gold, report)
        within = None if classes is None else choose.spread_map(classes, level_counts)
        rep = block_labels.Report(
            report, choose.typical_rater(fit.confusion, n_ratings), temperature,
            np.asarray(values, float), within,
        )  # fmt: skip
        counts = self.bl.reduce(self.bl.run(block_labels.label_posterior, Box(rep)), _add)
        result = LabelResult(None, fit, report, expert, policy, temperature, classes)
        return result, counts

    def rows(self, index: pd.Index, values: np.ndarray, names: tuple | None = None) -> tuple:
        """The items' posterior gathered from the blocks in ``index``'s order (the items'
        IDs; None when the labels are the continuous posterior's; ``names``: the levels', on
        a scale of named levels) and their ``estimate``,
        ``sd`` (the confusion model's) and ``truth_weight`` (a frame by ``index``)."""
        frame = pd.concat(self.bl.client.gather(self.bl.run(block_labels.label_frame)))
        frame = frame.iloc[frame.index.get_indexer(index)]
        cols = [c for c in frame.columns if c.startswith("proba_")]
        post = None
        if cols:
            post = LabelPosterior(
                frame[cols].to_numpy(), np.asarray(values, float), frame["gain"].to_numpy(),
                "confusion", names=names,
            )  # fmt: skip
        rest = [c for c in ("estimate", "sd", "truth_weight") if c in frame.columns]
        return post, frame[rest].set_axis(index)

    def frames(self, item_futures: list, items_meta: pd.DataFrame, confusion: bool) -> tuple:
        """Items left on the cluster: ``(items, posterior, futures)``, Dask DataFrames of one
        partition per block, aligned: the blocks' items (``item_futures``, their frames) with
        the posterior's ``estimate`` and ``sd`` when the labels are the confusion model's
        (``confusion``), and each block's posterior (``block_labels.label_frame``); the
        futures behind them, computed."""
        import dask.dataframe as dd

        client = self.bl.client
        post_f = self.bl.run(block_labels.label_frame)
        if confusion:
            item_futures = [
                client.submit(_with_estimates, it, pf, pure=False)
                for it, pf in zip(item_futures, post_f, strict=True)
            ]
        wait(post_f + item_futures)
        meta = client.submit(empty_frame, post_f[0]).result()
        items = dd.from_delayed(item_futures, meta=items_meta, verify_meta=False)
        post = dd.from_delayed(post_f, meta=meta, verify_meta=False)
        return items, post, post_f + item_futures

    # ------------------------------------------------------------------ the flags
    def weights_and_evidence(
        self, model, restart: int, slot: int, local_categories: bool, continuous: bool
    ) -> None:
        """On the blocks, the items' truth weight of ``model``'s winner (its learned frames
        set, its state in ``slot`` of ``restart``) and, when the labels are the continuous
        posterior's (``continuous``), the ratings' evidence against it
        (``block_labels.weights_and_evidence``)."""
        expertise = model.annotators_["expertise"].to_numpy(dtype=float)
        difficulty = None
        if not local_categories and continuous:
            difficulty = model.categories_["difficulty"].to_numpy(dtype=float)
        box = (difficulty, model.hyperparams_, getattr(model, "ordinal", True), continuous)
        wait(
            self.each(
                block_labels.weights_and_evidence,
                lambda c: (expertise[c],),
                restart,
                slot,
                Box(box),
            )
        )

    def label_evidence(self, fit: confusion_model.ConfusionFit, counts: np.ndarray) -> None:
        """On the blocks, before the posterior drops the label fit: the ratings' evidence
        against ``fit`` (``block_labels.label_evidence``; ``counts`` (K,) the ratings at each
        level it was fitted on, all blocks')."""
        log_pi = evidence.level_log_shares(counts)
        wait(self.each(block_labels.label_evidence, lambda c: (fit.confusion[c],), log_pi))

    def flags(self, model) -> tuple[pd.DataFrame, np.ndarray]:
        """``reliability.fitted_flags`` of ``model`` from the evidence its blocks hold
        (``weights_and_evidence`` or ``label_evidence``): the flags' frame and the medians."""
        n = self.n

        def pulls(e: np.ndarray, square: bool) -> np.ndarray:
            futs = self.each(block_labels.flag_pulls, lambda c: (e[c],), square)
            return self.dense(self.reduce(futs), "rows_s", n)

        def grid(mode: np.ndarray, width: np.ndarray, z: np.ndarray) -> np.ndarray:
            step = grid_nodes_at_once(sum(c.size for c in self.codes))
            parts = []
            for lo in range(0, z.size, step):  # each node's sums are the same in any chunk
                futs = self.each(
                    block_labels.flag_grid, lambda c: (mode[c], width[c]), z[lo : lo + step]
                )
                parts.append(self.dense(self.reduce(futs), "rows_g", n))
            return np.ascontiguousarray(np.concatenate(parts, axis=1).T)

        post = reliability.posterior_from_sums(
            pulls, grid, n, THRESHOLD, CONFIDENCE, reliability.RELIABILITY_PRIOR,
            reliability.grid_nodes_for(model.data_.n_ratings),
        )  # fmt: skip
        wait(self.bl.run(block_labels.flags_done))
        return reliability.flag_frame(post, model.annotators_.index, THRESHOLD, CONFIDENCE)

    # ------------------------------------------------------------------ the agreement
    def agreement(self, k: int) -> tuple[np.ndarray, agreement.CrowdAgreement]:
        """Each annotator's agreement (N,) and the crowd's (``agreement``'s figures on ``k``
        levels): the patterns of every block merged on the client, the crowd's ordinal
        distance sent back, the blocks' per-annotator sums added."""
        parts = self.bl.client.gather(self.bl.run(block_labels.agreement_patterns, k))
        patterns = agreement.merged_patterns(parts, k)
        crowd = agreement.patterns_agreement(patterns)
        d, expected = agreement.expected_disagreement(patterns)
        sums = self.reduce(self.bl.run(block_labels.agreement_rows, d))
        total, used = (self.dense(sums, key, self.n) for key in ("rows_total", "rows_used"))
        return agreement.agreement_from_sums(total, used, expected), crowd


#: bytes of the blocks' grid sums (``block_labels.flag_grid``: rows of their annotators at
#: some of the grid's nodes) alive at once: a worker keeps its blocks' until they are added,
#: and all the grid's nodes of a block's annotators are 1.3 kB each (161 nodes)
GRID_BYTES = 1 << 26


def grid_nodes_at_once(n_rows: int) -> int:
    """The grid's nodes each round of ``flag_grid`` sums, so that the blocks' ``n_rows`` rows
    (their annotators, added up) stay within ``GRID_BYTES``; at least one."""
    return max(1, GRID_BYTES // (8 * max(int(n_rows), 1)))


def _add(*parts: dict) -> dict:
    """Counts of the blocks added."""
    return {k: sum(p[k] for p in parts) for k in parts[0]}


def finish(
    model, labels: BlockLabels, winner, local_categories: bool, gold: pd.Series | None = None
) -> list:
    """What ``OrdinalMixture.fit`` does after the race, on the blocks, for a Dask ``model``
    whose learned frames are set (``_store``) and whose winning state is ``winner`` (a
    ``client._Global``): the annotators' flags and reliability, the one posterior of every
    item (``label_result_``; the items' ``estimate``, ``sd`` and ``truth_weight_`` read from
    it, or for items left on the cluster ``item_posterior_``, a Dask DataFrame of each
    block's), ``model_["labels"]`` (on a fine scale with why its labels are the continuous
    posterior's, whose levels' mean is then the estimate, as in memory; ``gold``: the fit's
    gold values by instance ID, for the gold items' estimates), the agreement
    (``annotator_agreement_``, a Series by annotator, and ``crowd_agreement_``). Returns the
    label warnings (``OrdinalMixture._label_warnings``)."""
    continuous = model._label_model() == "continuous"
    labels.weights_and_evidence(model, winner.restart, winner.slot, local_categories, continuous)
    values = np.asarray(model.scale_.values, float)
    each, crowd = labels.agreement(values.size)
    model.annotator_agreement_ = pd.Series(each, index=model.annotators_.index, name="agreement")
    model.crowd_agreement_ = crowd
    result, counts = None, None
    if not continuous:
        k = values.size
        classes = choose.level_classes(k, choose.MAX_CLASSES) if k > choose.MAX_CLASSES else None
        level_counts = labels.bl.reduce(labels.bl.run(block_labels.level_counts, k), add_arrays)
        n_ratings = model.annotators_["n_ratings"].to_numpy(dtype=np.int64)

        def expert_prior(careful: np.ndarray, rho: np.ndarray) -> np.ndarray:
            return choose.report_map(careful, rho, n_ratings, DEFAULT_POLICY)

        fit = labels.fit(k, classes, expert_prior)
        fitted_counts = level_counts
        if classes is not None:
            fitted_counts = np.bincount(classes, weights=level_counts, minlength=fit.rho.size)
        labels.label_evidence(fit, fitted_counts)
        result, counts = labels.posterior(fit, n_ratings, values, classes, level_counts)
    # each annotator's reliability, judged against the posterior the labels come from
    model.annotator_flags_, model.annotators_["reliability"] = labels.flags(model)
    if isinstance(model.items_, pd.DataFrame):
        post, cols = labels.rows(model.items_.index, values, model.scale_.names)
        model.truth_weight_ = cols["truth_weight"].to_numpy()
        if result is None:
            gold_m = None
            if gold is not None:
                gold_m = gold.reindex(pd.Index(model.items_.index).astype(str)).to_numpy(float)
            model._continuous_labels(gold_m)
        else:
            model.label_result_ = replace(result, posterior=post)
            model.items_["estimate"], model.items_["sd"] = cols["estimate"], cols["sd"]
            model.estimates_, model.sd_ = model.items_["estimate"], model.items_["sd"]
        undetermined = None  # read from the posterior, here in the client
    else:
        model.label_result_ = result
        model.items_, model.item_posterior_, futures = labels.frames(
            model._item_futures, model.items_._meta, result is not None
        )
        model._futures = [*model._futures, *futures]
        if counts is None:
            flags = _partitioned_item_decisions(model, model.items_, CONFIDENCE)["flag"]
            counts = {f"count_{k}": v for k, v in flags.value_counts().compute().items()}
        undetermined = counts.get("count_undetermined", 0) / max(model.data_.n_instances, 1)
    # no result here: the continuous posterior, left on the blocks
    on_cluster = LabelResult(None, None, None, False, DEFAULT_POLICY)
    model._describe_labels(model.label_result_ or on_cluster)
    return model._label_warnings(undetermined)


def _with_estimates(items: pd.DataFrame, post: pd.DataFrame) -> pd.DataFrame:
    """A block's items with the estimate and sd of its posterior (the same rows)."""
    return items.assign(estimate=post["estimate"].to_numpy(), sd=post["sd"].to_numpy())
