"""Each item's own block solved with the annotators held: coordinate ascent on q(z_m), q(delta)
(at instance granularity) and its ratings' q(x), q(y) until every item has settled.

Why (issue 15; ``docs/benchmarks.md``): an item can sit at a slow point of its own. On the
Web set at seed 2 an item rated 4, 3, 4, 1, 5, 5 stopped at 3.75 with the 1 called spam; a
100x tighter fit took 137 more sweeps to let the 1 in (3.41), its difficulty and mean moving
together a little each sweep. With every annotator factor held, the item's block is a handful
of numbers, and its own coordinate ascent makes the same move in a few hundred cheap rounds
over its few ratings. Each round is the sweep's own updates in the sweep's order (q(x), q(y);
q(z); q(delta)), so the bound never falls.

The rounds run on whole arrays over the ratings of the items still moving: an item leaves
once its change per round is below ``FLOOR`` or, shrinking, its remaining change (Aitken, as
``restarts.remaining_changes``) is below ``DROP``; the first round covers every rating, the
rest only the few items at such a point.
"""

from __future__ import annotations

import numpy as np

from . import updates
from .problem import Problem, State
from .tn import tn_stats

__all__ = ["DROP", "FLOOR", "MAX_ROUNDS", "settle_items"]

#: rounds at most (Web seed 2's item took 421)
MAX_ROUNDS = 2000
#: an item leaves the rounds when, shrinking, its remaining change is below this
DROP = 1e-4
#: or when its change in a round is below this (at its fixed point, up to rounding)
FLOOR = 1e-9


def settle_items(
    p: Problem,
    s: State,
    max_rounds: int = MAX_ROUNDS,
    drop: float = DROP,
    floor: float = FLOOR,
) -> tuple[State, np.ndarray]:
    """``s`` with every item's block solved, annotators and hyperparameters held; the new
    state (its ``omega`` is the one of ``s``: the next sweep recomputes q(y)) and how far
    each item's mean moved, ``(M,)``.

    Updates ``mu_m``, ``lam_m`` and, when each category is one instance (instance
    granularity), ``delta_shape`` and ``delta_rate`` of the items that are not gold. At
    query granularity a category's difficulty spans many items and is held too.
    """
    s = s.copy()
    e_tau, e_logtau = updates.gamma_moments(s.tau_shape, s.tau_rate)
    log_eps, log1m_eps = np.log(s.eps), np.log1p(-s.eps)
    per_ann = p.spam_dist == "annotator"
    table = updates.spam_log_table(p.spam_dist, p.log_pi, s.pi, s.dir_a).ravel() if p.spam else None
    own_delta = p.n_categories == p.n_instances and np.array_equal(p.cat_l, p.inst)
    active = np.ones(p.n_instances, dtype=bool)
    if p.gold_mask is not None:
        active &= ~p.gold_mask
    start = s.mu_m.copy()
    prev = np.zeros(p.n_instances)
    rows = np.flatnonzero(active[p.inst])
    for r in range(max_rounds):
        if rows.size == 0:
            break
        ann, inst, cat, level = p.ann[rows], p.inst[rows], p.cat_l[rows], p.level[rows]
        e_delta, e_logdelta = updates.gamma_moments(s.delta_shape[cat], s.delta_rate[cat])
        rho = e_tau[ann] * e_delta
        if p.bias:
            b, inv_bp = s.bias_mean[ann], 1.0 / s.bias_prec[ann]
        else:
            b, inv_bp = 0.0, 0.0
        centre = s.mu_m[inst] + b
        if p.ordinal:
            tn = tn_stats(p.thresholds[level], p.thresholds[level + 1], centre, rho)
            ex, var, ent = tn.ex, tn.var, tn.entropy
        else:
            ex, var, ent = p.values[level], 0.0, None
        if p.spam:
            cells = updates.spam_cells(ann, level, p.n_levels, per_ann)
            s_l = updates.expected_sq_inv(ex, var, centre, 1.0 / s.lam_m[inst] + inv_bp)
            logit = updates.omega_logit(
                log_eps[ann], log1m_eps[ann], table[cells], e_logtau[ann], e_logdelta, rho,
                s_l, ent, exact=p.exact,
            )  # fmt: skip
            omega, _ = updates.omega_from_logit(logit)
        else:
            omega = np.ones_like(rho)
        items = np.flatnonzero(active)
        mu_m, lam_m = updates.update_z(inst, omega * rho, ex - b, p.mu, p.lam, p.n_instances)
        change = np.abs(mu_m[items] - s.mu_m[items])
        s.mu_m[items], s.lam_m[items] = mu_m[items], lam_m[items]
        if own_delta:
            s_l = updates.expected_sq_inv(ex, var, s.mu_m[inst] + b, 1.0 / s.lam_m[inst] + inv_bp)
            shape, rate = updates.update_gamma_factor(
                cat, omega, e_tau[ann], s_l, p.phi, p.eta, p.n_categories
            )
            s.delta_shape[items], s.delta_rate[items] = shape[items], rate[items]
        if r > 0:  # an item leaves at its fixed point, or once it is near it and closing in
            before = prev[items]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(before > 0, change / before, np.inf)
                remaining = np.where(ratio < 1.0, change * ratio / (1.0 - ratio), np.inf)
            active[items[(change < floor) | (remaining < drop)]] = False
        prev[items] = change
        rows = rows[active[p.inst[rows]]]
    return s, np.abs(s.mu_m - start)
