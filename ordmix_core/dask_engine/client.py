"""The Dask client's side of a sweep: the engine's sweeps over the blocks (``_Sweeps``: the
same methods as the in-memory engine's, so ``fit.step`` and ``fit.race`` run them alike; the
tasks on the blocks are ``block_tasks.Blocks``'s); the state the client holds, ``_Global``, is
``State`` without its per-instance part."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..fit import race, rescues, restarts, step
from ..fit.policy import DEFAULT
from ..fit.settle import settle_items
from ..vb import phases, updates
from ..vb.problem import Problem, State
from . import block_slots, blocks
from .block_tasks import Blocks


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
    # the exact eps step's first Newton sums, taken by the sweep that made this state (its
    # second round): ``(restart, slot, eps_used, x, g, h)``, used once by ``eps_block``
    eps_first: tuple | None = None
    # a settled state's: the slot it was settled from, which the blocks keep through this
    # state's next sweep (a window's settle not taken goes back to it: ``rescues``)
    source: int | None = None


#: the SQUAREM groups the client holds (the blocks hold the per-instance ones)
CLIENT_GROUPS = tuple(g for g in step.GROUPS if g not in step.INSTANCE_GROUPS)


class _Sweeps:
    """The Dask engine's sweeps for ``step.make_step`` (see the module docstring, 3 and 5):
    each sweep is two rounds over the blocks, the client updating the global factors between
    and after them; a state's per-instance factors stay on the blocks in numbered slots."""

    def __init__(
        self,
        bl: Blocks,
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
        self.tops: dict[int, tuple] = {}  # each restart's last settle's top item (``settle_top``)
        self.exact_eps = accelerate  # the exact eps step (``OrdinalMixture._exact_eps``)
        # every state with spam keeps its sweep's q(y): the winner's truth weight reads it (and
        # with the continuous posterior's labels, its flags' evidence)
        self.keep_q_y = False
        self.lo, self.hi = float(gp.thresholds[0]), float(gp.thresholds[-1])

    def branch_fn(self, ann_hash: np.ndarray, sc) -> race.BranchFn:
        """``branch`` of the shared warm-up (``race.race``): the blocks copy the warm-up's
        slot with the restart's noise on q(z)'s means (``block_slots.branch_block``), the client
        its globals with the noise on q(tau) (``restarts.branch_annotators``), as in memory."""

        def branch(source: _Global, run: restarts.RestartRun) -> _Global:
            slot = self.next_slot[run.restart]
            self.next_slot[run.restart] += 1
            from distributed import wait

            wait(
                self.bl.run(
                    block_slots.branch_block, source.restart, source.slot, run.restart, slot,
                    run.key, sc.step,
                )
            )  # fmt: skip
            g = dataclasses.replace(source, restart=run.restart, slot=slot)
            for name, value in vars(g).items():  # no array shared with the warm-up's state
                if isinstance(value, np.ndarray):
                    setattr(g, name, value.copy())
            g.tau_rate = restarts.branch_annotators(source.tau_rate, ann_hash, run.key)
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
        keep_q_y: tuple = (),
    ) -> tuple[_Global | None, float, np.ndarray | None]:
        """One sweep of ``g``'s restart from ``g`` (or from the proposal ``src``, whose
        global factors ``g`` then holds) into a new slot; ``(new, F, norms)``, ``new`` None
        when the proposal is not valid on some block. ``keep``: slots the blocks keep
        (besides the new one); ``keep_after``: those still kept after phase 3; ``ref``: the
        slot the items' change is measured from (default ``g``'s); ``keep_q_y``: kept slots
        that keep their q(y) too (a settled state's source, which a rescue may go back to)."""
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
                g.slot if src is None else src, dst, keep, ref,
                self._keeps_q_y(spam), self.pinned + keep_q_y,
            )
        )  # fmt: skip
        if s1["bad"] > 0:
            return None, -np.inf, None
        r_ann = s1["r_ann"]
        bias_mean, bias_prec, lam_b = g.bias_mean, g.bias_prec, g.lam_b
        if p.bias:
            bias_mean, bias_prec, r_ann = phases.bias_step(r_ann, s1["bias_sums"], ann_f[0], lam_b)
        tau_shape, tau_rate = phases.update_tau(s1["w_ann"], r_ann, g.alpha, g.beta)
        eps, alpha, beta, f_ann = phases.annotator_step(p, s1["w_ann"], tau_shape, tau_rate, g.eps)
        after = (*(keep if keep_after is None else keep_after), dst)
        x0 = newton = None  # the exact eps step's start from this state (``eps_block``)
        if self.exact_eps and spam is True:
            x0 = updates.eps_block_start(eps)
            newton = (x0, g.eps)
        sent = bl.send((tau_shape / tau_rate, bias_mean, bias_prec, newton))
        s3 = bl.reduce(bl.run(blocks.phase_delta, g.restart, sent, dst, after, norms))
        f = s1["f"] + s3["f"]
        delta_shape, delta_rate = g.delta_shape, g.delta_rate
        if not local_cats:
            delta_shape, delta_rate = phases.update_delta(p, s1["w_cat"], s3["d_cat"])
            f += phases.category_terms(p, s1["w_cat"], s3["d_cat"], delta_shape, delta_rate)
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
            eps_first=None if x0 is None else (g.restart, dst, g.eps, x0, s3["eps_g"], s3["eps_h"]),
        )  # fmt: skip
        return new, float(f_ann + f), s3.get("norms")

    def _keeps_q_y(self, spam: object) -> bool:
        """Whether a sweep of stage ``spam`` leaves its q(y) in the new slot: the mixture's
        for the exact eps step, and with ``keep_q_y`` every stage with spam (the uniform
        stage's too: a fit stopped there has its winner's truth weight read from it, as in
        memory)."""
        return (self.exact_eps and spam is True) or (self.keep_q_y and spam is not False)

    def sweep(self, g: _Global, spam: bool, history: tuple | None) -> tuple:
        if history is not None:  # keep s0, s1 (= g) for the proposal and take their norms
            h0, h1 = history
            return self._sweep(g, spam, (h0.slot, h1.slot, g.slot), norms=(h0.slot, h1.slot))
        # the blocks keep g only while a later step may extrapolate from it
        source = () if g.source is None else (g.source,)
        pin = self.pinned + source
        return self._sweep(
            g, spam, (g.slot, *pin), keep_after=(g.slot,) * self.accelerate + pin,
            keep_q_y=source,
        )  # fmt: skip

    def park(self, run: restarts.RestartRun) -> None:
        """A restart the race dropped: the blocks keep its state's slot and q(y) (it may still
        win or be revived), its history's slots without q(y) (as in memory, ``for_history``)."""
        from distributed import wait

        g = run.state
        with_q_y = (g.slot, *(() if g.source is None else (g.source,)), *self.pinned)
        history = () if run.history is None else tuple(h.slot for h in run.history)
        wait(self.bl.run(block_slots.park_block, g.restart, (*with_q_y, *history), with_q_y))

    def eps_block(self, g: _Global) -> _Global:
        """``g`` with each annotator's eps at the exact optimum of its block
        (``updates.eps_block``): each Newton step one round over the blocks
        (``blocks.eps_sums`` on the q(y) ``g``'s slot kept, computed with ``g.omega_eps``),
        but the first, whose sums the sweep that made ``g`` took in its second round
        (``eps_first``; used once)."""
        bl = self.bl
        first, g.eps_first = g.eps_first, None
        if first is not None and (
            first[:2] != (g.restart, g.slot) or not np.array_equal(first[2], g.omega_eps)
        ):  # another state's, or q(y) computed with another eps
            first = None

        def sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            nonlocal first
            if first is not None:
                x0, g0, h0 = first[3:]
                first = None
                if np.array_equal(x, x0):
                    return g0, h0
            sent = bl.send((x, g.omega_eps))
            s = bl.reduce(bl.run(blocks.eps_sums, g.restart, g.slot, sent))
            return s["g"], s["h"]

        eps = updates.eps_block_solve(sums, np.asarray(g.eps, dtype=float), self.gp.n_per_ann > 0)
        return dataclasses.replace(g, eps=eps)

    def eps_slopes(self, g: _Global) -> np.ndarray | None:
        """(N,) the slope of each annotator's eps block at ``g``'s eps, as in memory: the
        exact eps step's first Newton sums' g, which the sweep that made ``g`` took
        (``eps_first``, not used up here); None without them."""
        first = g.eps_first
        if first is None or first[:2] != (g.restart, g.slot):
            return None
        x = updates.eps_block_start(g.eps)
        if not (np.array_equal(first[2], g.omega_eps) and np.array_equal(first[3], x)):
            return None
        return first[4]

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
        tops = [((i, part["top"]), part["max_move"]) for i, part in enumerate(got)]
        sizes = [part["linked"].size for part in got]
        new = dataclasses.replace(g, slot=dst, source=g.slot)
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
            j = int(np.argmax(move))  # the linked items' top, as its block's local code
            i = int(np.searchsorted(start, j, side="right")) - 1
            tops.append(((i, int(got[i]["linked"][j - start[i]])), float(move[j])))
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
        self.tops[g.restart] = max(tops, key=lambda top: top[1])
        return new, np.array([moved])

    def settle_top(self, restart: int) -> tuple[tuple[int, int], float] | None:
        """The item the restart's last settle moved most, ``((block, local code), move)``: its
        ``settle_items`` returns the largest move only (``rescues._escaping_item``)."""
        return self.tops.get(restart)

    def raters(self, item: tuple[int, int]) -> np.ndarray:
        """(N,) bool: the annotators who rated ``item`` (``(block, local code)``), from its
        block (``blocks.item_raters``)."""
        block, code = item
        return self.bl.run_one(block, blocks.item_raters, code)

    def alternative(self, g: _Global, window: list) -> tuple[_Global, float, int]:
        """``rescues.alternative`` from the winner ``g``, whose slot the blocks keep meanwhile
        (its items' means are read after, for the ensemble's columns)."""
        self.pinned = (g.slot,)
        try:
            return rescues.alternative(self, g, window)
        finally:
            self.pinned = ()

    def propose(self, s0: _Global, s1: _Global, s2: _Global, norms: np.ndarray):
        """``step.squarem_proposal`` split: the client's groups here, the blocks' as a
        ``blocks.Proposal``; ``(globals, proposal)`` or None (no usable or valid step)."""
        terms = {
            g: step.group_terms(
                g, *(step.group_value(s, g) for s in (s0, s1, s2)), DEFAULT.eps_pack
            )
            for g in CLIENT_GROUPS
        }
        r2, v2 = norms[0].tolist(), norms[1].tolist()
        for g, (_, r, v) in terms.items():
            i = step.GROUPS.index(g)
            gr, gv = step.sq_norms(r, v)
            r2[i] += gr
            v2[i] += gv
        a = step.step_length(r2, v2, DEFAULT.max_step)
        if a is None:
            return None
        out = {}
        for g, t in terms.items():
            x = step.extrapolate(g, *t, a, self.lo, self.hi)
            if x is None:
                return None
            out[g] = x
        alpha, beta = out.pop("ab")
        for name in step.OPTIONAL_GROUPS:
            if getattr(s2, name, None) is None:
                out[name] = None
        glob = _Global(
            None, None, **out, alpha=float(alpha), beta=float(beta), **step.carried(s2),
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
