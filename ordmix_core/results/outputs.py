"""The fit's results as tables and files: the one home of the output schema.

Two halves, one set of column names:

- Learned frames (``items_``, ``annotators_``, ``categories_``, ``hyperparams_``), built by
  ``items_frame`` / ``annotators_frame`` / ``categories_frame`` / ``hyperparams`` from a fit's
  arrays. Both engines call them (the Dask engine per block for items), so a new result
  column is added here once.
- Files (what ``ordmix fit`` writes): ``TABLES`` names each file, the model attribute it
  comes from, its ID columns (protected against spreadsheet formulas) and its column order;
  ``table(model, name)`` gives the frame as written (the dashboard's downloads use it, e.g.
  ``items_table(model)``), ``summary(model, settings)`` the content of ``summary.json`` and
  ``write_fit_outputs`` writes them all. A table held as a Dask DataFrame (the Dask engine,
  above ``max_local_items``) goes through the caller's ``write_parts``: a folder of part files
  instead of one file.

Stability columns (``stability``): how much the near-tied restarts disagree on each item
(``estimate_spread``, ``unstable``) and annotator (``reliability_spread``, ``unstable``),
counted in ``summary.json``.

Decision columns (``decisions.py``'s judgements, in their own section below): ``items.csv``
gets each item's label, level probabilities, credible interval, flag and expected gain after
the model's columns, ``annotators.csv`` each annotator's evidence-aware flag with its evidence,
and ``summary.json`` counts them (``decisions``). ``decide`` computes them once per fit;
``items_table`` / ``annotators_table`` (the dashboard's downloads) and ``write_fit_outputs``
join them (the latter writes an in-memory ``items.csv`` a chunk of items at a time,
``write_items_csv``: the same bytes, never the whole table in memory). The Dask engine writes
the same columns, its items per partition above ``max_local_items`` (their decision columns
read from each block's posterior, ``decision_columns._partitioned_item_decisions``).

Imports ``decisions`` (the judgements), ``io`` (the CSV writer, when writing) and
``_version``: the CLI, the dashboard and both engines import this module, never the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._version import __version__
from ..labels.policy import DEFAULT as DEFAULT_POLICY
from . import decisions
from .decision_columns import Decisions, _partitioned_item_decisions, decide

# --------------------------------------------------------------------------- learned frames
from .stability import stability_summary, still_moving_count


def items_frame(
    instances: np.ndarray,
    mu_m: np.ndarray,
    lam_m: np.ndarray,
    n_ratings: np.ndarray,
    query: np.ndarray | None,
    category: np.ndarray,
    gold: np.ndarray | None = None,
    crowd: np.ndarray | None = None,
) -> pd.DataFrame:
    """``items_``: per instance the estimate and its sd, ratings, query, category, and the
    continuous fit's q(z) (``z_mean``, ``z_sd``: what ``--warm-start`` starts from).

    Inputs (M,): instance IDs (an array, or an Index whose dtype is kept), q(z)'s mean and
    precision, ratings per instance, the query of each instance (None without a query column)
    and its category's name; ``gold`` (M,) bool: items whose truth was given (a ``gold``
    column; their sd is 0), None when the fit had no gold; ``crowd`` (M,): each item's mean
    from its own ratings with its gold not imposed (``settle.own_ratings``), written for the
    gold items only (``crowd_estimate``: the crowd's reading of a honeypot). The estimate and
    sd are q(z)'s until the labels replace them with their own posterior's
    (``OrdinalMixture._choose_labels``; the paper's model keeps q(z)'s).
    """
    idx = pd.Index(instances, name="instance")
    sd = 1.0 / np.sqrt(lam_m)
    if gold is not None:
        sd = np.where(gold, 0.0, sd)
    items = pd.DataFrame({"estimate": mu_m, "sd": sd, "n_ratings": n_ratings}, index=idx)
    if query is not None:
        items["query"] = query
    items["category"] = category
    if gold is not None:
        items["gold"] = np.asarray(gold, dtype=bool)
        if crowd is not None:
            items["crowd_estimate"] = np.where(items["gold"], crowd, np.nan)
    items["z_mean"] = items["estimate"]
    items["z_sd"] = items["sd"]
    return items


def annotators_frame(
    annotators: np.ndarray,
    n_ratings: np.ndarray,
    tau_shape: np.ndarray,
    tau_rate: np.ndarray,
    reliability: np.ndarray,
    truth_weight: np.ndarray,
    bias_mean: np.ndarray | None = None,
    bias_prec: np.ndarray | None = None,
) -> pd.DataFrame:
    """``annotators_``: expertise E[tau] and its sd, reliability, share of ratings as spam,
    bias (+ lenient: rates above the truth; - strict: below) and its sd, and the continuous
    fit's eps (what ``--warm-start`` starts from). The reliability is eps until the fit
    replaces it with the median of its own posterior (``reliability.fitted_flags``).

    Inputs (N,): annotator IDs, ratings per annotator, q(tau)'s shape and rate, eps (ones
    without the spam component), ``truth_weight`` = sum of omega over the annotator's ratings,
    q(b)'s mean and precision (None when the bias is not modelled: bias 0, sd 0).
    """
    zeros = np.zeros(len(n_ratings))
    return pd.DataFrame(
        {
            "n_ratings": n_ratings,
            "expertise": tau_shape / tau_rate,
            "expertise_sd": np.sqrt(tau_shape) / tau_rate,
            "reliability": reliability,
            "spam_share": 1.0 - truth_weight / np.maximum(n_ratings, 1),
            "bias": zeros if bias_mean is None else bias_mean,
            "bias_sd": zeros if bias_prec is None else 1.0 / np.sqrt(bias_prec),
            "eps": reliability,
        },
        index=pd.Index(annotators, name="annotator"),
    )


def categories_frame(
    categories: np.ndarray, delta_shape: np.ndarray, delta_rate: np.ndarray, n_ratings: np.ndarray
) -> pd.DataFrame:
    """``categories_``: difficulty E[delta] (an inverse variance) and ratings; inputs (C,),
    ``categories`` an array of names or an Index whose dtype is kept."""
    return pd.DataFrame(
        {"difficulty": delta_shape / delta_rate, "n_ratings": n_ratings},
        index=pd.Index(categories, name="category"),
    )


def hyperparams(
    alpha: float,
    beta: float,
    p: Any,
    pi: np.ndarray,
    values: Sequence[float],
    thresholds: Sequence[float],
    state: Any = None,
    names: Sequence[str] | None = None,
) -> dict:
    """``hyperparams_``: the learned Gamma prior (alpha, beta), the fixed priors of ``p`` (a
    ``problem.Problem``), the spam distribution ``pi`` (K,) and the scale (``levels``: the
    names of a scale of named levels, whose ``scale`` is 1..K; absent otherwise); with the
    extensions (``state``: the winner's ``problem.State``): ``lambda_b`` (precision of the
    bias prior; None without the bias), the learned ``pi`` (global, or the Dirichlet's mean)
    and ``kappa`` (per-annotator spam distributions), ``pi_fixed`` the fixed one (keys
    present only when the model has them)."""
    learned = state is not None and p.spam_dist != "uniform" and state.pi is not None
    out = {
        "alpha": float(alpha),
        "beta": float(beta),
        "phi": float(p.phi),
        "eta": float(p.eta),
        "mu": float(p.mu),
        "lambda": float(p.lam),
        "pi": [float(x) for x in (state.pi if learned else pi)],
        "scale": [float(v) for v in values],
        "thresholds": [float(v) for v in thresholds],
    }
    if names is not None:
        out["levels"] = [str(n) for n in names]
    if state is not None and p.bias:
        out["lambda_b"] = float(state.lam_b)
    if learned:
        out["pi_fixed"] = [float(x) for x in pi]
    if learned and p.spam_dist == "annotator":
        out["kappa"] = float(state.kappa)
    return out


#: why the default model is what it is (summary.json's ``model_choice.why``)
EXTENDED_WHY = (
    "the default: the annotator bias explains lenient and strict raters as such "
    "instead of as spam, a learned spam distribution, started after a mixture stage "
    "with uniform spam, captures spammers' favourite answers, and a vaguer prior on the "
    "items' difficulty (Gamma(2, 1), the paper's Gamma(10, 5)) puts a hard item's "
    "disagreement down to the item rather than to its raters; measured on TREC RF10, Web, "
    "Snow 2008 and simulated crowds (docs/results.md)"
)


def model_description(
    model: str, p: Any, pre_stage: str | None, hyper: dict, gold: np.ndarray | None
) -> dict:
    """``model_``: the model fitted (``model``, bias, spam distribution), the stages of each
    restart, the learned lambda_b and pi, the number of gold items, and why."""
    stages = []
    if p.spam:
        stages.append("nospam")
        if pre_stage:
            stages.append(pre_stage)
        stages.append("mixture")
    else:
        stages.append("model")
    why = (
        EXTENDED_WHY
        if model == "extended"
        else "the model of Lakshminarayanan & Teh as published (model='paper')"
    )
    return {
        "model": model,
        "bias": bool(p.bias),
        "spam_dist": p.spam_dist if p.spam else None,
        "stages": stages,
        "lambda_b": hyper.get("lambda_b"),
        "bias_sd_prior": None if not hyper.get("lambda_b") else hyper["lambda_b"] ** -0.5,
        "pi": hyper.get("pi") if p.spam_dist != "uniform" else None,
        "n_gold": 0 if gold is None else int(np.sum(gold)),
        "why": why,
    }


def spam_distributions_frame(
    annotators: np.ndarray, values: Sequence[float], dir_a: np.ndarray | None
) -> pd.DataFrame | None:
    """``spam_distributions_``: each annotator's spam distribution (the mean of q(pi_n)), one
    column per level, and the favourite level; None unless per-annotator (``dir_a`` (N, K))."""
    if dir_a is None:
        return None
    mean = dir_a / dir_a.sum(axis=1, keepdims=True)
    out = pd.DataFrame(
        mean, index=pd.Index(annotators, name="annotator"), columns=[f"{v:g}" for v in values]
    )
    out["favourite"] = np.asarray(values, dtype=float)[mean.argmax(axis=1)]
    return out


# --------------------------------------------------------------------------- stability
# What the data cannot decide: the near-tied restarts (``restarts.ensemble``)
# disagree on some items and annotators. Kept apart from the other columns on purpose.


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class Table:
    """One output file: ``{name}.csv`` from the model's ``attr``; a named index becomes the
    first column; ``columns`` fixes the order of the first columns (None: the frame's), any
    others (the decision columns) follow; ``id_columns`` are written as text, protected
    against formulas."""

    name: str
    attr: str
    id_columns: tuple[str, ...]
    columns: tuple[str, ...] | None = None

    def rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (the attribute, or one partition of it) as it is written."""
        if frame.index.name is not None:
            frame = frame.reset_index()
        if self.columns is None:
            return frame
        return frame[[*self.columns, *(c for c in frame.columns if c not in self.columns)]]


#: the files of ``ordmix fit``, in the order they are written (then ``summary.json``)
TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table("items", "items_", ("instance", "query", "category")),
        Table(
            "annotators",
            "annotators_",
            ("annotator",),
            (
                "annotator",
                "n_ratings",
                "expertise",
                "reliability",
                "expertise_sd",
                "spam_share",
                "bias",
                "bias_sd",
                "reliability_spread",
                "unstable",
                "still_moving",
                "eps",
            ),  # fmt: skip
        ),
        Table("categories", "categories_", ("category",)),
        Table("trace", "trace_", (), ("restart", "iteration", "lower_bound", "stage")),
        Table("restarts", "restarts_", ()),
    )
}


