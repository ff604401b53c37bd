"""Every method on the same data with the same metrics: the paper's Table 1 for any crowd."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..data.coding import id_array
from ..data.crowd import CrowdData, check_granularity, prepare
from ..data.scale import Scale, fmt_scale
from ..errors import InputError
from ..estimators import options
from ..estimators.base import CrowdEstimator
from ..estimators.baselines import BASELINES
from ..estimators.ordinal_confusion import OrdinalConfusion
from ..estimators.ordinal_mixture import OrdinalMixture
from ..results import decisions
from .metrics import _gold_series, evaluate

Seed = int | np.random.Generator | None


class CompareNote(UserWarning):
    """Something the comparison left out or could not score (a skipped method, unrated gold)."""


@dataclass(frozen=True)
class OdmMethod:
    """An ``OrdinalMixture`` variant. ``granularity`` None: the one asked for, else global
    (the paper's ablation, Figure 3, does not model instance difficulty)."""

    granularity: str | None = None
    ordinal: bool = True
    spam: bool | None = None
    model: str = "extended"
    bias: bool | None = None
    spam_dist: str | None = None
    default_granularity: str = "global"

    def make(self, params: Mapping[str, Any], rng: Seed, granularity: str | None = None):
        kw = {**params, "ordinal": self.ordinal, "spam": self.spam, "random_state": rng}
        kw.update(model=self.model, bias=self.bias, spam_dist=self.spam_dist)
        kw["granularity"] = self.granularity or granularity or self.default_granularity
        return OrdinalMixture(**kw)


@dataclass(frozen=True)
class BaselineMethod:
    cls: type[CrowdEstimator]

    def make(self, params: Mapping[str, Any], rng: Seed, granularity: str | None = None):
        return self.cls()


#: method name -> how to build it (``.make(model_params, random_state, granularity)``)
METHODS: dict[str, OdmMethod | BaselineMethod] = {
    **{name: BaselineMethod(cls) for name, cls in BASELINES.items()},
    OrdinalConfusion.name: BaselineMethod(OrdinalConfusion),
    **{f"odm-paper-{g}": OdmMethod(g, model="paper") for g in ("global", "query", "instance")},
    # the default model (``OrdinalMixture()``: extended, instance granularity unless asked)
    "odm": OdmMethod(None, default_granularity="instance"),
    **{f"odm-{g}": OdmMethod(g) for g in ("global", "query", "instance")},
    # the extensions one at a time, at the granularity asked (default instance)
    # (with the spam component: the default decides it from the evidence, see ``odm``)
    "odm-with-spam": OdmMethod(None, spam=True, default_granularity="instance"),
    "odm-bias": OdmMethod(
        None, spam=True, bias=True, spam_dist="uniform", default_granularity="instance"
    ),
    "odm-learned-spam": OdmMethod(
        None, spam=True, bias=False, spam_dist="global", default_granularity="instance"
    ),
    "odm-annotator-spam": OdmMethod(
        None, spam=True, bias=True, spam_dist="annotator", default_granularity="instance"
    ),
    # the paper's ablation (Figure 3): its model, at global granularity unless asked
    "odm-ordinal-spam": OdmMethod(None, ordinal=True, spam=True, model="paper"),
    "odm-ordinal-nospam": OdmMethod(None, ordinal=True, spam=False, model="paper"),
    "odm-real-spam": OdmMethod(None, ordinal=False, spam=True, model="paper"),
    "odm-real-nospam": OdmMethod(None, ordinal=False, spam=False, model="paper"),
}
#: the default of ``ordmix compare``: the paper's Table 1 (its rows ``odm-paper-*``) and the
#: default model ``odm``; the other variants on request
TABLE1 = [*BASELINES, "odm-paper-global", "odm-paper-query", "odm-paper-instance", "odm"]
ABLATION = ["odm-ordinal-spam", "odm-ordinal-nospam", "odm-real-spam", "odm-real-nospam"]
#: model parameters a method fixes itself (the rest come from the caller)
FIXED_BY_METHOD = (
    "granularity", "ordinal", "spam", "random_state", "scale", "model", "bias", "spam_dist",
)  # fmt: skip


def parse_methods(methods: str | Sequence[str] | None, default: Sequence[str]) -> list[str]:
    """Method names from ``"a,b"`` or a list; unknown names are an InputError listing the valid."""
    if methods is None:
        return list(default)
    names = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods)
    names = [m for m in names if m]
    bad = [m for m in names if m not in METHODS]
    if bad or not names:
        raise InputError(
            f"unknown method(s) {', '.join(map(str, bad)) or '(none given)'}; choose from "
            f"{', '.join(METHODS)}"
        )
    return names


