"""One table of fit options: each parameter of ``OrdinalMixture`` declared once.

An entry gives the estimator's parameter name, its command-line flag (if it has one), the
parser of the flag's text, which values are valid (a validator that also describes them in
words), plain-language help, and how the dashboard shows it (widget kind, group, label). The
default is read from ``OrdinalMixture``'s signature, never restated here; the command line
and the dashboard use seed 0 instead of a fresh random seed, so that two runs agree.

The command line builds its flags from this table (:func:`add_fit_options`), turns parsed
arguments or a dashboard's settings into estimator keyword arguments
(:func:`to_estimator_kwargs`), and the estimator checks its parameters with
:func:`validate_params` (``OrdinalMixture._check_params`` calls it), so every front end gives
the same :class:`~ordmix_core.errors.InputError` for the same bad value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data.crowd import GRANULARITIES
from ..data.scale import Scale, as_scale, fmt_scale
from ..errors import InputError
from .option_kinds import (
    MAX_ITER,
    MAX_PRIOR,
    MAX_RESTARTS,
    MAX_SCALE_SPAN,
    Choice,
    Flag,
    Option,
    OptionalChoice,
    OptionalFlag,
    PreviousFit,
    Probabilities,
    Real,
    ScaleKind,
    Seed,
    Whole,
    _show,
    check_scale,
)

__all__ = [
    "OPTIONS",
    "MAX_ITER",
    "MAX_RESTARTS",
    "Option",
    "check_kwargs",
    "option",
    "spam_distribution",
    "validate_params",
]

#: the dashboard's groups
GROUPS = ("basic", "advanced")
#: commands whose flags come from this table
COMMANDS = ("fit", "compare", "experiment")


_NUMBER = {"min_value": 1e-6, "max_value": MAX_PRIOR}

OPTIONS: tuple[Option, ...] = (
    Option(
        "granularity",
        Choice(GRANULARITIES),
        "which items share a difficulty: each instance its own, each query one (needs a "
        "query column), or one for all (global)",
        "Granularity of difficulty",
        group="basic",
        widget="select",
        flag="--granularity",
        doc=(
            "The categories c(m): ``instance`` c(m) = m, ``query`` the item's query, ``global`` "
            "c(m) = 1."
        ),
    ),
    Option(
        "scale",
        ScaleKind(),
        "the ordinal scale, comma-separated, e.g. 1,2,3,4,5; write negative values as "
        "--scale=-2,-1,0,1,2 (default: the distinct ratings seen)",
        "Rating scale",
        group="basic",
        widget="text",
        flag="--scale",
        metavar="V1,V2,...",
    ),
    Option(
        "n_restarts",
        Whole(1, MAX_RESTARTS, none="as the labels need"),
        "independent starts of the continuous fit; the best one that did not collapse to "
        "all-spam wins (default: the data start alone when the label fit makes the labels, "
        "10 when the continuous posterior does: the paper's model, a scale of more than 11 "
        "levels)",
        "Restarts",
        group="basic",
        widget="int",
        flag="--restarts",
        metavar="N",
        widget_args={"min_value": 1, "max_value": MAX_RESTARTS, "step": 1},
    ),
    Option(
        "max_iter",
        Whole(1, MAX_ITER),
        "cap on all sweeps of a restart, every stage together (the no-spam warm-up, at most "
        "half of it, the extended model's stage with uniform spam, and the mixture; a SQUAREM "
        "step counts as one); a restart that reaches it stops unconverged, with a warning",
        "Max sweeps per restart",
        group="basic",
        widget="int",
        flag="--max-iter",
        metavar="N",
        widget_args={"min_value": 1, "max_value": MAX_ITER, "step": 50},
    ),
    Option(
        "tol",
        Real(0.0),
        "relative tolerance: a restart has converged when one sweep changes its lower bound "
        "(the fit's score) by less than this share of it, and the estimates are within "
        "--tol-estimate of where they are heading",
        "Tolerance (relative)",
        group="basic",
        flag="--tol",
        metavar="T",
        widget_args={"min_value": 0.0, "step": 1e-6, "format": "%.2e"},
        doc=(
            "The bound's half of the rule: ``|F_t - F_{t-1}| < tol |F_t|`` "
            "(``fit.race.converged``)."
        ),
    ),
    Option(
        "tol_estimate",
        Real(0.0),
        "a restart has converged only when no item's estimate is expected to move by this "
        "much more (in scale units, on a scale of more than 11 levels in tenths of its range; "
        "the last sweeps' changes extrapolated by their rate of decay) and no annotator's "
        "reliability by a tenth of it, so a tighter tolerance no longer moves estimates; 0: the "
        "bound alone decides",
        "Tolerance on estimates",
        flag="--tol-estimate",
        metavar="T",
        widget_args={"min_value": 0.0, "step": 1e-4, "format": "%.1e"},
        doc=("``tol_estimate=0``: the bound alone decides (``fit.race.converged``)."),
    ),
    Option(
        "random_state",
        Seed(),
        "random seed of the restarts' starting points: the same seed gives the same result",
        "Seed",
        group="basic",
        widget="int",
        flag="--seed",
        metavar="S",
        front_default=0,
        widget_args={"min_value": 0, "step": 1},
        doc=(
            "A seed or a ``numpy.random.Generator``: one Generator per fit, from which every "
            "restart draws."
        ),
    ),
    Option(
        "ordinal",
        Flag(),
        "treat each rating as a thresholded hidden value (the paper's model); off: the "
        "real-valued variant, where the rating is the value itself",
        "Ordinal likelihood",
        widget="toggle",
        flag="--real-valued",
        const=False,
        flag_help="the real-valued variant: the rating is the hidden value itself, no "
        "thresholds (default: off, the paper's ordinal model)",
        in_compare=False,
        doc=("Real-valued: x = rating."),
    ),
    Option(
        "spam",
        OptionalFlag(),
        "model spam: each rating is honest or drawn at random from the levels; off: every "
        "rating is honest (default: as the model says, on for both models; a fit that takes "
        "more than half of the ratings as spam says so)",
        "Spam component",
        widget="select",
        flag="--spam",
        metavar="on|off",
        in_compare=False,
        doc=("False: omega = eps = 1. None: on (``SpamWarning`` above ``SPAM_WARNING_SHARE``)."),
    ),
    Option(
        "model",
        Choice(("extended", "paper")),
        "extended: lenient and strict raters get a bias (learned), and the spam distribution "
        "is learned after a stage with uniform spam; paper: the published model of "
        "Lakshminarayanan & Teh (no bias, uniform spam)",
        "Model",
        group="basic",
        widget="select",
        flag="--model",
        in_compare=False,
        doc=(
            "The bias: ``x ~ N(z_m + b_n, ...)``, ``b_n ~ N(0, 1/lambda_b)`` with lambda_b "
            "learned; the spam distribution by type-II ML."
        ),
    ),
    Option(
        "bias",
        OptionalFlag(),
        "model each annotator's bias (a lenient rater rates above the truth, a strict one "
        "below); on or off (default: as --model says; off on a scale of more than 11 levels)",
        "Annotator bias",
        widget="none",
        flag="--bias",
        metavar="on|off",
        in_compare=False,
    ),
    Option(
        "spam_dist",
        OptionalChoice(("uniform", "global", "annotator")),
        "how spammers pick a level: uniform (the fixed pi), global (one distribution, "
        "learned) or annotator (each spammer's own favourite answers, learned) (default: as "
        "--model says; uniform on a scale of more than 11 levels)",
        "Spam distribution",
        widget="none",
        flag="--spam-dist",
        metavar="uniform|global|annotator",
        in_compare=False,
        doc=(
            "``annotator``: Dirichlet(kappa pi) with pi and kappa learned; a learned one is "
            "preceded by a mixture stage with the fixed ``pi`` (stage ``uniform``)."
        ),
    ),
    Option(
        "labels",
        OptionalChoice(("confusion", "continuous")),
        "the one posterior each item's label, level probabilities, interval, flag and next-"
        "rating gain are read from: confusion (a model of the ratings whose truth is one of the "
        "levels, with an ordinal confusion matrix per annotator, reported as a careful "
        "annotator's answer) or continuous (the level intervals of the item's posterior value, "
        "as the paper) (default: as --model says; continuous on a scale of more than 11 "
        "levels)",
        "Labels from",
        widget="none",
        flag="--labels",
        metavar="confusion|continuous",
        in_compare=False,
        doc=("``labels.choose``; the Dask engine runs the same on its blocks."),
    ),
    Option(
        "updates",
        Choice(("exact", "paper")),
        "how the item values are updated: exact (the fit's score never decreases) or the "
        "paper's literal equation 4",
        "Updates",
        widget="select",
        flag="--paper-updates",
        const="paper",
        flag_help="the paper's literal equation 4 for the item values instead of the exact "
        "update, under which the fit's score never decreases (default: off, exact)",
        doc=(
            "``exact``: the coordinate-ascent optimum of q(y) (docs/model.md); ``paper``: eq. (4)."
        ),
    ),
    Option(
        "phi",
        Real(0.0, MAX_PRIOR, lo_open=True, none="the model's, paper 10, extended 2"),
        "shape of the Gamma prior on how easy items are (prior mean phi/eta; small: items "
        "differ a lot in difficulty) (default: as --model says, paper 10, extended 2)",
        "phi (difficulty prior shape)",
        widget="text",
        flag="--phi",
        metavar="X",
        doc=("Fixed, for identifiability."),
    ),
    Option(
        "eta",
        Real(0.0, MAX_PRIOR, lo_open=True, none="the model's, paper 5, extended 1"),
        "rate of the Gamma prior on how easy items are (prior mean phi/eta) (default: as "
        "--model says, paper 5, extended 1)",
        "eta (difficulty prior rate)",
        widget="text",
        flag="--eta",
        metavar="X",
        doc=("Fixed, for identifiability."),
    ),
    Option(
        "lam",
        Real(0.0, MAX_PRIOR, lo_open=True),
        "precision of the prior on each item's true value (small: a vague prior; in scale "
        "units, on a scale of more than 11 levels in tenths of its range)",
        "lambda (prior precision)",
        flag="--lambda",
        metavar="X",
        widget_args={**_NUMBER, "step": 0.05, "format": "%.3f"},
    ),
    Option(
        "mu",
        Real(-MAX_SCALE_SPAN, MAX_SCALE_SPAN, none="the mean of the scale"),
        "prior mean of the items' true values, inside the scale's outer thresholds "
        "(default: the mean of the scale)",
        "mu (prior mean)",
        widget="text",
        flag="--mu",
        metavar="X",
    ),
    Option(
        "pi",
        Probabilities(),
        "how a spammer picks a level: one weight per level (default: uniform)",
        "Spam distribution",
        widget="none",
    ),
    Option(
        "nospam_warmup",
        Flag(),
        "start each restart's mixture from a fit without the spam component (recommended on "
        "real data, where the best-scoring answer can call every rating spam)",
        "No-spam warm-up",
        widget="none",
        doc=("Unused with ``init_from``."),
    ),
    Option(
        "init_from",
        PreviousFit(),
        "start from an earlier ordmix fit's output folder, for a refit after new ratings "
        "arrive: its estimates, matched by ID, raced against up to 3 variants with the items "
        "restarted from the data (--restarts 1: the previous fit alone), no warm-up; new items "
        "and annotators get the usual start (default: a fit from scratch)",
        "Start from a previous fit",
        widget="none",
        flag="--warm-start",
        metavar="DIR",
        in_compare=False,
        doc=(
            "Also a fitted ``OrdinalMixture``; the refit races ``min(n_restarts, 4)`` starts "
            "(``estimators.refit``)."
        ),
    ),
    Option(
        "collapse_threshold",
        Real(0.0, 1.0),
        "a fit whose share of honest ratings is below this counts as collapsed to all-spam",
        "Collapse threshold",
        widget="none",
    ),
    Option(
        "prune_restarts",
        Flag(),
        "drop the worse half of the unfinished restarts after each round (successive halving)",
        "Prune restarts",
        widget="none",
        doc=("After ``prune_start`` mixture sweeps, then after each doubling."),
    ),
    Option(
        "prune_start",
        Whole(1, MAX_ITER),
        "mixture sweeps before the first pruning round",
        "First pruning round",
        widget="none",
    ),
    Option(
        "accelerate",
        Flag(),
        "try a SQUAREM extrapolation every third sweep, and in the final plain sweeps a flip "
        "of annotators slowly leaving their side of 0.5 reliability; each kept only when it "
        "raises the score",
        "Accelerate",
        widget="none",
        doc=(
            "The trace stays monotone. With a learned ``spam_dist`` "
            "every mixture sweep also starts from each annotator's reliability at the exact "
            "optimum given the rest (``updates.eps_block``; eq. (5) is one EM step towards it), "
            "kept only when the bound does not fall (``fit.step``)."
        ),
    ),
    Option(
        "n_jobs",
        Whole(1, none="the cores, when the crowd is small enough"),
        "threads running restarts side by side; results do not change",
        "Threads",
        widget="none",
        doc=(
            "None: the cores, when the crowd is small enough that the sweep itself runs on one "
            "thread (a restart that sweeps alone then takes every core for its passes); 1: "
            "everything on the calling thread."
        ),
    ),
)

_BY_NAME = {o.name: o for o in OPTIONS}


def option(name: str) -> Option:
    """The table's entry for estimator parameter ``name``."""
    return _BY_NAME[name]