#: every name ``write_fit_outputs`` writes in the output folder (a table held as a Dask
#: DataFrame becomes a folder of part files named as the table, without ``.csv``)
FILES: tuple[str, ...] = (*(f"{t.name}.csv" for t in TABLES.values()), "summary.json")


def table(model: Any, name: str, dec: Decisions | None = None) -> pd.DataFrame:
    """The frame written to ``{name}.csv`` (see ``TABLES``) from a fitted model, with its
    decision columns (``dec``, default ``decide(model)``'s) for items and annotators."""
    t = TABLES[name]
    if name in ("items", "annotators"):
        return t.rows(decided(model, name, decide(model) if dec is None else dec))
    return t.rows(getattr(model, t.attr))


def items_table(model: Any, dec: Decisions | None = None) -> pd.DataFrame:
    """``items.csv``: instance, estimate, sd, n_ratings[, query], category[, gold],
    estimate_spread, unstable (``item_stability``), then the decision columns
    (``DECISION_COLUMNS``)."""
    return table(model, "items", dec)


def annotators_table(model: Any, dec: Decisions | None = None) -> pd.DataFrame:
    """``annotators.csv``: annotator, n_ratings, expertise, reliability, expertise_sd,
    spam_share, bias, bias_sd, reliability_spread, unstable (``annotator_stability``),
    still_moving (``rescues.still_moving``), then
    the flag columns (``FLAG_COLUMNS``) when the fit kept
    per-rating omega."""
    return table(model, "annotators", dec)