def select_methods(
    methods: str | Sequence[str] | None,
    granularity: str | None,
    has_query: bool,
    default: Sequence[str] = TABLE1,
) -> list[str]:
    """The methods to run: those named (else ``default``), at ``granularity`` when given.

    A ``granularity`` keeps, among the model's rows, only the one at that granularity (the
    baselines always run) and sets the ablation variants' granularity. Without a query column
    the default drops ``odm-query`` with a :class:`CompareNote`; a method the user named that
    cannot run is an InputError.
    """
    explicit = methods is not None
    names = parse_methods(methods, default)
    if granularity is not None:
        check_granularity(granularity)
    keep = []
    for name in names:
        m = METHODS[name]
        fixed = m.granularity if isinstance(m, OdmMethod) else None
        if fixed and granularity and fixed != granularity:
            if explicit:
                raise InputError(
                    f"method {name} fits at granularity {fixed}, but granularity {granularity} "
                    "was asked for; drop one of the two"
                )
            continue
        g = fixed or (granularity if isinstance(m, OdmMethod) else None)
        if g == "query" and not has_query:
            if explicit or granularity == "query":
                raise InputError(
                    f"method {name} needs a 'query' column in the ratings; drop it, add a query "
                    "column, or choose granularity instance or global"
                )
            warnings.warn(
                f"{name} skipped: the ratings have no query column", CompareNote, stacklevel=3
            )
            continue
        keep.append(name)
    if not keep:
        raise InputError("no method left to run; name some with --methods")
    return keep


