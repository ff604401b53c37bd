"""Warm start of a refit from an earlier result: the daily refit after new ratings arrive.

``OrdinalMixture(init_from=previous)`` (``ordmix fit --warm-start DIR``) starts from
``previous``, a fitted ``OrdinalMixture`` or the output folder ``ordmix fit`` wrote, instead
of the usual restarts. Both hold the same posteriors (``items_`` / items.csv,
``annotators_`` / annotators.csv, ``categories_`` / categories.csv, ``hyperparams_`` /
summary.json), read into one :class:`Previous` by :func:`load_previous`.

:func:`warm_state` builds the start, matched by ID (as text, so IDs read back from a CSV match
the ratings'):

- q(z_m) = N(estimate, sd^2) of every instance rated before;
- q(tau_n) with the previous mean and sd of the expertise (shape ``(E/sd)^2``, rate
  ``E/sd^2``), and eps_n = the previous reliability, kept ``EPS_MARGIN`` inside (0, 1): 0 and 1
  are fixed points of eps's update (eq. 5), where the previous fit often ends, and an eps
  held there could not move whatever the new ratings say;
- with the bias (the extended model): q(b_n) = N(bias, bias_sd^2) and the learned precision
  lambda_b of its prior;
- q(delta_c) with the previous E[delta] and the usual shape ``phi + n_c / 2`` (categories
  matched only when the previous fit had the same granularity);
- the learned Gamma prior (alpha, beta) of the expertise, and the learned spam distribution
  pi (with per-annotator spam distributions: pi and kappa, each annotator's Dirichlet
  restarted at ``kappa pi``).

Instances, annotators and categories the previous fit did not have keep the usual start
(restart 0's, given as ``fresh``); a factor the previous fit did not learn (no bias, a fixed
pi) too. :func:`refit_starts` gives the refit ``min(n_restarts, REFIT_STARTS)`` starts to race
with the usual schedule and stopping rule, with the spam component and the learned pi from the
first sweep (no warm-up stage: the previous fit already went through them): this start, and
the same annotators, categories and hyperparameters with q(z) restarted from the data
(restart 0's per-item means, then restarts 1, 2's noisy ones). The highest bound wins, as
among restarts. Yesterday's q(z) alone keeps yesterday's optimum, which on TREC with a random
10% of ratings late and on simulated crowds lies below today's fit from scratch; the race
reaches the from-scratch bound within tol after 6-9% of that fit's sweeps on TREC (file-order
and random 10% late) and stops after 24% (file order) or 87% (random) of them in all (22-36% on
simulated crowds). It can take long because a fit's answer, which a refit starts from, is
where the stopping rule stopped on the way into a saddle of the bound; from there the refit's
items move on, annotators flipping one at a time under eps's EM update (docs/benchmarks.md,
"Daily refits", with what was tried; with the paper's difficulty prior the refit ran 112-180%).
``n_restarts=1`` (``--restarts 1``) runs yesterday's start alone.

Pure functions: no fitting; reading a folder goes through ``fitfolder``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data.coding import id_array
from ..data.crowd import CrowdData
from ..data.scale import fmt_scale
from ..errors import InputError
from ..results.fit_folder import check_folder, read_fit_table, read_summary
from ..vb.problem import Problem, State

#: eps of the start is kept this far inside (0, 1), so that new ratings can move it (it also
#: lets annotators on the edge start flipping: with the engine's own floor, 1e-10, a refit of
#: TREC from today's own answer takes 152 sweeps instead of 268, but after a random 10% of
#: late ratings the race then ends 47.5 below a fit from scratch; docs/benchmarks.md)
EPS_MARGIN = 1e-3


@dataclass(frozen=True)
class Previous:
    """An earlier fit's posteriors, indexed by ID as text.

    ``items``: estimate, sd; ``annotators``: expertise, expertise_sd, reliability, bias,
    bias_sd; ``categories``: difficulty; ``alpha``, ``beta``: the Gamma prior of the
    expertise; ``lambda_b``: the learned precision of the bias prior (None: the previous fit
    had no bias); ``pi``: (K,) the learned spam distribution (None: it was held fixed) and
    ``kappa`` its learned concentration (per-annotator spam distributions only, else None);
    ``scale``: (K,) the scale's values; ``granularity``: of its categories (None: unknown);
    ``source``: the folder it was read from ("" for a model), for messages.
    """

    items: pd.DataFrame
    annotators: pd.DataFrame
    categories: pd.DataFrame
    alpha: float
    beta: float
    scale: np.ndarray
    granularity: str | None
    source: str
    lambda_b: float | None = None
    pi: np.ndarray | None = None
    kappa: float | None = None

    def __post_init__(self) -> None:
        _check_values(self)


def load_previous(source: object) -> Previous:
    """A :class:`Previous` from a fitted estimator, an ``ordmix fit`` folder, or itself."""
    if isinstance(source, Previous):
        return source
    if isinstance(source, (str, os.PathLike)):
        return read_previous(source)
    if hasattr(source, "get_params") and not hasattr(source, "items_"):
        raise InputError(
            "init_from is an estimator that has not been fitted; fit it first, or give the "
            "output folder of an earlier ordmix fit"
        )
    if all(hasattr(source, a) for a in ("items_", "annotators_", "categories_", "hyperparams_")):
        return previous_from_model(source)
    raise InputError(
        "init_from must be a fitted OrdinalMixture or the output folder of ordmix fit, not "
        f"{type(source).__name__}"
    )


def previous_from_model(model: object) -> Previous:
    """A fitted estimator's posteriors (a Dask engine's partitioned ``items_`` is computed)."""

    def local(frame: object) -> pd.DataFrame:
        return frame if isinstance(frame, pd.DataFrame) else frame.compute()  # type: ignore

    hp = model.hyperparams_  # type: ignore[attr-defined]
    return Previous(
        items=_by_text(_item_columns(local(model.items_))),  # type: ignore[attr-defined]
        annotators=_by_text(_annotator_columns(model.annotators_, hp)),  # type: ignore
        categories=_by_text(local(model.categories_)[["difficulty"]]),  # type: ignore
        alpha=float(hp["alpha"]),
        beta=float(hp["beta"]),
        scale=np.asarray(hp["scale"], dtype=float),
        granularity=getattr(model, "granularity", None),
        source="",
        **_learned_extensions(hp),
    )


def read_previous(folder: str | os.PathLike) -> Previous:
    """The posteriors an ``ordmix fit`` folder holds (items, annotators, categories, summary)."""
    folder = check_folder(folder, ("items", "annotators", "categories"), "a warm start")
    summary = read_summary(folder, ("alpha", "beta", "scale"))
    hp = summary["hyperparameters"]
    items = read_fit_table(folder, "items", ["instance"], list(ITEM_COLUMNS))
    bias = ["bias", "bias_sd"] if hp.get("lambda_b") is not None else []
    ann = read_fit_table(
        folder, "annotators", ["annotator"], [*ANNOTATOR_COLUMNS, *bias],
        {c: "; its summary.json has lambda_b, so the fit modelled the bias: fit again"
         for c in bias},
    )  # fmt: skip
    cats = read_fit_table(folder, "categories", ["category"], ["difficulty"])
    model = summary.get("model") if isinstance(summary.get("model"), dict) else {}
    try:
        alpha, beta = float(hp["alpha"]), float(hp["beta"])
        scale = np.asarray(hp["scale"], dtype=float)
        learned = _learned_extensions(hp)
    except (TypeError, ValueError) as e:
        raise InputError(
            f"summary.json's hyperparameters are not numbers ({e}); fit again", source=str(folder)
        ) from None
    return Previous(
        items=_by_text(_item_columns(items.set_index("instance"))),
        annotators=_by_text(_annotator_columns(ann.set_index("annotator"), hp)),
        categories=_by_text(cats.set_index("category")[["difficulty"]]),
        alpha=alpha,
        beta=beta,
        scale=scale,
        granularity=model.get("granularity"),
        source=str(folder),
        **learned,
    )


#: the item columns every warm start reads: the continuous fit's q(z)
ITEM_COLUMNS = ("z_mean", "z_sd")
#: the annotator columns every warm start reads (``bias``, ``bias_sd`` too when the bias was
#: modelled): q(tau) and the continuous fit's eps
ANNOTATOR_COLUMNS = ("expertise", "expertise_sd", "eps")


def _item_columns(items: pd.DataFrame) -> pd.DataFrame:
    """q(z)'s mean and sd as ``estimate`` and ``sd`` (``ITEM_COLUMNS``)."""
    return items[list(ITEM_COLUMNS)].set_axis(["estimate", "sd"], axis=1)


