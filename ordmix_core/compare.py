"""Every method on the same data with the same metrics: the paper's Table 1 for any crowd."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .base import CrowdEstimator
from .baselines import BASELINES
from .data import CrowdData, Scale, prepare
from .errors import InputError
from .metrics import evaluate
from .model import OrdinalMixture

Seed = int | np.random.Generator | None


def _odm(granularity: str, ordinal: bool = True, spam: bool = True):
    def make(n_restarts: int, rng: Seed) -> CrowdEstimator:
        return OrdinalMixture(
            granularity, ordinal=ordinal, spam=spam, n_restarts=n_restarts, random_state=rng
        )

    return make


def _baseline(cls: type[CrowdEstimator]):
    def make(n_restarts: int, rng: Seed) -> CrowdEstimator:
        return cls()

    return make


#: method name -> factory(n_restarts, random_state) -> unfitted estimator
METHODS: dict[str, Callable[[int, Seed], CrowdEstimator]] = {
    **{name: _baseline(cls) for name, cls in BASELINES.items()},
    "odm-global": _odm("global"),
    "odm-query": _odm("query"),
    "odm-instance": _odm("instance"),
    # the paper's ablation (Figure 3): instance difficulty not modelled (global)
    "odm-ordinal-spam": _odm("global", ordinal=True, spam=True),
    "odm-ordinal-nospam": _odm("global", ordinal=True, spam=False),
    "odm-real-spam": _odm("global", ordinal=False, spam=True),
    "odm-real-nospam": _odm("global", ordinal=False, spam=False),
}
#: the default of ``ordmix compare``: the paper's Table 1 (the ablation variants on request)
TABLE1 = [m for m in METHODS if not m.startswith(("odm-ordinal", "odm-real"))]
ABLATION = ["odm-ordinal-spam", "odm-ordinal-nospam", "odm-real-spam", "odm-real-nospam"]


def parse_methods(methods: str | Sequence[str] | None, default: Sequence[str]) -> list[str]:
    """Method names from ``"a,b"`` or a list; unknown names are an InputError listing the valid."""
    if methods is None:
        return list(default)
    names = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods)
    names = [m for m in names if m]
    bad = [m for m in names if m not in METHODS]
    if bad or not names:
        raise InputError(
            f"unknown method(s) {', '.join(bad) or '(none given)'}; choose from "
            f"{', '.join(METHODS)}"
        )
    return names


def compare_methods(
    ratings: pd.DataFrame | CrowdData,
    gold: pd.Series | pd.DataFrame,
    methods: str | Sequence[str] | None = None,
    *,
    n_restarts: int = 10,
    random_state: Seed = None,
    scale: Scale | Sequence[float] | str | None = None,
    callback: Callable[[str, int, int], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit each method and score it on the gold items.

    Returns ``(table, estimates)``: one row per method with ``method, mse, correlation, ndcg,
    seconds`` (NDCG per query when the ratings have a query column), and the estimates as an
    instance x method frame. ``callback(method, index, total)`` is called before each fit.
    """
    names = parse_methods(methods, TABLE1)
    data = ratings if isinstance(ratings, CrowdData) else prepare(ratings, scale, "instance")
    if any(m == "odm-query" for m in names) and data.inst_query is None:
        raise InputError(
            "method odm-query needs a 'query' column in the ratings; drop it or add one"
        )
    queries = (
        pd.Series(data.inst_query, index=pd.Index(data.instances, name="instance"))
        if data.inst_query is not None
        else None
    )
    rng = np.random.default_rng(random_state)
    rows, est = [], {}
    for i, name in enumerate(names):
        if callback is not None:
            callback(name, i, len(names))
        model = METHODS[name](n_restarts, rng)
        t0 = time.perf_counter()
        e = model.fit_predict(data)
        seconds = time.perf_counter() - t0
        scores = evaluate(e, gold, queries)
        rows.append(
            {
                "method": name,
                **{k: scores[k] for k in ("mse", "correlation", "ndcg")},
                "seconds": seconds,
                "n_gold": scores["n_gold"],
            }
        )
        est[name] = e
    table = pd.DataFrame(
        rows, columns=["method", "mse", "correlation", "ndcg", "seconds", "n_gold"]
    )
    return table, pd.DataFrame(est)
