"""A restart's slots on a block (``blocks``): its starts (from the data, a previous fit, the
shared warm-up), in the slot the client names, and what is kept of a restart the race
dropped. Run on the block's worker, as every task on a block is."""

from __future__ import annotations

from ..data.scale import Scale
from ..estimators import refit
from ..fit import restarts
from ..vb import updates
from .blocks import Box, Local, _slots, block, drop_q_y


def init_block(fit_id: str, index: int, restart: int, key: int, step: float) -> None:
    """The restart's start of the block's q(z) (and q(delta) when categories are local), in
    slot 0."""
    b = block(fit_id, index)
    p = b.problem
    mu_m, lam_m = restarts.init_instances(
        b.sum_m, b.n_m, b.inst_hash, key, restart, p.mu, p.lam, Scale(p.values).thresholds, step
    )  # the scale's own thresholds, as in memory (a fine scale's fit has open ends)
    loc = Local(updates.apply_gold(mu_m, p.gold), lam_m)
    if b.local_categories:
        loc.delta_shape, loc.delta_rate = restarts.init_categories(b.n_m, p.phi, p.eta)
    b.states[restart] = {0: loc}


def warm_block(fit_id: str, index: int, n_starts: int, box: Box) -> None:
    """A refit's starts (``refit.refit_starts``) of the block's items, in slot 0 of restarts
    0..n_starts-1 from the restarts' usual starts there (``init_block``): restart 0's with
    the previous q(z) of the items rated before (and q(delta) at instance granularity, when
    the previous fit's was; ``box``: ``(previous, categories too)``, a ``refit.Previous``),
    restart r's with restart r - 1's usual q(z); the restarts past them dropped."""
    b = block(fit_id, index)
    prev, categories = box.value
    fresh = {r: slots[0] for r, slots in b.states.items()}
    warm = Local(fresh[0].mu_m.copy(), fresh[0].lam_m.copy())
    ids = b.instance_ids()
    refit.warm_items(prev, ids, warm.mu_m, warm.lam_m)
    if b.local_categories:
        warm.delta_shape, warm.delta_rate = fresh[0].delta_shape.copy(), fresh[0].delta_rate.copy()
        if categories:
            refit.warm_categories(prev, ids, warm.delta_shape, warm.delta_rate)
    b.states = {0: {0: warm}}
    for r in range(1, n_starts):
        z = fresh[r - 1]
        loc = Local(z.mu_m.copy(), z.lam_m.copy())
        if b.local_categories:
            loc.delta_shape, loc.delta_rate = warm.delta_shape.copy(), warm.delta_rate.copy()
        b.states[r] = {0: loc}


def branch_block(
    fit_id: str, index: int, source: int, src: int, restart: int, dst: int, key: int, step: float
) -> None:
    """The restart's start from the shared warm-up, in its slot ``dst``: the
    warm-up restart ``source``'s slot ``src`` with the restart's own noise on q(z)'s means
    (``restarts.branch_instances``, as the in-memory engine adds it)."""
    b = block(fit_id, index)
    warm = b.states[source][src]
    bounds = Scale(b.problem.values).thresholds  # as ``init_block``'s
    mu = restarts.branch_instances(warm.mu_m, b.inst_hash, key, bounds, step)
    loc = Local(updates.apply_gold(mu, b.problem.gold), warm.lam_m.copy())
    if b.local_categories:
        loc.delta_shape, loc.delta_rate = warm.delta_shape.copy(), warm.delta_rate.copy()
    b.states[restart] = {dst: loc}


def park_block(
    fit_id: str, index: int, restart: int, keep: tuple[int, ...], keep_q_y: tuple[int, ...]
) -> None:
    """A restart the race dropped (``client._Sweeps.park``): its slots not in ``keep`` go,
    and the q(y) of the kept ones not in ``keep_q_y``."""
    drop_q_y(_slots(block(fit_id, index), restart, keep), keep_q_y)
