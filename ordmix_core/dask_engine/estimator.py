"""``DaskOrdinalMixture``: the same fit as ``OrdinalMixture`` on a Dask cluster, out of core.

Flow of a fit (nothing gathers the ratings onto one process):

1. Read the ratings as a Dask DataFrame (a Parquet dataset folder or file, a CSV/TSV read in
   blocks, or a pandas / Dask frame), check and rename the columns per block, and
   hash-shuffle on ``instance``: every instance's ratings end up in one partition.
2. Each partition becomes a ``blocks.Block`` on the worker that holds it (local instance
   codes); a tree reduction of per-block summaries gives the sorted annotator IDs, their
   counts, the scale and the query order; these are broadcast and every block switches to
   global annotator / category codes (``pd.factorize(..., sort=True)`` order, as
   ``data.prepare``), so random starts (``fit/restarts.py``, keyed on IDs) equal the in-memory ones.
3. Each sweep of a restart: blocks run ``phases.phase_xy`` + ``phases.phase_tau`` (q(z) is local),
   the per-annotator / per-category sums are tree-reduced, q(tau) is updated and E[tau]
   broadcast; blocks run ``phases.phase_delta``, sums reduced; q(delta) (or locally, at instance
   granularity), eps, alpha, beta and F follow from ``phases``' global steps. Per sweep and
   partition, 2 x (N + C) + a few floats travel each way.
4. After the race, the in-memory default's label path on the blocks (``label_fit.finish``):
   the annotators' flags, the label fit, the one posterior of every item; gold items on their
   blocks' problems, a refit's starts split between the blocks and the client.
5. Everything else is ``OrdinalMixture``'s, inherited: its parameters, the problem
   (``_problem``), every restart's kind, key and start of the global factors (``_start``,
   ``_global_start``; the blocks start their instances with the same ``fit/restarts.py`` functions),
   the race (``_schedule``: warm-up no-spam stage, successive halving, collapse-aware
   choice, with the step of ``fit/step.py`` and the rescues) and the learned attributes
   (``_store``).
   Restarts run in turn (``n_jobs`` is accepted and ignored: the blocks' per-rating buffers
   serve one sweep at a time).
6. SQUAREM (``accelerate``, ``step.make_step``'s rule with ``_Sweeps``;
   ``fit/step.py``'s math split by parameter group): the plain sweep's phase 3 also returns each
   block's share of the squared norms of ``r`` and ``v`` over its per-instance groups (mu_m, lam_m
   and, at instance granularity, q(delta)); the client adds its own groups' (q(tau), global
   q(delta), eps, alpha, beta), takes the step length, extrapolates its groups and, if they are
   valid, runs one more sweep whose phase 1 starts each block from its own extrapolated groups
   (``blocks.Proposal``; blocks keep a restart's states in numbered slots). The candidate is kept if
   its bound is finite and higher, as in memory; a rejected one is just a slot the client stops
   naming. An accelerated sweep costs one more sweep (two round trips) plus a (2, 8) array up from
   each block and the step length down. The fit, its bound trace and its estimates equal
   ``OrdinalMixture``'s for the same seed up to floating-point summation order (the extrapolation
   amplifies it: ~1e-10 on the bound, ~1e-7 on estimates, as much as the in-memory engine moves when
   only its thread count changes).
"""

from __future__ import annotations

import dataclasses
import operator
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.crowd import check_granularity
from ..data.gold import NO_GOLD_RATED, checked_gold
from ..data.scale import Scale, as_scale, checked_scale, scale_names
from ..errors import ClusterError, FitWarning, InputError
from ..estimators import refit
from ..estimators.base import extends_params
from ..estimators.ordinal_mixture import Learned, OrdinalMixture, _emit
from ..fit import restarts
from ..numerics.keyed_random import id_hash
from ..results import outputs
from ..vb.problem import State
from . import block_loading, block_slots, blocks, label_fit
from .block_tasks import Blocks, add_arrays, empty_frame
from .client import _Global, _Sweeps
from .cluster import local_cluster, shut_down
from .source import _short, column_mapping, read_source

ProgressCallback = Callable[[int, int, float], "bool | None"]


@dataclass
class DaskData:
    """Sizes and scale of a Dask fit's data (``data_``; the ratings stay on the workers)."""

    scale: Scale
    n_ratings: int
    n_instances: int
    n_annotators: int
    n_categories: int
    granularity: str
    n_partitions: int