def summary(model: Any, settings: dict, dec: Decisions | None = None) -> dict:
    """The content of ``summary.json``: settings, parameters, sizes, hyperparameters, the
    winning restart and why, convergence, warnings, time, and the decisions' counts
    (``decision_counts``; ``dec`` default ``decide(model)``), and the near-tied restarts'
    disagreement (``unstable_items``, ``unstable_annotators``, ``ensemble``), and how many
    annotators' reliability was still moving when the fit stopped
    (``still_moving_annotators``), and the crowd's agreement (``agreement``: Krippendorff's
    ordinal alpha with its bootstrap interval; None without the ratings)."""
    stab = stability_summary(model)
    dec = decide(model) if dec is None else dec
    return {
        "ordmix_version": __version__,
        "settings": {k: v for k, v in settings.items() if k != "func"},
        "model": {k: v for k, v in model.get_params().items() if k != "random_state"},
        "n_ratings": model.data_.n_ratings,
        "n_instances": model.data_.n_instances,
        "n_annotators": model.data_.n_annotators,
        "n_categories": model.data_.n_categories,
        "hyperparameters": model.hyperparams_,
        "model_choice": getattr(model, "model_", None),
        "winning_restart": int(model.best_restart_),
        "selection_reason": model.selection_reason_,
        "lower_bound": model.lower_bound_,
        "iterations": int(model.n_iter_),
        "converged": bool(model.converged_),
        "collapsed": bool(model.collapsed_),
        "unstable_items": stab["unstable_items"],
        "unstable_annotators": stab["unstable_annotators"],
        "still_moving_annotators": still_moving_count(model),
        "ensemble": stab,
        "interrupted": bool(model.interrupted_),
        "warnings": list(model.warnings_),
        "seconds": round(model.seconds_, 3),
        "decisions": decision_counts(model, dec),
        "agreement": None if dec.agreement is None else dec.agreement.as_dict(),
    }


