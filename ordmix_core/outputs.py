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

Imports only ``io`` (the CSV writer, when writing) and ``_version``: the CLI, the dashboard and
both engines import this module, never the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._version import __version__

# --------------------------------------------------------------------------- learned frames


def items_frame(
    instances: np.ndarray,
    mu_m: np.ndarray,
    lam_m: np.ndarray,
    n_ratings: np.ndarray,
    query: np.ndarray | None,
    category: np.ndarray,
) -> pd.DataFrame:
    """``items_``: per instance the posterior mean and sd of z, ratings, query, category.

    Inputs (M,): instance IDs (an array, or an Index whose dtype is kept), q(z)'s mean and
    precision, ratings per instance, the query of each instance (None without a query column)
    and its category's name.
    """
    idx = pd.Index(instances, name="instance")
    items = pd.DataFrame(
        {"estimate": mu_m, "sd": 1.0 / np.sqrt(lam_m), "n_ratings": n_ratings}, index=idx
    )
    if query is not None:
        items["query"] = query
    items["category"] = category
    return items


def annotators_frame(
    annotators: np.ndarray,
    n_ratings: np.ndarray,
    tau_shape: np.ndarray,
    tau_rate: np.ndarray,
    reliability: np.ndarray,
    truth_weight: np.ndarray,
) -> pd.DataFrame:
    """``annotators_``: expertise E[tau] and its sd, reliability eps, share of ratings as spam.

    Inputs (N,): annotator IDs, ratings per annotator, q(tau)'s shape and rate, eps (ones
    without the spam component), ``truth_weight`` = sum of omega over the annotator's ratings.
    """
    return pd.DataFrame(
        {
            "n_ratings": n_ratings,
            "expertise": tau_shape / tau_rate,
            "expertise_sd": np.sqrt(tau_shape) / tau_rate,
            "reliability": reliability,
            "spam_share": 1.0 - truth_weight / np.maximum(n_ratings, 1),
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
) -> dict:
    """``hyperparams_``: the learned Gamma prior (alpha, beta), the fixed priors of ``p`` (a
    ``problem.Problem``), the spam distribution ``pi`` (K,) and the scale."""
    return {
        "alpha": float(alpha),
        "beta": float(beta),
        "phi": float(p.phi),
        "eta": float(p.eta),
        "mu": float(p.mu),
        "lambda": float(p.lam),
        "pi": [float(x) for x in pi],
        "scale": [float(v) for v in values],
        "thresholds": [float(v) for v in thresholds],
    }


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class Table:
    """One output file: ``{name}.csv`` from the model's ``attr``; a named index becomes the
    first column; ``columns`` fixes the order (None: the frame's); ``id_columns`` are
    written as text, protected against formulas."""

    name: str
    attr: str
    id_columns: tuple[str, ...]
    columns: tuple[str, ...] | None = None

    def rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (the attribute, or one partition of it) as it is written."""
        if frame.index.name is not None:
            frame = frame.reset_index()
        return frame if self.columns is None else frame[list(self.columns)]


#: the files of ``ordmix fit``, in the order they are written (then ``summary.json``)
TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table("items", "items_", ("instance", "query", "category")),
        Table(
            "annotators",
            "annotators_",
            ("annotator",),
            ("annotator", "n_ratings", "expertise", "reliability", "expertise_sd", "spam_share"),
        ),
        Table("categories", "categories_", ("category",)),
        Table("trace", "trace_", (), ("restart", "iteration", "lower_bound", "stage")),
        Table("restarts", "restarts_", ()),
    )
}


#: every name ``write_fit_outputs`` writes in the output folder (a table held as a Dask
#: DataFrame becomes a folder of part files named as the table, without ``.csv``)
FILES: tuple[str, ...] = (*(f"{t.name}.csv" for t in TABLES.values()), "summary.json")


def table(model: Any, name: str) -> pd.DataFrame:
    """The frame written to ``{name}.csv`` (see ``TABLES``) from a fitted model."""
    t = TABLES[name]
    return t.rows(getattr(model, t.attr))


def items_table(model: Any) -> pd.DataFrame:
    """``items.csv``: instance, estimate, sd, n_ratings[, query], category."""
    return table(model, "items")


def annotators_table(model: Any) -> pd.DataFrame:
    """``annotators.csv``: annotator, n_ratings, expertise, reliability, expertise_sd,
    spam_share."""
    return table(model, "annotators")


def summary(model: Any, settings: dict) -> dict:
    """The content of ``summary.json``: settings, parameters, sizes, hyperparameters, the
    winning restart and why, convergence, warnings, time."""
    return {
        "ordmix_version": __version__,
        "settings": {k: v for k, v in settings.items() if k != "func"},
        "model": {k: v for k, v in model.get_params().items() if k != "random_state"},
        "n_ratings": model.data_.n_ratings,
        "n_instances": model.data_.n_instances,
        "n_annotators": model.data_.n_annotators,
        "n_categories": model.data_.n_categories,
        "hyperparameters": model.hyperparams_,
        "winning_restart": int(model.best_restart_),
        "selection_reason": model.selection_reason_,
        "lower_bound": model.lower_bound_,
        "iterations": int(model.n_iter_),
        "converged": bool(model.converged_),
        "collapsed": bool(model.collapsed_),
        "interrupted": bool(model.interrupted_),
        "warnings": list(model.warnings_),
        "seconds": round(model.seconds_, 3),
    }


#: ``write_parts(table, frame, folder)``: write a partitioned (Dask) ``frame`` as part files
#: in ``folder`` (created by the caller), each through ``table.rows``
PartsWriter = Callable[[Table, Any, Path], None]


def write_fit_outputs(
    model: Any, folder: Path, settings: dict, write_parts: PartsWriter | None = None
) -> None:
    """items.csv, annotators.csv, categories.csv, trace.csv, restarts.csv, summary.json.

    A table that is not a pandas DataFrame is written by ``write_parts`` into a folder of the
    table's name (``items/part-*.csv``) instead of one file.
    """
    from .io import write_csv

    folder = Path(folder)
    for t in TABLES.values():
        frame = getattr(model, t.attr)
        if isinstance(frame, pd.DataFrame):
            write_csv(t.rows(frame), folder / f"{t.name}.csv", id_columns=list(t.id_columns))
        elif write_parts is not None:
            (folder / t.name).mkdir()
            write_parts(t, frame, folder / t.name)
        else:
            raise TypeError(f"{t.attr} is a {type(frame).__name__}; pass write_parts")
    text = json.dumps(summary(model, settings), indent=2, default=_json_default)
    (folder / "summary.json").write_text(text)


def _json_default(o: Any) -> Any:
    """Arrays (and numpy scalars) as lists (numbers); anything else, paths included, as text."""
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