class DaskOrdinalMixture(OrdinalMixture):
    """``OrdinalMixture`` fitted on a Dask cluster; the same parameters plus the cluster's.

    Model parameters: those of
    :class:`ordmix_core.estimators.ordinal_mixture.OrdinalMixture` (same defaults, same meaning,
    same positions), SQUAREM ``accelerate`` and the exact eps step included, so the same seed gives
    the same fit. ``n_jobs`` is accepted and ignored: restarts run in
    turn here (each sweep already uses every worker).

    Cluster parameters (keyword only):
        scheduler: ``None`` starts a ``LocalCluster`` of ``n_workers`` processes with one
            thread each and ``memory_limit`` per worker (default ``"auto"``: the machine's
            memory shared between them; a worker past 95% of it is ended and the fit stops
            with a ``ClusterError``); an address (``tcp://host:8786``) or a
            ``distributed.Client`` joins an existing cluster.
        n_partitions: partitions after the shuffle on ``instance`` (default: the input's
            partitions, at least 2 per worker).
        blocksize: bytes per block when reading CSV/TSV.
        max_local_items: up to this many instances ``items_`` (and ``categories_`` at
            instance granularity) are pandas frames sorted by instance, exactly as
            ``OrdinalMixture``'s; above it they are Dask DataFrames (one partition per block,
            sorted within it) and the cluster stays up until :meth:`close`.

    Learned attributes: those of ``OrdinalMixture`` (``estimates_``, ``sd_``, ``items_``,
    ``annotators_`` with the flags' ``reliability``, ``annotator_flags_``, ``label_result_``,
    ``categories_``, ``alpha_``, ``beta_``, ``hyperparams_``, ``lower_bound_``, ``trace_``,
    ``restarts_``, ``best_restart_``, ``selection_reason_``, ``converged_``, ``n_iter_``,
    ``collapsed_``, ``warnings_``, ``interrupted_``, ``seconds_``, ``ensemble_``,
    ``alternative_``), except ``omega_`` (per rating, left on the workers: ``None``; the items'
    sums of it are ``truth_weight_``) and ``data_``, a :class:`DaskData` of sizes. With
    ``items_`` a Dask DataFrame, ``label_result_`` has no ``posterior``: each block's is
    ``item_posterior_`` (a Dask DataFrame aligned with ``items_``), and ``labels_`` /
    ``probas_`` are not available (the files hold them).
    """

    name = "odm-dask"

    @extends_params(OrdinalMixture.__init__)
    def __init__(
        self,
        *args,
        scheduler: str | object | None = None,
        n_workers: int = 2,
        memory_limit: str | int | None = "auto",
        n_partitions: int | None = None,
        blocksize: str | int = "64MiB",
        max_local_items: int = 2_000_000,
        **model_params,
    ) -> None:
        super().__init__(*args, **model_params)
        self.scheduler = scheduler
        self.n_workers = n_workers
        self.memory_limit = memory_limit
        self.n_partitions = n_partitions
        self.blocksize = blocksize
        self.max_local_items = max_local_items

    # ------------------------------------------------------------------ cluster
    def _connect(self):
        """``(client, owned)``: a client of the given scheduler, or of a new LocalCluster."""
        from distributed import Client

        if self.scheduler is None:
            return Client(local_cluster(self.n_workers, self.memory_limit)), True
        if isinstance(self.scheduler, Client):
            return self.scheduler, False
        return Client(self.scheduler), True

    def close(self) -> None:
        """Close the cluster this estimator started (if any); Dask results become unusable."""
        client = getattr(self, "_client", None)
        if client is not None and getattr(self, "_owned", False):
            shut_down(client)
        self._client = None

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        ratings: str | os.PathLike | pd.DataFrame | object,
        callback: ProgressCallback | None = None,
        gold: pd.Series | None = None,
    ) -> DaskOrdinalMixture:
        """Fit to a ratings table: a path (Parquet dataset folder or file, CSV/TSV), a pandas
        or a Dask DataFrame with ``annotator, instance, rating[, query]`` (or aliases).

        ``callback(restart, iteration, F)`` after every sweep, as ``OrdinalMixture.fit``;
        returning False stops the fit and keeps the best restart so far. ``gold``: known true
        values (a Series by instance), as ``OrdinalMixture.fit``'s.
        """
        if self.updates not in ("exact", "paper"):  # before a cluster is started for nothing
            raise InputError(f"updates must be 'exact' or 'paper', not {self.updates!r}")
        self._validate()
        given = None if self.scale is None else as_scale(self.scale, np.empty(0))
        gold = None if gold is None else checked_gold(gold, given)
        prev = None if self.init_from is None else refit.load_previous(self.init_from)
        t0 = time.perf_counter()
        self.spam_ = self.spam is not False
        self.close()
        client, owned = self._connect()
        fit_id = uuid.uuid4().hex
        keep = False
        self._blocks = bl = Blocks(client, fit_id)
        try:
            with np.errstate(over="ignore", under="ignore"), bl.watch():
                warn = self._fit(bl, ratings, callback, gold, prev)
            self.seconds_ = time.perf_counter() - t0  # the whole fit, the label path included
            keep = not isinstance(self.items_, pd.DataFrame)
        except Exception as e:
            if bl.lost is None:
                raise
            raise ClusterError(bl.loss()) from e
        finally:
            self._blocks = None
            try:
                client.run(blocks.release, fit_id)
            except Exception:  # noqa: BLE001 - best effort; the workers may be gone
                pass
            if keep:  # the Dask results live on this client's cluster
                self._client, self._owned = client, owned
            elif owned:
                shut_down(client)
        _emit(warn)
        return self

    def _fit(self, bl: Blocks, ratings, callback, gold: pd.Series | None, prev) -> list[FitWarning]:

        client = bl.client
        summary, label = self._load_blocks(bl, ratings)

        # global codes, scale, problem
        sc = self._scale_of(summary, label)
        annotators = np.asarray(summary["ann"].index, dtype=object)
        n_per_ann = summary["ann"].to_numpy(dtype=np.int64)
        categories = self._categories(summary)
        local_cats = self.granularity == "instance"
        n_cat = 0 if local_cats else (1 if categories is None else categories.size)
        gp, pi = self._problem(sc, n_per_ann, n_cat)
        setup = block_loading.Setup(gp, annotators, categories, self.granularity, sc.step, label)
        setup_f = client.scatter(setup, broadcast=True, hash=False)
        n_c = bl.reduce(bl.run(block_loading.finalize_block, setup_f), add_arrays)
        n_c = np.rint(n_c).astype(np.int64)
        del setup_f
        labels = label_fit.BlockLabels(bl, annotators.size)
        n_gold = 0 if gold is None else labels.set_gold(gold)
        if gold is not None and n_gold == 0:
            raise InputError(NO_GOLD_RATED)
        n_ratings = int(summary["n_ratings"])
        n_inst = int(summary["n_instances"])
        self.data_ = DaskData(
            sc, n_ratings, n_inst, annotators.size, n_inst if local_cats else n_cat,
            self.granularity, len(bl.workers),
        )  # fmt: skip

        ann_hash = id_hash(annotators)
        runs = self._start_runs(bl, gp, ann_hash, n_c, sc)
        if prev is not None:  # a refit: the previous posteriors as its starts
            runs = self._warm_runs(bl, prev, runs, annotators, categories, gp)
        sweeps = _Sweeps(bl, gp, local_cats, n_ratings, self._restarts(), self.accelerate)
        sweeps.keep_q_y = True  # the truth weight reads the winner's (``label_fit.finish``)
        sweeps.exact_eps = self._exact_eps()
        interrupted = self._schedule(runs, sweeps, callback, branch=sweeps.branch_fn(ann_hash, sc))

        winner: list[_Global] = []

        def learned(g: _Global) -> Learned:
            winner.append(g)
            glob = None  # the gold items' own reading needs the global factors
            if gold is not None and not interrupted:
                glob = bl.send(State(**{f.name: getattr(g, f.name) for f in fields(State)}))
            args = (g.restart, g.slot, gold is not None, glob)
            if self.data_.n_instances > self.max_local_items:
                items, cats = self._dask_frames(bl, bl.run(blocks.block_results, *args), local_cats)
            else:
                got = bl.gather_each(blocks.block_results, *args)
                items = pd.concat([it for it, _ in got]).sort_index(kind="stable")
                cats = None
                if local_cats:
                    cats = pd.concat([c for _, c in got]).sort_index(kind="stable")
            if cats is None:
                names = np.array(["all"], dtype=object) if categories is None else categories
                cats = outputs.categories_frame(names, g.delta_shape, g.delta_rate, n_c)
            return items, cats, g.w_ann, None

        def member_mu(g: _Global) -> np.ndarray:
            """A near-tied restart's item means, gathered from the blocks in ``items_``'s
            order (only when ``items_`` is gathered: Dask frames get no item columns)."""
            got = bl.gather_each(blocks.block_means, g.restart, g.slot)
            return pd.concat(got).sort_index(kind="stable").to_numpy(dtype=float)

        warn = self._store(
            self.data_, gp, pi, annotators, runs, interrupted, learned, member_mu,
            sweeps.alternative,
        )  # fmt: skip
        self.model_["n_gold"] = n_gold
        label_warn = label_fit.finish(self, labels, winner[0], local_cats, gold)
        self.warnings_ = [*self.warnings_, *(w.message for w in label_warn)]
        return warn + label_warn

    def _scale_of(self, summary: dict, label: str) -> Scale:
        """The fit's scale: as given, or inferred from the blocks' ratings (refused with
        outlying values, as in memory)."""
        if self.scale is None:
            return checked_scale(summary["values"], summary["value_counts"], label)
        return as_scale(self.scale, summary["values"])

    def _start_runs(
        self, bl: Blocks, gp, ann_hash: np.ndarray, n_c: np.ndarray, sc: Scale
    ) -> list[restarts.RestartRun]:
        """Every restart's start: keys in restart order from one Generator, the global factors
        here (``_global_start``), the blocks' q(z) there (``block_slots.init_block``)."""
        from distributed import wait

        rng = np.random.default_rng(self.random_state)
        runs = []
        for r in range(self._restarts()):
            kind, key = self._start(r, rng)
            g = self._global_start(gp, ann_hash, n_c, kind, key, r, sc.step)
            wait(bl.run(block_slots.init_block, r, key, sc.step))
            w_ann = gp.n_per_ann.astype(float)
            state = _Global(None, None, **g._asdict(), restart=r, w_ann=w_ann)
            runs.append(restarts.RestartRun(r, kind, state, key=key))
        return runs

    def _warm_runs(
        self, bl: Blocks, prev: refit.Previous, runs: list, annotators, categories, gp
    ) -> list[restarts.RestartRun]:
        """``refit.refit_starts`` of the restarts' usual starts ``runs``: the blocks' items
        (``block_slots.warm_block``), the client's annotators, categories and hyperparameters
        (``refit.warm_globals``, ``warm_categories``), as ``OrdinalMixture._fit_data``'s."""
        from distributed import wait

        refit.check_scale(prev, gp.values)
        kinds = refit.start_kinds(len(runs))
        same = prev.granularity in (None, self.granularity)
        sent = bl.client.scatter(blocks.Box((prev, same)), broadcast=True, hash=False)
        wait(bl.run(block_slots.warm_block, len(kinds), sent))
        start = dataclasses.replace(runs[0].state)
        refit.warm_globals(prev, annotators, gp, start)
        if same and self.granularity != "instance":
            names = np.array(["all"], dtype=object) if categories is None else categories
            refit.warm_categories(prev, names, start.delta_shape, start.delta_rate)
        out = []
        for r, kind in enumerate(kinds):
            g = dataclasses.replace(start, restart=r)
            for name, value in vars(g).items():  # no array shared between the starts
                if isinstance(value, np.ndarray):
                    setattr(g, name, value.copy())
            out.append(restarts.RestartRun(r, kind, g, key=runs[r].key))
        return out

    def _partitioned_stability(self, states: list[_Global], sc: Scale):
        """``items_`` left on the cluster with the ensemble's columns, each block's from its
        slots of the near-tied ``states`` (``blocks.block_stability``)."""
        import dask.dataframe as dd
        from distributed import wait

        bl = self._blocks
        members = [(g.restart, g.slot) for g in states]
        own = [(it,) for it in self._item_futures]
        unit = sc.fit_unit if sc.fine else sc.step  # as in memory (``StoresLearned._store``)
        futs = bl.run_each(blocks.block_stability, own, members, sc.values, unit)
        wait(futs)
        self._item_futures = futs
        self._futures = [*self._futures, *futs]
        meta = bl.client.submit(empty_frame, futs[0]).result()
        return dd.from_delayed(futs, meta=meta, verify_meta=False)

    def _load_blocks(self, bl: Blocks, ratings) -> tuple[dict, str]:
        """Read the ratings, normalise each partition, shuffle on ``instance`` and load one
        block per partition on its worker; ``(summary of the blocks, the source's label)``."""
        from distributed import wait

        client = bl.client
        ddf, label = read_source(ratings, self.blocksize)
        n_workers = max(len(client.scheduler_info()["workers"]), 1)
        n_parts = self.n_partitions or max(ddf.npartitions, 2 * n_workers)
        mapping = column_mapping(list(ddf.columns), label)
        meta = pd.DataFrame(
            {
                c: pd.Series(dtype=float if c == "rating" else "string[pyarrow]")
                for c in ("annotator", "instance", "rating", "query")
                if c in mapping.values()
            }
        )
        names = scale_names(self.scale)
        norm = ddf.map_partitions(block_loading.normalize_block, mapping, label, names, meta=meta)
        parts = norm.shuffle(on="instance", npartitions=n_parts).to_delayed()
        import dask

        loads = [
            dask.delayed(block_loading.load_block, pure=False)(bl.fit_id, i, part, label)
            for i, part in enumerate(parts)
        ]
        try:
            futs = client.compute(loads)
            wait(futs)
            for f in futs:  # the first error, as the user's InputError when it is one
                if f.status == "error":
                    f.result()
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - a reader's error is a bad file
            raise InputError(f"cannot be read ({_short(e)}); check the file", source=label) from e
        who = client.who_has(futs)
        bl.workers = [who[f.key][0] for f in futs]
        summary = bl.reduce(futs, block_loading.combine_summaries)
        del futs, loads, parts
        return summary, label

    def _categories(self, summary: dict) -> np.ndarray | None:
        """The categories' names at query granularity (queries in order of their first
        instance), else None; a missing query column or an unknown granularity refused."""
        check_granularity(self.granularity, has_query=summary["query_min"] is not None)
        if self.granularity != "query":
            return None
        return np.asarray(summary["query_min"].sort_values().index, dtype=object)

    def _dask_frames(self, bl: Blocks, parts: list, local_cats: bool) -> tuple:
        """``items_`` (and local ``categories_``) as Dask DataFrames of the blocks' results,
        computed before the blocks are released; the futures are kept on the estimator."""
        import dask.dataframe as dd
        from distributed import wait

        client = bl.client
        item_f = [client.submit(operator.itemgetter(0), f) for f in parts]
        self._item_futures = item_f
        meta = client.submit(empty_frame, item_f[0]).result()  # the columns, gold's included
        items = dd.from_delayed(item_f, meta=meta, verify_meta=False)
        cats, cat_f = None, []
        if local_cats:
            cat_f = [client.submit(operator.itemgetter(1), f) for f in parts]
            cats = dd.from_delayed(cat_f, meta=_cats_meta(), verify_meta=False)
        self._futures = item_f + cat_f
        wait(self._futures)
        return items, cats


