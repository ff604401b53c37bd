"""Worker side of the Dask engine: one block of ratings per partition, kept on its worker.

A block holds every rating of its instances (the ratings are hash-partitioned on
``instance``), so q(z) is local; annotators and (query/global) categories carry global codes
and their sums are reduced across blocks by the client. Blocks live in a per-process registry
(``_REGISTRY``, keyed ``fit_id/index``) rather than in Dask's memory manager, so they are
never spilled or moved; every task on a block is pinned to its worker. The math is
``phases.py``'s functions, the same ones the in-memory sweep runs on its one block.

Each restart keeps its block-local factors (q(z), and q(delta) at instance granularity) in
numbered *slots*, one per state: the client names the slot a sweep starts from and the one it
writes, and which slots to keep (``keep``): the current state and, for SQUAREM, the one before
it, the plain sweep's result and the candidate swept from the proposal. Per rating, only the
q(y) of a restart's last swept states outlives a sweep, for the exact eps step
(``step.make_step``, ``eps_sums``); ``phases.Work`` is rewritten by every phase 1. Rejecting
a candidate is only a matter of which slot the client keeps.

Memory per rating of a block: 16 bytes of codes (annotator, instance, category, level) and
24 bytes of per-sweep buffers (``phases.Work``), and in the mixture with ``accelerate`` 16
bytes of q(y) per running restart (its last sweep's start and result; 24 during a SQUAREM
step; the in-memory engine's states hold 8 to 16) but 8 for the block's last swept one, whose
slot keeps the buffers' own q(y) rather than a copy, and 8 per restart the race dropped (its
state's: ``block_slots.park_block``); per instance its ID (an Arrow string: 8 bytes and its
characters), hash, ratings and their sum (8 bytes each), and per restart 16 bytes (q(z)) per
slot, plus 16 per slot for q(delta) at instance granularity: 2 slots between sweeps, up to 4
during an accelerated sweep (as many states as the in-memory engine holds then). Once the
race is over, the label path's first task (``block_labels.weights_and_evidence``) drops the
buffers and every slot and hands the freed memory back; the label path then keeps per rating
4 bytes of local annotator codes, the label fit's grouping by item (8 bytes on one thread)
until the posterior is made, then 8 of evidence and, for the flags' grid, 8 of the ratings'
order by annotator; per instance K floats of posterior.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..fit import step as squarem
from ..fit.settle import own_ratings, settle_items
from ..results import outputs, stability
from ..vb import kernels, phases
from ..vb.problem import Problem

_REGISTRY: dict[str, Block] = {}


def block(fit_id: str, index: int) -> Block:
    """The fit's block ``index``, on this worker (``block_loading.load_block`` put it there)."""
    return _REGISTRY[f"{fit_id}/{index}"]


# --------------------------------------------------------------------------- blocks


@dataclass
class Local:
    """One state's block-local factors: q(z) (M,) and, at instance granularity, q(delta)."""

    mu_m: np.ndarray
    lam_m: np.ndarray
    delta_shape: np.ndarray | None = None
    delta_rate: np.ndarray | None = None
    w_cat: np.ndarray | None = None  # (M,) phase 1's sum omega, until phase 3 (local cats)
    omega: np.ndarray | None = None  # (L,) the sweep's q(y), for the exact eps step


@dataclass
class Block:
    """One partition of ratings on its worker (see the module docstring)."""

    ann_ids: np.ndarray  # (N_b,) object: this block's annotators, sorted
    ann_local: np.ndarray | None  # (L,) int32 codes into ann_ids (loading; then the label path's)
    inst_ids: Any  # (M,) Arrow strings: this block's instances, sorted (``instance_ids``)
    inst: np.ndarray  # (L,) int32
    rating_vals: np.ndarray  # (V,) distinct rating values of the block
    rating_code: np.ndarray  # (L,) int32 codes into rating_vals
    query_of_inst: np.ndarray | None  # (M,) object
    problem: Problem | None = None
    local_categories: bool = False
    cat_name_of_inst: np.ndarray | None = None  # (M,) object: each instance's category (None:
    # at instance granularity, its own ID)
    inst_hash: np.ndarray | None = None
    sum_m: np.ndarray | None = None
    n_m: np.ndarray | None = None
    n_threads: int = 1
    states: dict[int, dict[int, Local]] = field(default_factory=dict)  # restart -> slots
    work: phases.Work | None = None
    # the label path's (``block_labels``): the block's annotators' global codes (n_b,) and
    # each rating's local code into them, its items' gold levels (-1: none), the label fit,
    # the one posterior, each rating's evidence, each item's truth weight and its ratings at
    # each level (the agreement's)
    ann_codes: np.ndarray | None = None
    gold_levels: np.ndarray | None = None
    labels: Any = None
    posterior: Any = None
    log_r: np.ndarray | None = None
    truth_weight: np.ndarray | None = None
    item_levels: np.ndarray | None = None
    grid_order: np.ndarray | None = None  # (L,) its ratings by annotator (the flags' grid)

    def instance_ids(self) -> np.ndarray:
        """(M,) object: the block's instances' IDs, made from the Arrow strings it keeps (16
        bytes an ID where Python's strings take 60) for the call that needs them."""
        return np.asarray(self.inst_ids, dtype=object)

    @property
    def groups(self) -> tuple[str, ...]:
        """The SQUAREM parameter groups (``step.GROUPS``) this block holds."""
        if self.local_categories:
            return squarem.INSTANCE_GROUPS + squarem.CATEGORY_GROUPS
        return squarem.INSTANCE_GROUPS