def _annotator_columns(ann: pd.DataFrame, hp: dict) -> pd.DataFrame:
    """expertise, expertise_sd, reliability (the continuous fit's eps), bias, bias_sd (bias 0,
    sd 0 without the bias)."""
    out = ann[list(ANNOTATOR_COLUMNS)].rename(columns={"eps": "reliability"})
    with_bias = hp.get("lambda_b") is not None
    out["bias"] = ann["bias"].to_numpy(float) if with_bias else 0.0
    out["bias_sd"] = ann["bias_sd"].to_numpy(float) if with_bias else 0.0
    return out


def _learned_extensions(hp: dict) -> dict:
    """``lambda_b``, ``pi``, ``kappa`` of :class:`Previous` from the hyperparameters
    (``outputs.hyperparams``: ``pi`` is the learned one when ``pi_fixed`` is present)."""
    lam_b, kappa = hp.get("lambda_b"), hp.get("kappa")
    return {
        "lambda_b": None if lam_b is None else float(lam_b),
        "pi": np.asarray(hp["pi"], dtype=float) if "pi_fixed" in hp else None,
        "kappa": None if kappa is None else float(kappa),
    }


def warm_state(prev: Previous, data: CrowdData, p: Problem, fresh: State) -> State:
    """The refit's start: ``fresh`` (the usual start) with every factor ``prev`` knows by ID
    replaced by its previous posterior (module docstring). Shapes as ``fresh``'s."""
    check_scale(prev, data.scale.values)
    s = fresh.copy()
    warm_items(prev, data.instances, s.mu_m, s.lam_m)
    warm_globals(prev, data.annotators, p, s)
    if prev.granularity in (None, data.granularity):
        warm_categories(prev, data.categories, s.delta_shape, s.delta_rate)
    return s


