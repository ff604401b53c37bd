"""The why of a label or a flag, for people: an item's ratings, an annotator's items and their
agreement with the labels, the undetermined items worth rating first, numbers that read well."""

from __future__ import annotations

import numpy as np
import pandas as pd


def level_text(level: object) -> str:
    """A level as the labels write it: ``3`` (not ``3.0``), ``2.5``, or a named level's name."""
    if isinstance(level, (int, float, np.integer, np.floating)) and not isinstance(level, bool):
        return f"{float(level):g}"
    return str(level)


def _levels(values: pd.Series) -> np.ndarray:
    """Ratings or labels as compared: numbers as floats, named levels as their names."""
    if pd.api.types.is_numeric_dtype(values.dtype):
        return values.to_numpy(dtype=float)
    return values.to_numpy(dtype=object)


def _ids(values: pd.Series | pd.Index) -> np.ndarray:
    """IDs as plain strings (the readers' Arrow-backed or categorical IDs compare alike)."""
    return np.asarray(pd.Series(values).astype(str), dtype=object)


def item_ratings(
    ratings: pd.DataFrame, instance: str, flags: pd.Series | None = None
) -> pd.DataFrame:
    """One item's ratings: ``annotator``, ``rating`` and the annotator's ``flag``
    (``annotator_flags``' flag by annotator; "" without flags); most trusted raters first (ok,
    undetermined, unreliable), then by rating and annotator. ``ratings``: the long table
    (annotator, instance, rating) the model was fitted to.
    """
    rows = np.flatnonzero(_ids(ratings["instance"]) == str(instance))
    t = ratings.iloc[rows]
    t = pd.DataFrame({"annotator": _ids(t["annotator"]), "rating": _levels(t["rating"])})
    if flags is not None:
        by = pd.Series(flags.to_numpy(), index=_ids(flags.index))
        t["flag"] = by.reindex(t["annotator"]).fillna("").to_numpy()
    else:
        t["flag"] = ""
    order = {"ok": 0, "undetermined": 1, "": 1, "unreliable": 2}
    t["_o"] = t["flag"].map(order).fillna(3)
    return (
        t.sort_values(["_o", "rating", "annotator"], kind="stable")
        .drop(columns="_o")
        .reset_index(drop=True)
    )


def annotator_items(ratings: pd.DataFrame, annotator: str, items: pd.DataFrame) -> pd.DataFrame:
    """The items one annotator rated: ``instance``, ``rating``, the item's ``label`` and
    ``estimate``, and ``agrees`` (their rating is the label); disagreements first.

    ``items``: index instance, columns ``label`` and ``estimate`` (``items_`` joined with
    ``item_decisions``).
    """
    t = ratings.loc[_ids(ratings["annotator"]) == str(annotator), ["instance", "rating"]]
    inst = _ids(t["instance"])
    by = items[["label", "estimate"]].set_axis(_ids(items.index), axis=0)
    out = pd.DataFrame({"instance": inst, "rating": _levels(t["rating"])})
    out["label"] = _levels(by["label"].reindex(inst))
    out["estimate"] = by["estimate"].reindex(inst).to_numpy(float)
    out["agrees"] = out["rating"] == out["label"]
    return out.sort_values(["agrees", "instance"], kind="stable").reset_index(drop=True)


def agreement(annotator_items: pd.DataFrame) -> float:
    """The share of an annotator's ratings equal to their item's label (NaN without any)."""
    return float(annotator_items["agrees"].mean()) if len(annotator_items) else float("nan")


def undetermined_to_rate(items: pd.DataFrame) -> pd.DataFrame:
    """The undetermined items, most useful to rate first: ``expected_gain`` descending, then
    fewest ratings, then instance. ``items``: ``items_`` joined with ``item_decisions``."""
    t = items[items["flag"] == "undetermined"].reset_index()
    if "instance" not in t.columns:
        t = t.rename(columns={t.columns[0]: "instance"})
    t = t.sort_values(
        ["expected_gain", "n_ratings", "instance"], ascending=[False, True, True], kind="stable"
    )
    cols = ["instance"] + (["query"] if "query" in t.columns else [])
    cols += ["label", "p_wrong", "expected_gain", "n_ratings"]
    return t[[c for c in cols if c in t.columns]].reset_index(drop=True)


def label_sentence(item: pd.Series, n_ratings: int) -> str:
    """One item's label for people: the label, its flag and the chance it is wrong, and the
    estimate. ``item``: a row of ``items_`` joined with the decision columns (``label``,
    ``flag``, ``p_wrong``, ``estimate``)."""
    return (
        f"label **{level_text(item['label'])}** ({item['flag']}, P(label wrong) "
        f"{item['p_wrong']:.3f}), "
        f"estimate {item['estimate']:.2f} from {n_ratings:,} rating{'' if n_ratings == 1 else 's'}."
    )


def probability_text(p: float, digits: int = 3) -> str:
    """A probability for people: ``digits`` decimals, "<0.001" (or ">0.999") at the ends
    instead of 1e-10, "" for NaN."""
    if not np.isfinite(p):
        return ""
    small = 10.0**-digits
    if p < small:
        return f"<{small:.{digits}f}"
    if p > 1 - small:
        return f">{1 - small:.{digits}f}"
    return f"{p:.{digits}f}"


#: below this share of an annotator's ratings taken as truth (1 - ``spam_share``) they are
#: (almost) all spam to the fit, which has little to learn their expertise from: it is mostly
#: its prior (the pages say so)
NO_EXPERTISE_BELOW = 0.05


def annotators_for_people(annotators: pd.DataFrame) -> pd.DataFrame:
    """An annotators table as the pages show it: ``reliability`` as text
    (``probability_text``: "<0.001", not 1e-10), ``bias`` to 2 decimals without negative
    zeros; every other column as the files have it (``expertise`` too: the number
    annotators.csv holds, however little the ratings taught it)."""
    out = annotators.copy()
    out["reliability"] = [probability_text(p) for p in annotators["reliability"].astype(float)]
    if "bias" in out.columns:
        out["bias"] = clean_round(annotators["bias"], 2)
    return out


def clean_round(x: pd.Series | np.ndarray, digits: int = 2) -> np.ndarray:
    """Rounded to ``digits``, without negative zeros (``-0.00`` shows as ``0.00``)."""
    return np.round(np.asarray(x, dtype=float), digits) + 0.0