def _threads(b: Block) -> int:
    """Sets the block's numba threads; returns its chunks (``phases.chunks_of``: the block's
    sizes only, so its sums do not depend on the worker's threads)."""
    if kernels.HAVE_NUMBA:
        kernels.numba.set_num_threads(min(b.n_threads, kernels.numba.config.NUMBA_NUM_THREADS))
    return phases.chunks_of(b.problem)


@dataclass
class Factors:
    """Broadcast to phase 1: ``phases.annotator_factors`` (N,) x5, for global categories
    ``phases.category_factors`` (C,) x3, and ``phases.spam_table`` (E log pi, flat)."""

    ann: tuple[np.ndarray, ...]
    cat: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    log_pi_t: np.ndarray | None = None


def _slots(b: Block, restart: int, keep) -> dict[int, Local]:
    """The restart's slots, without those the client no longer names in ``keep``."""
    slots = b.states[restart]
    for k in [k for k in slots if k not in keep]:
        del slots[k]
    return slots


def drop_q_y(slots: dict[int, Local], keep: tuple[int, ...]) -> None:
    """The q(y) of the ``slots`` not in ``keep`` freed (their q(z) stays)."""
    for k, loc in slots.items():
        if k not in keep:
            loc.omega = None


@dataclass
class Proposal:
    """A SQUAREM start: slots of ``s0, s1, s2``, the step length ``a`` and where mu_m is
    clipped (``lo``, ``hi``: the outer thresholds)."""

    s0: int
    s1: int
    s2: int
    a: float
    lo: float
    hi: float


def _proposal(b: Block, slots: dict[int, Local], prop: Proposal) -> Local | None:
    """The block's share of ``step.squarem_proposal``, or None if it is not valid here."""
    states = slots[prop.s0], slots[prop.s1], slots[prop.s2]
    out = {}
    for g in b.groups:
        terms = squarem.group_terms(g, *(getattr(s, g) for s in states))
        x = squarem.extrapolate(g, *terms, prop.a, prop.lo, prop.hi)
        if x is None:
            return None
        out[g] = x
    return Local(**out)


def sq_norms(b: Block, s0: Local, s1: Local, s2: Local) -> np.ndarray:
    """The block's share of SQUAREM's squared norms: ``(2, len(step.GROUPS))``, rows |r|^2
    and |v|^2, zero for the groups the client holds."""
    out = np.zeros((2, len(squarem.GROUPS)))
    for g in b.groups:
        _, r, v = squarem.group_terms(g, getattr(s0, g), getattr(s1, g), getattr(s2, g))
        out[:, squarem.GROUPS.index(g)] = squarem.sq_norms(r, v)
    return out