def compare_methods(
    ratings: pd.DataFrame | CrowdData,
    gold: pd.Series | pd.DataFrame,
    methods: str | Sequence[str] | None = None,
    *,
    n_restarts: int | None = None,
    random_state: Seed = None,
    scale: Scale | Sequence[float] | str | None = None,
    granularity: str | None = None,
    params: Mapping[str, Any] | None = None,
    callback: Callable[[str, int, int], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit each method and score it on the gold items.

    ``granularity``: see :func:`select_methods`. ``params``: further ``OrdinalMixture``
    parameters for the model's rows (``max_iter``, ``tol``, ``phi``, ...; checked against
    the options table); ``n_restarts`` None is the estimator's default.

    Returns ``(table, estimates)``: one row per method with ``method, mse, correlation, ndcg,
    label_error, calibration_error, p_wrong_auroc, log_loss, seconds, n_gold`` (NDCG per query
    when the ratings have a query column; label error: share of gold items whose label is not
    the gold level, the label being the most probable level of a method with level
    probabilities (``shipped``), else its estimate rounded to the nearest level; calibration
    error, the AUROC of ``p_wrong`` for the wrong labels and log loss of those probabilities,
    NaN for a method without them; ``n_gold`` the gold items scored), and the estimates as an
    instance x method frame.
    ``callback(method, index, total)`` is called before each fit. Gold items without ratings
    are left out with a :class:`CompareNote`; gold outside the scale is an InputError.
    """
    data = ratings if isinstance(ratings, CrowdData) else prepare(ratings, scale, "instance")
    names = select_methods(methods, granularity, data.inst_query is not None)
    model_params = _model_params(params, n_restarts)
    truth = _check_gold(gold, data)
    queries = (
        pd.Series(data.inst_query, index=pd.Index(id_array(data.instances), name="instance"))
        if data.inst_query is not None
        else None
    )
    rng = np.random.default_rng(random_state)
    rows, est = [], {}
    for i, name in enumerate(names):
        if callback is not None:
            callback(name, i, len(names))
        model = METHODS[name].make(model_params, rng, granularity)
        t0 = time.perf_counter()
        e = model.fit_predict_score(data)
        seconds = time.perf_counter() - t0
        labels, proba = shipped(model)
        # scored on the levels' values: labels written as text or as names count as theirs
        labels = pd.Series(data.scale.codes(labels), index=labels.index)
        scores = evaluate(e, truth, queries, levels=data.scale.values, proba=proba, labels=labels)
        rows.append(
            {
                "method": name,
                **{k: scores[k] for k in SCORES},
                "seconds": seconds,
                "n_gold": scores["n_gold"],
            }
        )
        est[name] = e
    table = pd.DataFrame(rows, columns=["method", *SCORES, "seconds", "n_gold"])
    return table, pd.DataFrame(est)


#: the comparison table's score columns, in order
SCORES = (
    "mse", "correlation", "ndcg", "label_error", "calibration_error", "p_wrong_auroc", "log_loss",
)  # fmt: skip


def shipped(model: CrowdEstimator) -> tuple[pd.Series, pd.DataFrame | None]:
    """A fitted method's labels (``labels_``: what it ships) and level probabilities (index
    instance, one column per level; None for a method without them: mean, median, continuous
    ML). The model's come from one ``item_decisions`` (its ``p_level_*`` and the labels read
    from them), a baseline's from its ``posterior_``."""
    if isinstance(model, OrdinalMixture):
        dec = decisions.item_decisions(model)
        return dec["label"], dec[decisions.level_columns(model.scale_.values, model.scale_.names)]
    return model.labels_, getattr(model, "posterior_", None)


def _model_params(params: Mapping[str, Any] | None, n_restarts: int | None) -> dict[str, Any]:
    kw = dict(params or {})
    fixed = [k for k in kw if k in FIXED_BY_METHOD]
    if fixed:
        raise InputError(
            f"{', '.join(fixed)} cannot be set for every method at once: each method fixes "
            "it (the scale and seed have their own arguments)"
        )
    if n_restarts is not None:
        kw["n_restarts"] = n_restarts
    return options.check_kwargs(kw)


def _check_gold(gold: pd.Series | pd.DataFrame, data: CrowdData) -> pd.Series:
    """The gold items that have ratings; InputError if none has or a truth is off the scale.
    With named levels a truth may be a level's name (read as its value)."""
    named = data.scale.names is not None and isinstance(gold, pd.Series)
    if named and gold.dtype.kind not in "iuf":
        gold = pd.Series(data.scale.codes(gold, "gold: the truth"), index=gold.index)
    truth = _gold_series(gold).dropna()
    rated = truth.index.isin(pd.Index(id_array(data.instances)))
    if not rated.any():
        raise InputError(
            "no gold item has ratings; check that the gold file's instance IDs are the ones in "
            "the ratings (IDs are compared as strings)"
        )
    if not rated.all():
        missing = truth.index[~rated]
        eg = ", ".join(repr(str(x)) for x in missing[:3])
        warnings.warn(
            f"{len(missing)} of {len(truth)} gold item(s) have no ratings and are not scored "
            f"(e.g. {eg})",
            CompareNote,
            stacklevel=3,
        )
        truth = truth[rated]
    lo, hi = data.scale.thresholds[0], data.scale.thresholds[-1]
    t = truth.to_numpy(dtype=float)
    off = (t < lo) | (t > hi)
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise InputError(
            f"gold: instance {str(truth.index[i])!r} has truth {t[i]:g}, outside the rating "
            f"scale {fmt_scale(data.scale)} ({int(off.sum())} such item(s)); fix the "
            "gold file or give the scale with --scale"
        )
    return truth
