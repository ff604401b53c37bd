"""``DaskOrdinalMixture``: the same fit as ``OrdinalMixture`` on a Dask cluster, out of core.

Flow of a fit (nothing gathers the ratings onto one process):

1. Read the ratings as a Dask DataFrame (a Parquet dataset folder or file, a CSV/TSV read in
   blocks, or a pandas / Dask frame), check and rename the columns per block, and
   hash-shuffle on ``instance``: every instance's ratings end up in one partition.
2. Each partition becomes a ``blocks.Block`` on the worker that holds it (local instance
   codes); a tree reduction of per-block summaries gives the sorted annotator IDs, their
   counts, the scale and the query order; these are broadcast and every block switches to
   global annotator / category codes (``pd.factorize(..., sort=True)`` order, as
   ``data.prepare``), so random starts (``starts.py``, keyed on IDs) equal the in-memory ones.
3. Each sweep of a restart: blocks run ``phases.phase_xy`` + ``phases.phase_tau`` (q(z) is local),
   the per-annotator / per-category sums are tree-reduced, q(tau) is updated and E[tau]
   broadcast; blocks run ``phases.phase_delta``, sums reduced; q(delta) (or locally, at instance
   granularity), eps, alpha, beta and F follow from ``phases``' global steps. Per sweep and
   partition, 2 x (N + C) + a few floats travel each way.
4. Everything else is ``OrdinalMixture``'s, inherited: its parameters, the problem
   (``_problem``), every restart's kind, key and start of the global factors (``_start``,
   ``_global_start``; the blocks start their instances with the same ``starts.py`` functions),
   the schedule (``_schedule``: warm-up no-spam stage, successive halving, collapse-aware
   choice), the SQUAREM rule (``acceleration.make_step``) and the learned attributes (``_store``).
   Restarts run in turn (``n_jobs`` is accepted and ignored: the blocks' per-rating buffers
   serve one sweep at a time).
5. SQUAREM (``accelerate``, ``acceleration.make_step``'s rule with ``_Sweeps``;
   ``acceleration.py``'s math split by parameter group): the plain sweep's phase 3 also returns each
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
import logging
import operator
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.crowd import COLUMN_ALIASES, CrowdData, normalize_columns
from ..data.scale import Scale, as_scale, checked_scale
from ..errors import InputError
from ..estimators.base import extends_params
from ..estimators.ordinal_mixture import Learned, OrdinalMixture, _emit
from ..fit import acceleration, restarts, schedule, selection, starts
from ..fit.settle import settle_items
from ..io import PARQUET_EXTENSIONS, TEXT_EXTENSIONS
from ..numerics.keyed_random import id_hash
from ..results import outputs
from ..vb import phases, updates
from ..vb.problem import Problem, State
from . import blocks

ProgressCallback = Callable[[int, int, float], "bool | None"]

#: broadcast values bigger than this are scattered once instead of sent with every task
_SCATTER_BYTES = 1 << 20
#: fan-in of the tree reductions
FAN_IN = 8


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


@dataclass
class _Global(State):
    """A restart's state as the client holds it: ``State`` without its per-instance part
    (``mu_m``, ``lam_m`` are None: they stay on the blocks, in slot ``slot``, with local
    q(delta) at instance granularity, where ``delta_*`` here are empty) and without ``omega``
    (per rating, on the blocks)."""

    restart: int = 0
    w_ann: np.ndarray | None = None  # sum omega per annotator, last sweep
    slot: int = 0  # the blocks' slot of this state's q(z) (and local q(delta))
    swept: bool = False  # made by a sweep (the in-memory State's ``omega is not None``)
    max_dmu: float = np.inf  # the sweep's largest change of an item's mean (blocks' maximum)


#: the SQUAREM groups the client holds (the blocks hold the per-instance ones)
CLIENT_GROUPS = tuple(g for g in acceleration.GROUPS if g not in acceleration.INSTANCE_GROUPS)


class DaskOrdinalMixture(OrdinalMixture):
    """``OrdinalMixture`` fitted on a Dask cluster; the same parameters plus the cluster's.

    Model parameters: those of
    :class:`ordmix_core.estimators.ordinal_mixture.OrdinalMixture` (same defaults, same meaning,
    same positions), SQUAREM ``accelerate`` and the exact eps step included, so the same seed gives
    the same fit. ``n_jobs`` is accepted and ignored: restarts run in
    turn here (each sweep already uses every worker).

    Cluster parameters (keyword only):
        scheduler: ``None`` starts a ``LocalCluster`` of ``n_workers`` processes with one
            thread each and ``memory_limit`` per worker; an address (``tcp://host:8786``) or
            a ``distributed.Client`` joins an existing cluster.
        n_partitions: partitions after the shuffle on ``instance`` (default: the input's
            partitions, at least 2 per worker).
        blocksize: bytes per block when reading CSV/TSV.
        max_local_items: up to this many instances ``items_`` (and ``categories_`` at
            instance granularity) are pandas frames sorted by instance, exactly as
            ``OrdinalMixture``'s; above it they are Dask DataFrames (one partition per block,
            sorted within it) and the cluster stays up until :meth:`close`.

    Learned attributes: those of ``OrdinalMixture`` (``estimates_``, ``sd_``, ``items_``,
    ``annotators_``, ``categories_``, ``alpha_``, ``beta_``, ``hyperparams_``,
    ``lower_bound_``, ``trace_``, ``restarts_``, ``best_restart_``, ``selection_reason_``,
    ``converged_``, ``n_iter_``, ``collapsed_``, ``warnings_``, ``interrupted_``,
    ``seconds_``), except ``omega_`` (per rating, left on the workers: ``None``) and
    ``data_``, a :class:`DaskData` of sizes. ``alternative_`` is made as in memory, by
    plain sweeps over the blocks from the winner's slot (kept meanwhile); items held as a
    Dask DataFrame get no stability columns from it either. ``init_from`` (a warm start) is
    refused: it is the in-memory engine's.
    """

    name = "odm-dask"

    @extends_params(OrdinalMixture.__init__)
    def __init__(
        self,
        *args,
        scheduler: str | object | None = None,
        n_workers: int = 2,
        memory_limit: str | int | None = "2GiB",
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
        from distributed import Client, LocalCluster

        if self.scheduler is None:
            cluster = LocalCluster(
                n_workers=self.n_workers,
                threads_per_worker=1,
                processes=True,
                memory_limit=self.memory_limit,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,  # a bad file gives one InputError, not logs
            )
            return Client(cluster), True
        if isinstance(self.scheduler, Client):
            return self.scheduler, False
        return Client(self.scheduler), True

    def close(self) -> None:
        """Close the cluster this estimator started (if any); Dask results become unusable."""
        client = getattr(self, "_client", None)
        if client is not None and getattr(self, "_owned", False):
            _shut_down(client)
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
        returning False stops the fit and keeps the best restart so far. ``gold`` is not
        supported here yet (an InputError: fit with the in-memory engine).
        """
        if gold is not None:
            raise InputError(
                "gold items are not supported by the Dask engine yet; fit with the in-memory "
                "engine (without --engine dask) to use them"
            )
        if self.updates not in ("exact", "paper"):  # before a cluster is started for nothing
            raise InputError(f"updates must be 'exact' or 'paper', not {self.updates!r}")
        if self.init_from is not None:
            raise InputError(
                "init_from (a warm start from an earlier fit) works with the in-memory "
                "OrdinalMixture only"
            )
        if self.labels == "confusion":
            raise InputError(
                "labels='confusion' (the ordinal confusion model's labels) works with the "
                "in-memory engine only; this engine's labels come from the continuous posterior "
                "(drop --labels, or fit without --engine dask)"
            )
        t0 = time.perf_counter()
        # spam=None: the in-memory engine decides from per-rating evidence that stays on the
        # workers here; this engine keeps the spam component (``model_["spam_choice"]``)
        self.spam_ = self.spam is not False
        self.close()
        client, owned = self._connect()
        fit_id = uuid.uuid4().hex
        keep = False
        try:
            with np.errstate(over="ignore", under="ignore"):
                warn = self._fit(_Blocks(client, fit_id), ratings, callback, t0)
            keep = not isinstance(self.items_, pd.DataFrame)
        finally:
            try:
                client.run(blocks.release, fit_id)
            except Exception:  # noqa: BLE001 - best effort; the workers may be gone
                pass
            if keep:  # the Dask results live on this client's cluster
                self._client, self._owned = client, owned
            elif owned:
                _shut_down(client)
        if self._chooses_spam() and not self.interrupted_:
            self.model_["spam_choice"] = {
                "spam": True,
                "why": "the Dask engine keeps the spam component: the evidence that decides it "
                "in memory (each rating against its item) stays on the workers",
            }
        # the ratings stay on the workers: labels from the continuous posterior
        self.level_proba_ = None
        self.model_["labels"] = "continuous"
        _emit(warn)
        return self

    def _fit(self, bl: _Blocks, ratings, callback, t0: float) -> list[selection.FitWarning]:
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
        norm = ddf.map_partitions(blocks.normalize_block, mapping, label, meta=meta)
        parts = norm.shuffle(on="instance", npartitions=n_parts).to_delayed()
        import dask

        loads = [
            dask.delayed(blocks.load_block, pure=False)(bl.fit_id, i, part, label)
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
        summary = bl.reduce(futs, blocks.combine_summaries)
        del futs, loads, parts

        # global codes, scale, problem
        if self.scale is None:  # inferred: refused with outlying values, as in memory
            sc = checked_scale(summary["values"], summary["value_counts"], label)
        else:
            sc = as_scale(self.scale, summary["values"])
        annotators = np.asarray(summary["ann"].index, dtype=object)
        n_per_ann = summary["ann"].to_numpy(dtype=np.int64)
        categories = None
        if self.granularity == "query":
            if summary["query_min"] is None:
                raise InputError(
                    "granularity 'query' needs a 'query' column in the ratings; add one, "
                    "or choose granularity 'instance' or 'global'"
                )
            categories = np.asarray(summary["query_min"].sort_values().index, dtype=object)
        elif self.granularity not in ("instance", "global"):
            raise InputError(
                f"granularity {self.granularity!r} is not one of instance, query, global"
            )
        local_cats = self.granularity == "instance"
        n_cat = 0 if local_cats else (1 if categories is None else categories.size)
        gp, pi = self._problem(sc, n_per_ann, n_cat)
        setup = blocks.Setup(gp, annotators, categories, self.granularity, sc.step, label)
        setup_f = client.scatter(setup, broadcast=True, hash=False)
        n_c = bl.reduce(bl.run(blocks.finalize_block, setup_f), _add_arrays)
        n_c = np.rint(n_c).astype(np.int64)
        del setup_f
        n_ratings = int(summary["n_ratings"])
        self.data_ = DaskData(
            sc,
            n_ratings,
            int(summary["n_instances"]),
            annotators.size,
            int(summary["n_instances"]) if local_cats else n_cat,
            self.granularity,
            len(bl.workers),
        )

        # restarts: keys in restart order from one Generator; the blocks start q(z) themselves
        rng = np.random.default_rng(self.random_state)
        ann_hash = id_hash(annotators)
        runs = []
        for r in range(self.n_restarts):
            kind, key = self._start(r, rng)
            g = self._global_start(gp, ann_hash, n_c, kind, key, r, sc.step)
            wait(bl.run(blocks.init_block, r, key, sc.step))
            w_ann = n_per_ann.astype(float)
            state = _Global(None, None, **g._asdict(), restart=r, w_ann=w_ann)
            runs.append(restarts.RestartRun(r, kind, state, key=key))

        sweeps = _Sweeps(bl, gp, local_cats, n_ratings, self.n_restarts, self.accelerate)
        sweeps.eps_pack = self._eps_pack()
        sweeps.exact_eps = self._exact_eps()
        step = acceleration.make_step(sweeps, self.accelerate, sweeps.exact_eps)
        settle = acceleration.make_settle(sweeps, sweeps.exact_eps)
        interrupted = self._schedule(
            runs, step, callback, branch=sweeps.branch_fn(ann_hash, sc), settle=settle
        )

        def learned(g: _Global) -> Learned:
            parts = bl.run(blocks.block_results, g.restart, g.slot)
            if self.data_.n_instances > self.max_local_items:
                items, cats = self._dask_frames(bl, parts, local_cats, summary)
            else:
                got = client.gather(parts)
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
            got = client.gather(bl.run(blocks.block_means, g.restart, g.slot))
            return pd.concat(got).sort_index(kind="stable").to_numpy(dtype=float)

        return self._store(
            self.data_, gp, pi, annotators, runs, interrupted, t0, learned, member_mu,
            sweeps.alternative,
        )  # fmt: skip

    def _dask_frames(self, bl: _Blocks, parts: list, local_cats: bool, summary: dict) -> tuple:
        """``items_`` (and local ``categories_``) as Dask DataFrames of the blocks' results,
        computed before the blocks are released; the futures are kept on the estimator."""
        import dask.dataframe as dd
        from distributed import wait

        client = bl.client
        item_f = [client.submit(operator.itemgetter(0), f) for f in parts]
        has_query = summary["query_min"] is not None
        items = dd.from_delayed(item_f, meta=_items_meta(has_query), verify_meta=False)
        cats, cat_f = None, []
        if local_cats:
            cat_f = [client.submit(operator.itemgetter(1), f) for f in parts]
            cats = dd.from_delayed(cat_f, meta=_cats_meta(), verify_meta=False)
        self._futures = item_f + cat_f
        wait(self._futures)
        return items, cats


class _Blocks:
    """The fit's blocks on the cluster: tasks pinned to each block's worker, broadcasts and
    tree reductions of their results."""

    def __init__(self, client, fit_id: str) -> None:
        self.client = client
        self.fit_id = fit_id
        self.workers: list = []  # block i lives on workers[i]

    def run(self, fn: Callable, *args) -> list:
        """``fn(fit_id, i, *args)`` on every block ``i``, on its worker; the futures."""
        return [
            self.client.submit(
                fn, self.fit_id, i, *args, workers=[w], allow_other_workers=False, pure=False
            )
            for i, w in enumerate(self.workers)
        ]

    def send(self, value):
        """``value`` for every block: boxed (``blocks.Factors`` as is), scattered once when big."""
        box = value if isinstance(value, blocks.Factors) else blocks.Box(value)
        size = sum(getattr(a, "nbytes", 0) for a in _arrays(value))
        if size > _SCATTER_BYTES:
            return self.client.scatter(box, broadcast=True, hash=False)
        return box

    def reduce(self, futs: list, combine: Callable = blocks.add_sums):
        """``_tree_reduce`` of the futures' results."""
        return _tree_reduce(self.client, futs, combine)


class _Sweeps:
    """The Dask engine's sweeps for ``acceleration.make_step`` (see the module docstring, 3 and 5):
    each sweep is two rounds over the blocks, the client updating the global factors between
    and after them; a state's per-instance factors stay on the blocks in numbered slots."""

    def __init__(
        self,
        bl: _Blocks,
        gp: Problem,
        local_cats: bool,
        n_ratings: int,
        n_restarts: int,
        accelerate: bool,
    ) -> None:
        self.bl = bl
        self.gp = gp
        self.local_cats = local_cats
        self.n_ratings = n_ratings
        self.accelerate = accelerate
        self.next_slot = {r: 1 for r in range(n_restarts)}  # slot 0: the start
        self.pinned: tuple[int, ...] = ()  # slots every plain sweep keeps (``alternative``)
        self.eps_pack = (
            acceleration.EPS_PACK
        )  # SQUAREM's clip of eps (``OrdinalMixture._eps_pack``)
        self.exact_eps = accelerate  # the exact eps step (``OrdinalMixture._exact_eps``)
        self.lo, self.hi = float(gp.thresholds[0]), float(gp.thresholds[-1])

    def branch_fn(self, ann_hash: np.ndarray, sc) -> schedule.BranchFn:
        """``branch`` of the shared warm-up (``schedule.race``): the blocks copy the warm-up's
        slot with the restart's noise on q(z)'s means (``blocks.branch_block``), the client
        its globals with the noise on q(tau) (``starts.branch_annotators``), as in memory."""

        def branch(source: _Global, run: restarts.RestartRun) -> _Global:
            slot = self.next_slot[run.restart]
            self.next_slot[run.restart] += 1
            from distributed import wait

            wait(
                self.bl.run(
                    blocks.branch_block, source.restart, source.slot, run.restart, slot,
                    run.key, sc.step,
                )
            )  # fmt: skip
            g = dataclasses.replace(source, restart=run.restart, slot=slot)
            for name, value in vars(g).items():  # no array shared with the warm-up's state
                if isinstance(value, np.ndarray):
                    setattr(g, name, value.copy())
            g.tau_rate = starts.branch_annotators(source.tau_rate, ann_hash, run.key)
            return g

        return branch

    def _sweep(
        self,
        g: _Global,
        spam: bool,
        keep: tuple,
        src=None,
        norms=None,
        keep_after=None,
        ref: int | None = None,
    ) -> tuple[_Global | None, float, np.ndarray | None]:
        """One sweep of ``g``'s restart from ``g`` (or from the proposal ``src``, whose
        global factors ``g`` then holds) into a new slot; ``(new, F, norms)``, ``new`` None
        when the proposal is not valid on some block. ``keep``: slots the blocks keep
        (besides the new one); ``keep_after``: those still kept after phase 3; ``ref``: the
        slot the items' change is measured from (default ``g``'s)."""
        bl, p, local_cats = self.bl, self.gp.at(spam), self.local_cats
        dst = self.next_slot[g.restart]
        self.next_slot[g.restart] += 1
        ann_f = phases.annotator_factors(
            p, g.tau_shape, g.tau_rate, g.eps, g.bias_mean, g.bias_prec
        )
        fac = blocks.Factors(
            ann_f,
            None if local_cats else phases.category_factors(p, g.delta_shape, g.delta_rate),
            phases.spam_table(p, g),
        )
        s1 = bl.reduce(
            bl.run(
                blocks.phase_xy_tau, g.restart, spam, bl.send(fac),
                g.slot if src is None else src, dst, keep, ref, self.exact_eps and spam is True,
            )
        )  # fmt: skip
        if s1["bad"] > 0:
            return None, -np.inf, None
        r_ann = s1["r_ann"]
        bias_mean, bias_prec, lam_b = g.bias_mean, g.bias_prec, g.lam_b
        if p.bias:
            bias_mean, bias_prec, r_ann = phases.bias_step(r_ann, s1["bias_sums"], ann_f[0], lam_b)
        tau_shape, tau_rate = phases.update_tau(s1["w_ann"], r_ann, g.alpha, g.beta)
        after = (*(keep if keep_after is None else keep_after), dst)
        sent = bl.send((tau_shape / tau_rate, bias_mean, bias_prec))
        s3 = bl.reduce(bl.run(blocks.phase_delta, g.restart, sent, dst, after, norms))
        f = s1["f"] + s3["f"]
        delta_shape, delta_rate = g.delta_shape, g.delta_rate
        if not local_cats:
            delta_shape, delta_rate = phases.update_delta(p, s1["w_cat"], s3["d_cat"])
            f += phases.category_terms(p, s1["w_cat"], s3["d_cat"], delta_shape, delta_rate)
        eps, alpha, beta, f_ann = phases.annotator_step(p, s1["w_ann"], tau_shape, tau_rate, g.eps)
        if p.bias:
            lam_b, f_bias = phases.bias_prior_step(bias_mean, bias_prec)
            f += f_bias
        pi, dir_a, kappa = g.pi, g.dir_a, g.kappa
        if s1["spam_cells"] is not None:
            pi, dir_a, kappa, f_spam = phases.spam_step(p, s1["spam_cells"], g)
            f += f_spam
        new = _Global(
            None, None, tau_shape, tau_rate, delta_shape, delta_rate, eps, alpha, beta,
            None, bias_mean, bias_prec, lam_b, pi, dir_a, kappa, g.eps,
            restart=g.restart, w_ann=s1["w_ann"], slot=dst, swept=True,
            max_dmu=float(s1["max_dmu"]),
        )  # fmt: skip
        return new, float(f_ann + f), s3.get("norms")

    def sweep(self, g: _Global, spam: bool, history: tuple | None) -> tuple:
        if history is not None:  # keep s0, s1 (= g) for the proposal and take their norms
            h0, h1 = history
            return self._sweep(g, spam, (h0.slot, h1.slot, g.slot), norms=(h0.slot, h1.slot))
        # the blocks keep g only while a later step may extrapolate from it
        pin = self.pinned
        return self._sweep(g, spam, (g.slot, *pin), keep_after=(g.slot,) * self.accelerate + pin)

    def eps_block(self, g: _Global) -> _Global:
        """``g`` with each annotator's eps at the exact optimum of its block
        (``updates.eps_block``): each Newton step one round over the blocks
        (``blocks.eps_sums`` on the q(y) ``g``'s slot kept, computed with ``g.omega_eps``)."""
        bl = self.bl

        def sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sent = bl.send((x, g.omega_eps))
            s = bl.reduce(bl.run(blocks.eps_sums, g.restart, g.slot, sent))
            return s["g"], s["h"]

        eps = updates.eps_block_solve(sums, np.asarray(g.eps, dtype=float), self.gp.n_per_ann > 0)
        return dataclasses.replace(g, eps=eps)

    def settle_items(self, g: _Global, annotators: np.ndarray) -> tuple[_Global, np.ndarray]:
        """``settle.settle_items`` of ``g`` with ``annotators`` ((N,) bool), as in memory, into
        a new slot; ``(state, [largest move of an item's mean])``.

        The problem splits: an item no named annotator rated is solved alone (the annotators
        held), on its block (``blocks.settle_block``); the named annotators and the items
        they rated form the other part, whose ratings the blocks hand over (a few annotators'
        items) and the client solves like the in-memory engine, then writes back
        (``blocks.settle_write``). A settle not taken leaves its slot until the restart's
        next sweep drops it."""
        bl, gp, local = self.bl, self.gp.at(True), self.local_cats
        dst = self.next_slot[g.restart]
        self.next_slot[g.restart] += 1
        glob = State(**{f.name: getattr(g, f.name) for f in dataclasses.fields(State)})
        busy = np.asarray(annotators, dtype=bool)
        got = bl.client.gather(
            bl.run(blocks.settle_block, g.restart, g.slot, dst, blocks.Box((glob, busy)))
        )
        moved = max(part["max_move"] for part in got)
        sizes = [part["linked"].size for part in got]
        new = dataclasses.replace(g, slot=dst)
        if sum(sizes) and busy.any():
            start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            inst = np.concatenate([part["inst"] + o for part, o in zip(got, start, strict=True)])
            cat = inst if local else np.concatenate([part["cat"] for part in got])
            p = gp.with_ratings(
                np.concatenate([part["ann"] for part in got]), inst, cat,
                np.concatenate([part["level"] for part in got]), sum(sizes),
                sum(sizes) if local else gp.n_categories,
            )  # fmt: skip
            s = glob.copy()
            s.mu_m = np.concatenate([part["mu_m"] for part in got])
            s.lam_m = np.concatenate([part["lam_m"] for part in got])
            if local:
                s.delta_shape = np.concatenate([part["delta"][0] for part in got])
                s.delta_rate = np.concatenate([part["delta"][1] for part in got])
            t, move = settle_items(p, s, busy, own_delta=local)
            moved = max(moved, float(move.max()))
            back = {}
            for i, (part, o, n) in enumerate(zip(got, start, sizes, strict=True)):
                if n:
                    at = slice(o, o + n)
                    delta = (t.delta_shape[at], t.delta_rate[at]) if local else None
                    back[i] = (part["linked"], t.mu_m[at], t.lam_m[at], delta)
            bl.client.gather(bl.run(blocks.settle_write, g.restart, dst, bl.send(back)))
            new = dataclasses.replace(
                new, tau_shape=t.tau_shape, tau_rate=t.tau_rate, eps=t.eps,
                bias_mean=t.bias_mean, bias_prec=t.bias_prec,
            )  # fmt: skip
        return new, np.array([moved])

    def alternative(self, g: _Global, window: list) -> tuple[_Global, float, int]:
        """``acceleration.alternative`` from the winner ``g``, whose slot the blocks keep meanwhile
        (its items' means are read after, for the ensemble's columns)."""
        self.pinned = (g.slot,)
        try:
            return acceleration.alternative(self, g, window)
        finally:
            self.pinned = ()

    def propose(self, s0: _Global, s1: _Global, s2: _Global, norms: np.ndarray):
        """``acceleration.squarem_proposal`` split: the client's groups here, the blocks' as a
        ``blocks.Proposal``; ``(globals, proposal)`` or None (no usable or valid step)."""
        terms = {
            g: acceleration.group_terms(
                g, *(acceleration.group_value(s, g) for s in (s0, s1, s2)), self.eps_pack
            )
            for g in CLIENT_GROUPS
        }
        r2, v2 = norms[0].tolist(), norms[1].tolist()
        for g, (_, r, v) in terms.items():
            i = acceleration.GROUPS.index(g)
            gr, gv = acceleration.sq_norms(r, v)
            r2[i] += gr
            v2[i] += gv
        a = acceleration.step_length(r2, v2)
        if a is None:
            return None
        out = {}
        for g, t in terms.items():
            x = acceleration.extrapolate(g, *t, a, self.lo, self.hi)
            if x is None:
                return None
            out[g] = x
        alpha, beta = out.pop("ab")
        for name in acceleration.OPTIONAL_GROUPS:
            if getattr(s2, name, None) is None:
                out[name] = None
        glob = _Global(
            None, None, **out, alpha=float(alpha), beta=float(beta), **acceleration.carried(s2),
            restart=s2.restart, w_ann=s2.w_ann,
        )  # fmt: skip
        return glob, blocks.Proposal(s0.slot, s1.slot, s2.slot, a, self.lo, self.hi)

    def sweep_proposal(self, proposal: tuple, spam: bool, states: tuple) -> tuple:
        glob, prop = proposal
        h0, h1, new = states
        keep = (h1.slot, new.slot)  # the candidate's s0 is not needed after it
        cand, fc, _ = self._sweep(
            glob, spam, (h0.slot, h1.slot, new.slot), src=prop, keep_after=keep, ref=h1.slot
        )  # the change is measured from the step's start, h1, as in memory
        return cand, fc

    @staticmethod
    def swept(g: _Global) -> bool:
        return g.swept

    def truth_share(self, g: _Global) -> float:
        return float(g.w_ann.sum()) / max(self.n_ratings, 1)

    @staticmethod
    def estimate_change(before: _Global, after: _Global) -> float:
        """The blocks' maxima of the items' change in the sweep that made ``after``, reduced
        by maximum (measured from ``before``'s slot)."""
        return after.max_dmu


# --------------------------------------------------------------------------- helpers


def _shut_down(client) -> None:
    """Close a client and the cluster it started."""
    cluster = client.cluster
    client.close()
    if cluster is not None:
        cluster.close()


def _items_meta(has_query: bool) -> pd.DataFrame:
    """The empty ``items_`` frame (Dask's meta): ``outputs.items_frame``'s columns."""
    empty = np.zeros(0)
    ids = pd.Index([], dtype=object)
    query = ids.to_numpy() if has_query else None
    return outputs.items_frame(ids, empty, empty, empty.astype(np.int64), query, ids.to_numpy())


def _cats_meta() -> pd.DataFrame:
    """The empty ``categories_`` frame (Dask's meta) with ``outputs.categories_frame``'s
    columns."""
    empty = np.zeros(0)
    return outputs.categories_frame(pd.Index([], dtype=object), empty, empty, np.zeros(0, "i8"))


def _arrays(value) -> list:
    if isinstance(value, blocks.Factors):
        return [*value.ann, *(value.cat or ())]
    return [value]


def _add_arrays(*parts: np.ndarray) -> np.ndarray:
    acc = parts[0].copy()
    for a in parts[1:]:
        acc += a
    return acc


def _tree_reduce(client, futs: list, combine: Callable = blocks.add_sums):
    """Combine the futures' results ``FAN_IN`` at a time on the workers; the result, local."""
    futs = list(futs)
    if not futs:
        raise InputError("no ratings (the input has no rows)")
    if len(futs) <= FAN_IN:  # one level: combining on the client saves a round trip
        return combine(*client.gather(futs))
    while len(futs) > 1:
        futs = [
            client.submit(combine, *futs[i : i + FAN_IN], pure=False)
            for i in range(0, len(futs), FAN_IN)
        ]
    return futs[0].result()


def _short(e: BaseException, n: int = 160) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= n else text[: n - 3] + "..."


def column_mapping(columns: list, label: str) -> dict:
    """Input column -> canonical name, with ``data.normalize_columns``' checks and messages."""
    probe = pd.DataFrame([["1"] * len(columns)], columns=columns)
    normalize_columns(probe, source=label)  # raises the same errors as the in-memory reader
    out = {}
    for c in columns:
        canon = COLUMN_ALIASES.get(str(c).strip().lower())
        if canon is not None:
            out[c] = canon
    return out


def read_source(ratings, blocksize: str | int) -> tuple:
    """``(dask DataFrame, label)`` for a path, a pandas or a Dask DataFrame.

    Paths: a folder is a Parquet dataset; ``.parquet``/``.pq`` a Parquet file; ``.csv``,
    ``.tsv``, ``.tab``, ``.txt`` delimited text read in blocks of ``blocksize`` bytes, every
    column as text.
    """
    import dask.dataframe as dd

    if isinstance(ratings, CrowdData):
        raise InputError(
            "DaskOrdinalMixture takes a ratings table (path, pandas or Dask DataFrame), "
            "not a prepared CrowdData"
        )
    if isinstance(ratings, pd.DataFrame):
        if len(ratings) == 0:
            raise InputError("no ratings (the table has a header but no rows)", source="ratings")
        n = max(1, min(8, len(ratings) // 50_000 + 1))
        return dd.from_pandas(ratings, npartitions=n, sort=False), "ratings"
    if isinstance(ratings, dd.DataFrame):
        return ratings, "ratings"
    if not isinstance(ratings, (str, os.PathLike)):
        raise InputError(
            f"expected a path, a pandas or a Dask DataFrame, got {type(ratings).__name__}"
        )
    label = os.fspath(ratings)
    path = Path(ratings)
    if not path.exists():
        raise InputError("file not found; check the path", source=label)
    ext = path.suffix.lower()
    try:
        if path.is_dir() or ext in PARQUET_EXTENSIONS:
            ddf = dd.read_parquet(str(path))
        elif ext in TEXT_EXTENSIONS:
            if path.stat().st_size == 0:
                raise InputError(
                    "the file is empty (0 bytes); export the ratings again with a header row "
                    "annotator,instance,rating",
                    source=label,
                )
            ddf = dd.read_csv(
                str(path),
                sep=TEXT_EXTENSIONS[ext],
                dtype=str,
                keep_default_na=False,
                na_filter=False,
                blocksize=blocksize,
                encoding="utf-8-sig",
            )
        else:
            raise InputError(
                f"unknown file type {ext or '(no extension)'!r}; the Dask engine reads a "
                f"Parquet folder or file, or {', '.join(TEXT_EXTENSIONS)} text",
                source=label,
            )
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - a reader's error is a bad file
        raise InputError(f"cannot be read ({_short(e)}); check the file", source=label) from e
    return ddf, label


# --------------------------------------------------------------------------- outputs


def write_outputs(model: DaskOrdinalMixture, folder: Path, settings: dict) -> None:
    """The files ``ordmix fit`` writes (``outputs.write_fit_outputs``); when ``items_`` is a
    Dask DataFrame, ``items/part-*.csv`` (and ``categories/part-*.csv``) instead of one file
    each, written by the workers (the output folder must be on a filesystem they share)."""

    def write_parts(table: outputs.Table, frame, where: Path) -> None:
        import dask

        tasks = [
            dask.delayed(_write_part)(part, str(where / f"part-{i:05d}.csv"), table)
            for i, part in enumerate(frame.to_delayed())
        ]
        model._client.compute(tasks, sync=True)

    outputs.write_fit_outputs(model, folder, settings, write_parts=write_parts)


def _write_part(df: pd.DataFrame, path: str, table: outputs.Table) -> None:
    from ..io import write_csv

    write_csv(table.rows(df), path, list(table.id_columns))