def phase_xy_tau(
    fit_id: str,
    index: int,
    restart: int,
    spam: object,
    fac: Factors,
    src: int | Proposal,
    dst: int,
    keep: tuple[int, ...],
    ref: int | None = None,
    keep_omega: bool = False,
    keep_q_y: tuple[int, ...] = (),
) -> dict:
    """Phases 1 and 2 on the block (q(z) is local, so no reduction is needed between them).

    Sweeps from slot ``src`` (or from the SQUAREM proposal ``src``) into slot ``dst``, after
    dropping the restart's slots not in ``keep``. Returns ``w_ann`` (N,), ``r_ann`` (N,) (sum
    omega E[delta] S), ``w_cat`` (C,) for global categories, ``f`` (the block's bound terms
    so far) and ``bad`` (1.0 when the proposal is not valid on this block: nothing swept);
    with the bias ``bias_sums`` (N, 2), with a learned spam distribution ``spam_cells`` (the
    spam weight per cell; ``phases.phase_tau`` / ``phase_xy``). ``spam``: the step's key
    (``Problem.at``). ``keep_omega``: the new slot keeps the sweep's q(y) (``eps_sums``); a
    sweep from a slot (not from a proposal) drops that of the restart's slots other than its
    start, which a step always makes from the current state: the start stays current if this
    sweep is refused (a flip, or the exact eps step's fallback), else the new slot is; the
    slots ``keep_q_y`` keep theirs (the winner's while the alternative sweeps: truth weight).
    """
    b = block(fit_id, index)
    p = b.problem.at(spam)
    slots = _slots(b, restart, keep)
    start = _proposal(b, slots, src) if isinstance(src, Proposal) else slots[src]
    if start is None:
        n = p.n_annotators
        w_cat = None if b.local_categories else np.zeros(p.n_categories)
        return {
            "w_ann": np.zeros(n), "r_ann": np.zeros(n), "w_cat": w_cat, "f": 0.0, "bad": 1.0,
            "max_dmu": 0.0, **_extension_sums(p, None, None),
        }  # fmt: skip
    t = _threads(b)
    work = _work(b, p.n_ratings)
    cat_f = fac.cat
    if b.local_categories:
        cat_f = phases.category_factors(p, start.delta_shape, start.delta_rate)
    xy = phases.phase_xy(p, start.mu_m, start.lam_m, fac.ann, cat_f, work, t, fac.log_pi_t)
    r_ann, bias_sums = phases.phase_tau(p, work, xy.mu_m, xy.lam_m, cat_f[0], t)
    before = slots[src if ref is None else ref].mu_m
    dmu = float(np.abs(xy.mu_m - before).max()) if before.size else 0.0
    slots[dst] = Local(xy.mu_m, xy.lam_m, w_cat=xy.w_cat if b.local_categories else None)
    if keep_omega:
        if not isinstance(src, Proposal):  # a step starts from the current state, src
            drop_q_y(slots, (src, *keep_q_y))
        slots[dst].omega = work.omega  # the buffer itself: the next sweep writes a new one
    return {
        "max_dmu": dmu,
        "w_ann": xy.w_ann,
        "r_ann": r_ann,
        "w_cat": None if b.local_categories else xy.w_cat,
        "f": phases.block_terms(p, xy),
        "bad": 0.0,
        **_extension_sums(p, bias_sums, xy.spam_cells),
    }


def _work(b: Block, n: int) -> phases.Work:
    """The block's per-sweep buffers for a phase 1 over its ``n`` ratings; their q(y) a new
    array when a slot keeps the last one (``phase_xy_tau``'s ``keep_omega``), which phase 1
    would otherwise write over."""
    if b.work is None:
        b.work = phases.Work.empty(n)
    elif any(loc.omega is b.work.omega for slots in b.states.values() for loc in slots.values()):
        b.work.omega = np.empty(n)
    return b.work


def eps_sums(fit_id: str, index: int, restart: int, slot: int, box: Box) -> dict:
    """The block's share of ``updates.eps_block_sums`` for the restart's state in ``slot``
    (its q(y), kept by ``phase_xy_tau``), with ``box`` = ``(x, eps_used)`` (N,) each:
    ``{"g": (N,), "h": (N,)}``."""
    b = block(fit_id, index)
    p = b.problem
    x, eps_used = box.value
    omega = b.states[restart][slot].omega
    if omega is None:  # an engine bug, not a user's mistake: the client's state lost its q(y)
        raise RuntimeError(f"block {index}: restart {restart}'s slot {slot} keeps no q(y)")
    g, h = kernels.eps_block_sums(p.ann, omega, eps_used, x)
    return {"g": g, "h": h}


