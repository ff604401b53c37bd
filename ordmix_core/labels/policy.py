"""Every threshold on the label path, in one place, each with its reason.

A label is the most probable level of one posterior (``posterior``); the numbers below decide
only how that posterior is reported (a tie, a flag, an interval) and how sure the fit says it is
(``calibration``). ``docs/results.md`` ("The label policy") gives the measurements behind each,
chosen leave-one-data-set-out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabelPolicy:
    """The label path's thresholds.

    ``tie``: an item whose two most probable levels are closer than this is ``undetermined``:
    the ratings do not decide between them, and a label picked by rounding would be a coin
    flip reported as a decision. ``confidence``: an item whose label has at least this
    probability is ``confident`` (the same level as an annotator's flag). ``interval``: the
    label's interval is the narrowest run of adjacent levels around it holding this much of
    the probability. ``reference_share``: the careful annotator that ``p_level_*`` speaks for
    is the one the annotators giving this share of the ratings, the most balanced-accurate
    first, are on average (``calibration``). ``latent_weight``: the weight of the hypothesis
    that the label is checked against the crowd's latent level itself, the rest going to the
    careful annotator (``calibration.report_map``). The last two were chosen
    leave-one-data-set-out on every shared set (the same in three folds of four; adult's
    chose 0.75 and 0.5).
    """

    tie: float = 0.01
    confidence: float = 0.9
    interval: float = 0.9
    reference_share: float = 0.25
    latent_weight: float = 0.25


#: the policy every fit uses unless told otherwise
DEFAULT = LabelPolicy()