#: ``write_parts(table, frame, folder)``: write a partitioned (Dask) ``frame`` as part files
#: in ``folder`` (created by the caller), each through ``table.rows``
PartsWriter = Callable[[Table, Any, Path], None]


def write_fit_outputs(
    model: Any, folder: Path, settings: dict, write_parts: PartsWriter | None = None
) -> dict:
    """items.csv, annotators.csv, categories.csv, trace.csv, restarts.csv, summary.json;
    returns the summary written (``summary``).

    A table that is not a pandas DataFrame is written by ``write_parts`` into a folder of the
    table's name (``items/part-*.csv``) instead of one file; an in-memory ``items_`` a chunk
    of items at a time with its decision columns (``write_items_csv``).
    """
    from ..io import write_csv

    folder = Path(folder)
    in_memory = isinstance(model.items_, pd.DataFrame)
    dec = decide(model, items=not in_memory)  # in memory: the items' columns chunk by chunk
    for t in TABLES.values():
        if t.name == "items" and in_memory:
            counts = write_items_csv(model, folder / "items.csv", dec.confidence)
            dec = replace(dec, item_counts=counts)
            continue
        frame = decided(model, t.name, dec)
        if isinstance(frame, pd.DataFrame):
            write_csv(t.rows(frame), folder / f"{t.name}.csv", id_columns=list(t.id_columns))
        elif write_parts is not None:
            (folder / t.name).mkdir()
            write_parts(t, frame, folder / t.name)
        else:
            raise TypeError(f"{t.attr} is a {type(frame).__name__}; pass write_parts")
    content = summary(model, settings, dec)
    (folder / "summary.json").write_text(json.dumps(content, indent=2, default=_json_default))
    return content