def settle_block(fit_id: str, index: int, restart: int, src: int, dst: int, box: Box) -> dict:
    """The block's share of ``settle.settle_items`` for the restart's state in slot ``src``,
    written to slot ``dst``; ``box`` = ``(glob, busy)``: the client's global factors (a
    ``State`` without the per-instance part) and the annotators whose blocks are solved
    ((N,) bool).

    A block sees all of its items' ratings but only part of an annotator's, so it solves the
    blocks of its items that no busy annotator rated (the others held) and hands the client
    the rest: ``linked`` (local codes of the items a busy annotator rated), their ratings
    (``ann``, ``inst`` as an index into ``linked``, ``cat`` global or, at instance
    granularity, as ``inst``, ``level``) and their q(z) (and local q(delta)), for the client
    to solve with the busy annotators (``_Sweeps.settle_items``). ``max_move``: the largest
    move of the block's own items, ``top``: which (a local code; -1 without items). The new
    slot keeps ``src``'s q(y) (the next sweep's exact eps step reads it, as in memory, where
    the settled state keeps the old omega)."""
    b = block(fit_id, index)
    p = replace(b.problem)  # its per-rating views (``Problem.lo``, ...) live for this call only
    glob, busy = box.value
    loc = b.states[restart][src]
    state = replace(glob, mu_m=loc.mu_m, lam_m=loc.lam_m)  # glob is shared by the blocks
    if b.local_categories:
        state.delta_shape, state.delta_rate = loc.delta_shape, loc.delta_rate
    linked = np.zeros(p.n_instances, dtype=bool)
    linked[p.inst[busy[p.ann]]] = True
    new, moved = settle_items(p, state, None, hold=linked, own_delta=b.local_categories)
    out = Local(new.mu_m, new.lam_m, omega=loc.omega)
    if b.local_categories:
        out.delta_shape, out.delta_rate = new.delta_shape, new.delta_rate
    b.states[restart][dst] = out
    codes = np.flatnonzero(linked)
    rows = np.flatnonzero(linked[p.inst])
    inst = np.searchsorted(codes, p.inst[rows]).astype(np.int32)
    local = b.local_categories
    return {
        "max_move": float(moved.max()) if moved.size else 0.0,
        "top": int(np.argmax(moved)) if moved.size else -1,
        "linked": codes,
        "ann": p.ann[rows], "inst": inst, "cat": inst if local else p.cat_l[rows],
        "level": p.level[rows], "mu_m": loc.mu_m[codes], "lam_m": loc.lam_m[codes],
        "delta": (loc.delta_shape[codes], loc.delta_rate[codes]) if local else None,
        "gold": None if p.gold is None else p.gold[codes],
    }  # fmt: skip


def item_raters(fit_id: str, index: int, code: int) -> np.ndarray:
    """(N,) bool: the annotators who rated the block's item ``code`` (a local code; the block
    holds all of an item's ratings)."""
    return block(fit_id, index).problem.raters(code)


def settle_write(fit_id: str, index: int, restart: int, dst: int, box: Box) -> None:
    """Writes into slot ``dst`` the client's solution of this block's ``linked`` items
    (``box`` = {block index: ``(linked, mu_m, lam_m, delta or None)``})."""
    b = block(fit_id, index)
    got = box.value.get(index)
    if got is None:
        return
    codes, mu_m, lam_m, delta = got
    loc = b.states[restart][dst]
    loc.mu_m[codes], loc.lam_m[codes] = mu_m, lam_m
    if delta is not None:
        loc.delta_shape[codes], loc.delta_rate[codes] = delta


def _extension_sums(p: Problem, bias_sums, spam_cells) -> dict:
    """The bias and spam-cell sums of a block (zeros where the block swept nothing), or None
    when the model has no such part (``add_sums`` passes None through)."""
    rows = p.n_annotators if p.spam_dist == "annotator" else 1
    learn = p.spam and p.spam_dist != "uniform"
    if p.bias and bias_sums is None:
        bias_sums = np.zeros((p.n_annotators, 2))
    if learn and spam_cells is None:
        spam_cells = np.zeros((rows, p.n_levels))
    return {
        "bias_sums": bias_sums if p.bias else None,
        "spam_cells": spam_cells if learn else None,
    }


@dataclass
class Box:
    """One broadcast value (``client.scatter`` would split a bare tuple)."""

    value: object


def phase_delta(
    fit_id: str,
    index: int,
    restart: int,
    e_tau: Box,
    dst: int,
    keep: tuple[int, ...],
    norms: tuple[int, int] | None = None,
) -> dict:
    """Phase 3 of the sweep into slot ``dst`` with ``e_tau``: the new E[tau] (N,), with the
    bias the new q(b), and the exact eps step's first Newton point or None (``(e_tau,
    bias_mean, bias_prec, (x, eps_used))``): ``d_cat`` (C,) for global categories; at
    instance granularity q(delta) is updated here and ``f`` carries its bound terms. With a
    Newton point, ``eps_g``, ``eps_h``: ``eps_sums``' at ``x`` on the sweep's q(y) (kept in
    ``dst``), so that the step's first round needs no round trip. ``norms``: slots of ``s0,
    s1`` (``dst`` is ``s2``); then ``norms`` in the result is the block's share of SQUAREM's
    squared norms (``sq_norms``). Slots not in ``keep`` are dropped (after the norms)."""
    b = block(fit_id, index)
    p = b.problem
    slots = b.states[restart]
    loc = slots[dst]
    e_t, bias_mean, bias_prec, newton = e_tau.value
    d_cat = phases.phase_delta(p, b.work, e_t, _threads(b), bias_mean, bias_prec)
    out = {"d_cat": d_cat, "f": 0.0, "eps_g": None, "eps_h": None}
    if newton is not None:
        x, eps_used = newton
        out["eps_g"], out["eps_h"] = kernels.eps_block_sums(p.ann, loc.omega, eps_used, x)
    if b.local_categories:
        loc.delta_shape, loc.delta_rate = phases.update_delta(p, loc.w_cat, d_cat)
        f = phases.category_terms(p, loc.w_cat, d_cat, loc.delta_shape, loc.delta_rate)
        loc.w_cat = None
        out.update(d_cat=None, f=f)
    if norms is not None:
        out["norms"] = sq_norms(b, slots[norms[0]], slots[norms[1]], loc)
    _slots(b, restart, keep)
    return out