def check_scale(prev: Previous, values: np.ndarray) -> None:
    """An InputError unless the previous fit's scale is ``values`` (K,)."""
    if not np.array_equal(prev.scale, values):
        raise InputError(
            f"the previous fit's scale {fmt_scale(prev.scale)} is not the data's "
            f"{fmt_scale(values)}; give the same scale (--scale / scale=) or fit "
            f"without a warm start",
            source=prev.source or None,
        )


def warm_items(prev: Previous, instances: np.ndarray, mu_m: np.ndarray, lam_m: np.ndarray) -> None:
    """q(z) (``mu_m``, ``lam_m`` (M,), in place) of the ``instances`` (M,) rated before: their
    previous mean and sd (all of a fit's items, or a Dask block's)."""
    at, rows = _match(prev.items.index, instances)
    mu_m[at] = prev.items["estimate"].to_numpy(float)[rows]
    lam_m[at] = prev.items["sd"].to_numpy(float)[rows] ** -2.0


def warm_categories(
    prev: Previous, categories: np.ndarray, delta_shape: np.ndarray, delta_rate: np.ndarray
) -> None:
    """q(delta)'s rate (``delta_rate`` (C,), in place) of the ``categories`` (C,) the previous
    fit had: their previous E[delta] at the usual shape (``delta_shape``)."""
    at, rows = _match(prev.categories.index, categories)
    delta_rate[at] = delta_shape[at] / prev.categories["difficulty"].to_numpy(float)[rows]