def write_items_csv(
    model: Any, path: Path, confidence: float = decisions.CONFIDENCE
) -> dict[str, int]:
    """``items.csv`` of an in-memory fit, ``decisions.ITEM_CHUNK`` items at a time: the same
    bytes as ``items_table(model)`` written whole, without the whole table (2 million items
    and their decision columns are ~0.5 GB as frames). Returns the items per flag."""
    from ..io import write_csv_chunks

    t = TABLES["items"]
    counts = dict.fromkeys(decisions.ITEM_FLAGS, 0)
    items = model.items_

    def chunks():
        lo = 0
        for dec in decisions.iter_item_decisions(model, confidence=confidence):
            rows = t.rows(items.iloc[lo : lo + len(dec)].join(dec))
            lo += len(dec)
            for flag, n in dec["flag"].value_counts().items():
                counts[flag] += int(n)
            yield rows

    write_csv_chunks(chunks(), path, id_columns=list(t.id_columns))
    return counts


def _json_default(o: Any) -> Any:
    """Arrays (and numpy scalars) as lists (numbers); anything else, paths included, as text."""
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


# --------------------------------------------------------------------------- decision columns
# ``decisions.py``'s judgements joined to items.csv and annotators.csv, and counted in
# summary.json; kept apart from the model's columns above.


def decided(model: Any, name: str, dec: Decisions) -> Any:
    """The model's frame for table ``name`` with its decision columns joined (items,
    annotators; the other tables as they are). A Dask ``items_`` gets them per partition."""
    frame = getattr(model, TABLES[name].attr)
    if name == "items":
        if dec.items is not None:
            return frame.join(dec.items)
        if isinstance(frame, pd.DataFrame):  # decide(model, items=False)
            return frame.join(decisions.item_decisions(model, confidence=dec.confidence))
        return _partitioned_item_decisions(model, frame, dec.confidence)
    if name == "annotators" and dec.annotators is not None:
        return frame.join(dec.annotators)
    return frame


def decision_counts(model: Any, dec: Decisions) -> dict:
    """summary.json's ``decisions``: annotators per flag (or why there are none) and items per
    flag, with the settings behind them."""
    if dec.annotators is not None:
        flags = dec.annotators["flag"].value_counts()
        ann: dict[str, Any] = {f: int(flags.get(f, 0)) for f in decisions.ANNOTATOR_FLAGS}
    else:
        ann = {"flags": dec.no_flags}
    ann.update(threshold=dec.threshold, confidence=dec.confidence)
    if dec.items is not None:
        counts = dec.items["flag"].value_counts()
    elif dec.item_counts is not None:
        counts = dec.item_counts
    elif isinstance(model.items_, pd.DataFrame):
        counts = decisions.item_decisions(model, confidence=dec.confidence)["flag"].value_counts()
    else:
        counts = decided(model, "items", dec)["flag"].value_counts().compute()
    items: dict[str, Any] = {f: int(counts.get(f, 0)) for f in decisions.ITEM_FLAGS}
    items.update(confidence=dec.confidence, tie=DEFAULT_POLICY.tie)
    return {"annotators": ann, "items": items}