# --------------------------------------------------------------------------- helpers


def _cats_meta() -> pd.DataFrame:
    """The empty ``categories_`` frame (Dask's meta) with ``outputs.categories_frame``'s
    columns."""
    empty = np.zeros(0)
    return outputs.categories_frame(pd.Index([], dtype=object), empty, empty, np.zeros(0, "i8"))


# --------------------------------------------------------------------------- outputs


def write_outputs(model: DaskOrdinalMixture, folder: Path, settings: dict) -> dict:
    """The files ``ordmix fit`` writes (``outputs.write_fit_outputs``); when ``items_`` is a
    Dask DataFrame, ``items/part-*.csv`` (and ``categories/part-*.csv``) instead of one file
    each, written by the workers (the output folder must be on a filesystem they share).
    Returns the summary written."""

    def write_parts(table: outputs.Table, frame, where: Path) -> None:
        import dask

        tasks = [
            dask.delayed(_write_part)(part, str(where / f"part-{i:05d}.csv"), table)
            for i, part in enumerate(frame.to_delayed())
        ]
        model._client.compute(tasks, sync=True)

    return outputs.write_fit_outputs(model, folder, settings, write_parts=write_parts)


def _write_part(df: pd.DataFrame, path: str, table: outputs.Table) -> None:
    from ..io import write_csv

    write_csv(table.rows(df), path, list(table.id_columns))