def warm_globals(prev: Previous, annotators: np.ndarray, p: Problem, s: State) -> None:
    """The annotators' factors (q(tau), eps, q(b)) of ``s`` (in place; its per-instance part
    not read) for the ``annotators`` (N,) the previous fit had, and the learned
    hyperparameters (the expertise prior, lambda_b, the spam distribution)."""
    at, rows = _match(prev.annotators.index, annotators)
    e_tau = prev.annotators["expertise"].to_numpy(float)[rows]
    sd_tau = prev.annotators["expertise_sd"].to_numpy(float)[rows]
    s.tau_shape[at] = (e_tau / sd_tau) ** 2
    s.tau_rate[at] = e_tau / sd_tau**2
    if p.spam:
        eps = prev.annotators["reliability"].to_numpy(float)[rows]
        s.eps[at] = np.clip(eps, EPS_MARGIN, 1.0 - EPS_MARGIN)

    if p.bias and prev.lambda_b is not None:
        s.bias_mean[at] = prev.annotators["bias"].to_numpy(float)[rows]
        s.bias_prec[at] = prev.annotators["bias_sd"].to_numpy(float)[rows] ** -2.0
        s.lam_b = prev.lambda_b
    s.alpha, s.beta = prev.alpha, prev.beta
    if p.spam and p.spam_dist != "uniform" and prev.pi is not None:
        s.pi = prev.pi.copy()
        if p.spam_dist == "annotator":
            s.kappa = s.kappa if prev.kappa is None else prev.kappa
            s.dir_a = np.tile(s.kappa * s.pi, (p.n_annotators, 1))


#: starts a refit races at most (``n_restarts`` caps it; ``n_restarts=1``: yesterday's alone)
REFIT_STARTS = 4


def n_refit_starts(n_restarts: int) -> int:
    """How many starts a refit with ``n_restarts`` races: ``min(n_restarts, REFIT_STARTS)``."""
    return max(1, min(int(n_restarts), REFIT_STARTS))


def refit_starts(
    prev: Previous, data: CrowdData, p: Problem, fresh: list[State]
) -> list[tuple[str, State]]:
    """The starts a refit races, ``(kind, state)`` each, one per ``fresh`` state (the usual
    starts of restarts 0, 1, ...) up to ``n_refit_starts(len(fresh))``:

    - ``previous``: the previous posteriors (``warm_state`` on restart 0's start);
    - ``previous-z-data``: the same annotators, categories and hyperparameters, q(z) of every
      instance restarted from the data (restart 0's per-item means);
    - ``previous-z-random``: the same with restart r's noisy start of q(z) (r = 1, 2).

    Yesterday's q(z) alone tends to keep yesterday's optimum, which today's ratings may no
    longer favour; the annotators' factors carry what was learned, the restarted q(z) lets
    the ratings re-decide each item (docs/benchmarks.md, "Daily refits").
    """
    kinds = start_kinds(len(fresh))
    start = warm_state(prev, data, p, fresh[0])
    out = [(kinds[0], start)]
    for r in range(1, len(kinds)):
        s = start.copy()
        z = fresh[r - 1]
        s.mu_m, s.lam_m = z.mu_m.copy(), z.lam_m.copy()
        out.append((kinds[r], s))
    return out


def start_kinds(n_restarts: int) -> list[str]:
    """The kinds of a refit's starts (``refit_starts``), ``n_refit_starts(n_restarts)`` of
    them: ``previous``, ``previous-z-data``, then ``previous-z-random``."""
    n = n_refit_starts(n_restarts)
    return ["previous", *(["previous-z-data"] if n > 1 else []), *["previous-z-random"] * (n - 2)]