# --------------------------------------------------------------------------- validation
def check_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check estimator keyword arguments against the table; returns them normalised.

    Unknown names and bad values are an InputError naming the parameter and what is valid.
    """
    unknown = [k for k in kwargs if k not in _BY_NAME]
    if unknown:
        raise InputError(
            f"unknown fit option(s) {', '.join(map(repr, unknown))}; valid: {', '.join(_BY_NAME)}"
        )
    return {k: _BY_NAME[k].check(v) for k, v in kwargs.items()}


def validate_params(estimator: Any, scale: Scale | None = None) -> None:
    """Check every table parameter of ``estimator``; InputError for the first bad one.

    ``scale``: the scale the fit runs on (once the data is known); then ``mu`` must lie within
    its outer thresholds and ``pi`` must have one weight per level. Without it the
    estimator's own ``scale`` parameter, if given, is used.
    """
    params = {name: getattr(estimator, name) for name in _BY_NAME if hasattr(estimator, name)}
    check_kwargs(params)
    if scale is None and params.get("scale") is not None:
        scale = as_scale(params["scale"], np.empty(0))
    if scale is None:
        return
    try:
        check_scale(scale)
    except ValueError as e:
        raise InputError(f"the rating scale {e}; give the scale with --scale / scale=") from None
    mu = params.get("mu")
    lo, hi = float(scale.thresholds[0]), float(scale.thresholds[-1])
    if mu is not None and not lo <= float(mu) <= hi:
        raise InputError(
            f"mu must lie within the scale's outer thresholds {lo:g} to {hi:g} (the scale is "
            f"{fmt_scale(scale.values)}), not {_show(mu)}; leave it unset for the mean of "
            "the scale"
        )
    if params.get("pi") is not None:
        spam_distribution(params["pi"], scale.k)


def spam_distribution(pi: Sequence[float] | None, k: int) -> np.ndarray:
    """The spam distribution over ``k`` levels, normalised: uniform for None."""
    if pi is None:
        return np.full(k, 1.0 / k)
    option("pi").check(pi)
    arr = np.asarray(pi, dtype=float)
    if arr.shape != (k,):
        raise InputError(f"pi must be {k} positive numbers (one per level), not {_show(pi)}")
    return arr / arr.sum()