def add_sums(*parts: dict) -> dict:
    """Key-wise sum of block results, in the order given (a step of the tree reduction);
    keys starting ``max_`` are reduced by maximum."""
    out = {}
    for k in parts[0]:
        vals = [p[k] for p in parts]
        if vals[0] is None:
            out[k] = None
        elif isinstance(vals[0], np.ndarray):
            acc = vals[0].copy()
            for v in vals[1:]:
                acc += v
            out[k] = acc
        elif k.startswith("max_"):
            out[k] = float(max(vals))
        else:
            out[k] = float(sum(vals))
    return out


def block_results(
    fit_id: str, index: int, restart: int, slot: int, gold: bool = False, glob: Box | None = None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``items`` rows of the block (indexed by instance) and, at instance granularity, its
    ``categories`` rows, from the restart's ``slot``; the same columns as
    ``OrdinalMixture.items_`` / ``categories_``. ``gold``: the fit has gold items (a ``gold``
    column); ``glob`` (the client's global factors, a ``State`` without the per-instance
    part) gives their own reading (``settle.own_ratings``: ``crowd_estimate``; None: the fit
    was stopped, no such column)."""
    b = block(fit_id, index)
    p = b.problem
    loc = b.states[restart][slot]
    ids = pd.Index(b.instance_ids(), dtype=object)
    cat_names = ids.to_numpy() if b.cat_name_of_inst is None else b.cat_name_of_inst
    mask = crowd = None
    if gold:
        mask = np.zeros(p.n_instances, bool) if p.gold_mask is None else p.gold_mask
        crowd = loc.mu_m if glob is None or p.gold_mask is None else None
        if crowd is None:
            state = replace(glob.value, mu_m=loc.mu_m, lam_m=loc.lam_m)
            if b.local_categories:
                state.delta_shape, state.delta_rate = loc.delta_shape, loc.delta_rate
            crowd = own_ratings(replace(p), state)
        crowd = None if glob is None else crowd
    items = outputs.items_frame(
        ids, loc.mu_m, loc.lam_m, b.n_m, b.query_of_inst, cat_names, mask, crowd
    )
    cats = None
    if b.local_categories:
        cats = outputs.categories_frame(ids, loc.delta_shape, loc.delta_rate, b.n_m)
    return items, cats


def block_means(fit_id: str, index: int, restart: int, slot: int) -> pd.Series:
    """The block's items' posterior means (indexed by instance) in the restart's ``slot``: a
    near-tied restart's estimates, for the ensemble's item columns
    (``stability.item_stability``)."""
    b = block(fit_id, index)
    return pd.Series(b.states[restart][slot].mu_m, index=pd.Index(b.instance_ids(), dtype=object))


def block_stability(
    fit_id: str, index: int, items: pd.DataFrame, members: list, values: np.ndarray, step: float
) -> pd.DataFrame:
    """The block's ``items`` with the ensemble's columns (``stability.item_stability``) of its
    items' means in the ``members``' ``(restart, slot)`` (the winner first)."""
    b = block(fit_id, index)
    mu = np.stack([b.states[r][slot].mu_m for r, slot in members])
    it = stability.item_stability(mu, values, step)
    return items.assign(
        estimate_spread=it["estimate_spread"].to_numpy(), unstable=it["unstable"].to_numpy()
    )


def release(fit_id: str) -> int:
    """Drop this worker's blocks of ``fit_id`` (run on every worker at the end of a fit)."""
    keys = [k for k in _REGISTRY if k.startswith(f"{fit_id}/")]
    for k in keys:
        del _REGISTRY[k]
    return len(keys)