def matched(prev: Previous, data: CrowdData) -> dict[str, tuple[int, int]]:
    """How many instances, annotators and categories of ``data`` the previous fit had:
    ``{"instances": (matched, total), ...}`` (for reports and tests)."""
    out = {}
    for name, index, ids in (
        ("instances", prev.items.index, data.instances),
        ("annotators", prev.annotators.index, data.annotators),
        ("categories", prev.categories.index, data.categories),
    ):
        out[name] = (int(_match(index, ids)[0].size), int(len(ids)))
    return out


def _by_text(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out.index = pd.Index(out.index.astype(str), name=frame.index.name)
    if not out.index.is_unique:
        dup = out.index[out.index.duplicated()][0]
        raise InputError(f"the previous fit lists {frame.index.name} {dup!r} twice; fit again")
    return out


def _match(index: pd.Index, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``ids`` that ``index`` (text) holds, and their rows in ``index``."""
    rows = index.get_indexer(pd.Index(id_array(ids)).astype(str))
    at = np.flatnonzero(rows >= 0)
    return at, rows[at]


def _check_values(prev: Previous) -> None:
    """Posteriors a state can be built from: positive sds, precisions and rates, eps in
    [0, 1]; else one InputError naming the column."""
    checks = [
        (prev.items["estimate"], "items", "z_mean", lambda v: np.isfinite(v)),
        (prev.items["sd"], "items", "z_sd", lambda v: v > 0),
        (prev.annotators["expertise"], "annotators", "expertise", lambda v: v > 0),
        (prev.annotators["expertise_sd"], "annotators", "expertise_sd", lambda v: v > 0),
        (prev.annotators["reliability"], "annotators", "eps", lambda v: v >= 0),
        (prev.annotators["reliability"], "annotators", "eps", lambda v: v <= 1),
        (prev.categories["difficulty"], "categories", "difficulty", lambda v: v > 0),
    ]
    if prev.lambda_b is not None:
        checks += [
            (prev.annotators["bias"], "annotators", "bias", lambda v: np.isfinite(v)),
            (prev.annotators["bias_sd"], "annotators", "bias_sd", lambda v: v > 0),
        ]
    for col, table, name, ok in checks:
        v = col.to_numpy(float)
        good = np.isfinite(v) & ok(v)
        if not good.all():
            i = int(np.flatnonzero(~good)[0])
            raise InputError(
                f"{table}: {name} of {col.index[i]!r} is {v[i]:g}, which no fit gives; fit again",
                source=prev.source or None,
            )
    if not (prev.alpha > 0 and prev.beta > 0 and np.isfinite(prev.alpha + prev.beta)):
        raise InputError(
            f"the expertise prior alpha={prev.alpha!r}, beta={prev.beta!r} must be positive; "
            "fit again",
            source=prev.source or None,
        )
    if prev.lambda_b is not None and not (np.isfinite(prev.lambda_b) and prev.lambda_b > 0):
        raise InputError(
            f"the bias prior's precision lambda_b={prev.lambda_b!r} must be positive; fit again",
            source=prev.source or None,
        )
    if prev.kappa is not None and not (np.isfinite(prev.kappa) and prev.kappa > 0):
        raise InputError(
            f"the spam distributions' concentration kappa={prev.kappa!r} must be positive; "
            "fit again",
            source=prev.source or None,
        )
    if prev.pi is not None and not (
        prev.pi.size == prev.scale.size
        and np.all(np.isfinite(prev.pi) & (prev.pi > 0))
        and abs(prev.pi.sum() - 1.0) < 1e-6
    ):
        raise InputError(
            f"the learned spam distribution pi={prev.pi.tolist()!r} is not a distribution "
            f"over the scale's {prev.scale.size} levels; fit again",
            source=prev.source or None,
        )
