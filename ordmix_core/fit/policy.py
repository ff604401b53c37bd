"""Every constant of the fit's control, each with its reason: ``FitPolicy`` and ``DEFAULT``.

The restarts' starts and the choice among them (``restarts``), the race and its stopping rule
(``race``), the step (``step``), the rescues (``rescues``) and the settle's rounds
(``settle``) read their numbers from the policy they are given, the estimator's
``fit_policy`` (``DEFAULT``); functions called outside a fit take ``DEFAULT``'s. The figures
behind the reasons are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FitPolicy:
    """The fit's control constants (see each field's comment for why it has its value)."""

    # ------------------------------------------------- how many restarts (``n_restarts`` None)
    #: restarts when the labels come from the label fit: the data start alone (the items'
    #: shrunk means, the shared no-spam warm-up, eps0). The continuous fit then makes no
    #: column a manager reads (label, probabilities, estimate, flags, ``ordmix next``'s order
    #: and the reliabilities are the same bits with 1 restart or 10 on the four real sets),
    #: only ``z_mean`` and the annotators' ``eps``; every restart ends at its own optimum, and
    #: ``z_mean``'s gold MSE with the data start alone is within 0.002 of ten restarts' or
    #: lower on each real set, in 2-5x fewer sweeps, chosen over 1, 4 and 10 in every
    #: leave-one-data-set-out fold (``docs/benchmarks.md``, "How many restarts"); at 1M
    #: simulated ratings half of the random restarts end 60,000 nats below it
    label_fit_restarts: int = 1
    #: ... and when they come from the continuous posterior (the paper's model, a scale of
    #: more than 11 levels): its optimum is then the labels, and ten restarts race for it
    continuous_label_restarts: int = 10

    # ---------------------------------------------------------------- starts (``restarts``)
    #: eps of every annotator when a mixture starts (docs/model.md: eps0 = 0.99): nearly every
    #: rating from the truth, so the first sweeps find the truth before the spam explains it
    eps0: float = 0.99
    #: sd of a random restart's noise on q(z)'s means, in steps of the scale: half a step moves
    #: an item's start by less than a level
    start_noise: float = 0.5
    #: a random restart of the paper's schedule draws eps ~ U(low, low + width): reliable-ish
    #: annotators of every degree, never an all-spam start ...
    random_eps_low: float = 0.5
    #: ... and never above ``eps0``
    random_eps_width: float = 0.49
    #: start of the bias prior's sd, in steps: a quarter of a step (the first sweep replaces it)
    bias_sd0: float = 0.25
    #: start of the bias posterior's precision: the bias starts at 0, nearly certain
    bias_prec0: float = 1e6
    #: start of the per-annotator Dirichlet's concentration kappa
    kappa0: float = 50.0

    # ---------------------------------------------------------------- the stopping rule (``race``)
    #: SQUAREM's proposal is tried every this many sweeps (two swept states and a third make
    #: one): one cycle is also the window of the stopping rule's estimate change (``window``)
    squarem_every: int = 3
    #: the ratio of successive windows is clipped below 1: on a plateau the remaining change is
    #: still finite, 99 windows' worth, so the fit goes on until that is below ``tol_estimate``
    max_rate: float = 0.99
    #: windows for which the estimates' rule must hold before a restart stops: a decay that
    #: turns into growth (an annotator starting to leave a saddle) shows within them. TREC RF10
    #: restart 0: held for 2 windows the largest change per sweep was at its minimum at the
    #: stop, then grew fivefold over 30 sweeps (a 100x tighter fit moved items by 0.085); held
    #: for 4 it stops after the turn (0.0035)
    hold_windows: int = 4
    #: a restart stops only with each annotator's reliability within this share of
    #: ``tol_estimate`` of where it is heading too (``race.reliabilities_settled``: Aitken over
    #: the plain sweeps' eps, as the items' means): one drifting a few 1e-4 a sweep carries its
    #: items with it for hundreds of sweeps, and the items' changes, spread over its ratings,
    #: stay below the rule's (metaphor-novelty seeds 0, 1, 3: items 0.037-0.053 from a 100x
    #: tighter fit without, 0.003-0.008 with). Chosen leave-one-data-set-out over 0, 0.03, 0.1,
    #: 0.3, 1 on the four real sets' seeds 0-3 (the most fits within 0.01 of the tighter one,
    #: then the fewest sweeps): 0.1 in every fold (``docs/benchmarks.md``)
    reliability_share: float = 0.1
    #: an annotator this close to 0 or 1 is pinned at its end: the exact eps step leaves it at
    #: its clip (1e-10) while the slope of its block's bound there points outwards, and it has
    #: not settled while that slope points inwards or falls towards 0 (``race.ends_settled``:
    #: when it crosses 0 the annotator leaves, and its items with it). TREC RF10 at query
    #: granularity, seed 1: an annotator with 27 ratings, its slope 0.0087 at the stop falling
    #: to 0 over 110 sweeps; then 1 - eps 2.5e-7, 6e-7, 1.3e-6, ... on its way to 0.12, and an
    #: item 0.46 away. The margin is above the clip and below where a leaving one is after a
    #: few sweeps
    pinned_margin: float = 1e-6
    #: ... and one this close is near it: it has not settled while it is leaving, its
    #: distance to the end growing by more than ``flip_growth`` a sweep in log
    #: (TREC's annotator above, after its crossing). One converging inside, however slowly, is
    #: ``reliabilities_settled``'s: the 1M-rating simulated crowd's finalist has one at eps
    #: 0.99952 whose slope shrinks by a crawl; judged as at an end, it held the stop 500 sweeps
    end_margin: float = 1e-3
    #: the bound's relative change below which the plain sweeps start when ``tol`` is tighter:
    #: a tighter tolerance then continues the default's path rather than taking another
    polish_tol: float = 1e-6

    # ---------------------------------------------------------------- the race (``race``)
    #: the stopping rule of the shared warm-up and of a pre-stage, fixed: they are the
    #: mixture's start, which must not move when a user tightens ``tol`` ...
    warmup_tol: float = 1e-6
    #: ... and the bound alone decides (``tol_estimate`` 0): a start need not be polished
    warmup_tol_estimate: float = 0.0
    #: successive halving stops dropping restarts when this many are left: they run to the
    #: end, so the fit sees whether near-tied optima disagree (the ensemble)
    keep: int = 2
    #: once halving is down to ``keep``, the last stage runs in rounds of this many sweeps,
    #: after each of which a kept restart out of reach of the leader stops
    final_round: int = 5
    #: sweeps per window of a restart's projected gain (two windows give its rate)
    gain_window: int = 20
    #: a restart still running is out of reach when its bound plus its projected gain is below
    #: the leader's by more than this many ensemble gaps: it can neither win nor be near-tied
    outrun_gaps: float = 4.0

    # ---------------------------------------------------------------- the ensemble (``restarts``)
    #: near-tied: within this share of the best bound (1e-4: 12 nats on TREC RF10's ~-120,000,
    #: well above the bound's change at convergence, tol 1e-6 relative) ...
    ensemble_rtol: float = 1e-4
    #: ... or within this many nats (posterior odds e^3 ~ 20:1, "strong" evidence) on small data
    ensemble_min_nats: float = 3.0

    # ---------------------------------------------------------------- SQUAREM (``step``)
    #: eps is clipped to [eps_pack, 1 - eps_pack] before its logit: annotators within 1e-8 of
    #: certainty all pack to the same value, so their last bits, which differ with the
    #: summation order, do not enter the step length through a logit of ~23 (with 1e-12 the
    #: two engines' accelerated fits drifted apart by up to 2.5e-5 relative; now ~1e-10)
    eps_pack: float = 1e-8
    #: largest step length tried; beyond it the proposal is mostly extrapolation noise
    max_step: float = 8.0

    # ---------------------------------------------------------------- the rescues (``rescues``)
    #: every this many plain sweeps of the stopping rule, annotators leaving a saddle are
    #: looked for (and the items' blocks settled when none is flipped). Chosen while the
    #: estimates' rule was held for 2 windows: a TREC refit took 28% of a fit from scratch's
    #: sweeps with 15 and 31% with 20
    flip_window: int = 15
    #: an annotator is leaving a saddle when ``log(1 - eps)`` of a reliable one (``log eps`` of
    #: an unreliable one) grows by more than this a sweep over the window (TREC RF10: 1-3% a
    #: sweep for hundreds of sweeps before the crossing itself)
    flip_growth: float = 0.005
    #: the winner's annotators still leaving their end by more than this a sweep are reported
    #: still moving: on TREC RF10 the two a 300x tighter fit carries across 0.5 grow by
    #: 0.2-0.4% a sweep at the default's stop, and they are the only ones reported
    moving_growth: float = 0.001
    #: ... or whose reliability is estimated to move by more than this still (the stopping
    #: rule's estimate of its changes): a steady drift between the ends (TREC RF10 seeds 1
    #: and 3: w420, which a 300x tighter fit moves by 0.27)
    moving_drift: float = 0.05
    #: a window's settle (no flip kept) is swept from when it moved an item by this much: the
    #: escapes the plain sweeps follow one coordinate group at a time are taken in a step
    #: (seeds 0-3 of TREC RF10 and Web and 1M simulated ratings: the same winners, bounds
    #: within a nat, gold to 4 digits, 5-19% fewer sweeps)
    window_settle_move: float = 1e-3
    #: ... and when it moves no item that much but the item it moved most at the last window
    #: again, by more than then and by this share of ``window_settle_move`` at least, that
    #: item is escaping along with raters its own block holds: the settle is taken again with
    #: their blocks (a 1M simulated crowd: 105 fewer sweeps; no change on TREC RF10 and Web)
    escape_floor_share: float = 0.1
    #: times a restart's stop may be undone by a settle; each costs the estimates' rule its
    #: windows again (``min_plain_sweeps`` sweeps at least)
    max_settles: int = 3
    #: a stop is undone when the settle moves an item's mean by this share of ``tol_estimate``
    #: or more: 0.01 at the default, the move the stopping rule allows against a 100x tighter
    #: fit (TREC RF10 at seed 2: the settle moved one item by 0.013, the tighter fit as much)
    settle_move: float = 1 / 3
    #: the most plain sweeps of the alternative answer (TREC RF10 and Web at seeds 0-3: it
    #: stops at ``polish_tol`` after 4-16 sweeps on TREC, 24-38 on Web)
    alternative_max_sweeps: int = 100

    # ---------------------------------------------------------- the settle's rounds (``settle``)
    #: rounds at most (Web seed 2's item took 421)
    settle_max_rounds: int = 2000
    #: an item leaves the rounds when, shrinking, its remaining change is below this (a
    #: thirtieth of the default ``tol_estimate``: the rounds look for moves of that size)
    settle_drop: float = 1e-3
    #: an annotator leaves the rounds when its remaining change is below this: its block is a
    #: few numbers over its few ratings and moves slowly (TREC RF10 at seed 2: w708's eps from
    #: 0.706 towards 0.693 by a few 1e-4 a round; at ``settle_drop`` the rounds left at 0.703)
    settle_drop_annotators: float = 1e-5
    #: or when its change in a round is below this (at its fixed point, up to rounding)
    settle_floor: float = 1e-9

    @property
    def window(self) -> int:
        """Sweeps per window of the stopping rule's estimate change: one SQUAREM cycle, so
        successive windows hold the same mix of plain and extrapolated steps and their ratio
        is a rate, not the cycle's jitter."""
        return self.squarem_every

    @property
    def min_plain_sweeps(self) -> int:
        """The fewest plain sweeps, after the bound has settled, at which the estimates' rule
        can pass: two windows to measure a rate, the rule then held for ``hold_windows``."""
        return (2 + self.hold_windows) * self.window - 1

    @property
    def moving_min_sweeps(self) -> int:
        """The fewest plain sweeps over which ``still_moving`` measures (two windows of
        changes)."""
        return 2 * self.window + 1

    @property
    def plateau_sweeps(self) -> float:
        """The sweeps over which the estimates' rule extrapolates a plateau: the ratio of
        successive windows is clipped at ``max_rate``, so the remaining change is at most
        ``max_rate / (1 - max_rate)`` windows' worth (99, 297 sweeps)."""
        return self.window * self.max_rate / (1.0 - self.max_rate)

    @property
    def escape_floor(self) -> float:
        """The smallest move of an escaping item (``escape_floor_share``)."""
        return self.escape_floor_share * self.window_settle_move


#: the policy of every fit
DEFAULT = FitPolicy()
