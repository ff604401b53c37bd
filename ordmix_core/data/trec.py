"""Loader for the official TREC 2010 Relevance Feedback crowd release (``trec-rf10-data.txt``).

Applies the paper's processing: ratings labelled -2 (broken link) are dropped, labels
``{0, 1, 2}`` become ``{1, 2, 3}``, an instance is ``"topicID:docID"`` and its query the topic.
Gold ``{0, 1, 2}`` becomes ``{1, 2, 3}``; gold -1 (no NIST judgment) and -2 (broken link) are
not gold. Gold is kept only for instances that still have ratings.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError

COLUMNS = ("topicID", "workerID", "docID", "gold", "label")
LABELS = ("-2", "0", "1", "2")  # -2 = broken link
GOLDS = ("-2", "-1", "0", "1", "2")  # -1 = no gold, -2 = broken link


def load_trec_rf10(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the release file and return ``(ratings, gold)``.

    ``ratings``: columns ``annotator, instance, rating, query`` (IDs as strings, ratings int
    1..3, release order, repeated judgments kept). ``gold``: columns ``instance, truth`` (int
    1..3), instances in order of first appearance. Raises InputError naming file, row and fix.
    """
    path = Path(path)
    src = str(path)
    raw = _read_release(path, src)
    fix = _FIX
    cols = [str(c).strip() for c in raw.columns]
    if tuple(cols) != COLUMNS:
        raise InputError(f"header is {', '.join(cols)!r}; {fix}", source=src)
    df = raw.set_axis(list(COLUMNS), axis=1)
    df = df.apply(lambda c: c.fillna("").astype(str).str.strip())
    df = df[(df != "").any(axis=1)]  # blank lines; the index keeps the file's row numbers
    if len(df) == 0:
        raise InputError(f"no judgments after the header; {fix}", source=src)
    _check(df, src)

    keep = (df["label"] != "-2").to_numpy()
    instance = (df["topicID"] + ":" + df["docID"]).to_numpy(dtype=object)
    label = df["label"].to_numpy(dtype=object)[keep].astype(np.int64)
    ratings = pd.DataFrame(
        {
            "annotator": df["workerID"].to_numpy(dtype=object)[keep],
            "instance": instance[keep],
            "rating": label + 1,
            "query": df["topicID"].to_numpy(dtype=object)[keep],
        }
    )
    for c in ("annotator", "instance", "query"):
        ratings[c] = ratings[c].astype(str)

    gold_raw = df["gold"].to_numpy(dtype=object)
    codes, uniq = pd.factorize(instance, sort=False)
    first = np.full(len(uniq), -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # first row of each instance
    clash = gold_raw != gold_raw[first[codes]]
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        j = first[codes[i]]
        raise InputError(
            f"row {df.index[i] + 2} (counting the header as row 1): instance {instance[i]!r} has "
            f"gold {gold_raw[i]} here but {gold_raw[j]} on row {df.index[j] + 2}; a (topic, doc) "
            "pair has one gold value, fix the file",
            source=src,
        )
    rated = np.bincount(codes[keep], minlength=len(uniq)) > 0
    g = gold_raw[first].astype(np.int64)
    is_gold = rated & (g >= 0)
    gold = pd.DataFrame(
        {"instance": np.asarray(uniq, dtype=object)[is_gold], "truth": g[is_gold] + 1}
    )
    gold["instance"] = gold["instance"].astype(str)
    return ratings, gold


#: what the release file must look like (the fix of every message about its shape)
_FIX = (
    "expected the official tab-separated release with header topicID, workerID, docID, gold, label"
)


def _read_release(path: Path, src: str) -> pd.DataFrame:
    """The release file as text columns, or one InputError naming what is wrong with it."""
    fix = _FIX
    try:
        with warnings.catch_warnings():
            # pandas only warns when the first data row is longer than the header
            warnings.simplefilter("error", pd.errors.ParserWarning)
            return pd.read_csv(
                path,
                sep="\t",
                dtype=str,
                keep_default_na=False,
                na_filter=False,
                header=0,
                index_col=False,
                skip_blank_lines=False,
                engine="c",
            )
    except FileNotFoundError:
        raise InputError(
            "file not found; give the release file trec-rf10-data.txt", source=src
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"the file is empty; {fix}", source=src) from None
    except pd.errors.ParserWarning:
        raise InputError(
            f"row 2 (counting the header as row 1) has more fields than the header; {fix}",
            source=src,
        ) from None
    except pd.errors.ParserError as err:
        raise InputError(f"cannot parse ({err}); {fix}", source=src) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not a text file ({err.reason}); {fix}", source=src) from None


def _check(df: pd.DataFrame, src: str) -> None:
    """Raise InputError at the first row with an empty ID or a code outside the release's."""
    problems = []
    for c in ("topicID", "workerID", "docID"):
        bad = (df[c] == "").to_numpy()
        if bad.any():
            problems.append((int(np.flatnonzero(bad)[0]), f"empty {c}", "fill it in"))
    for c, allowed in (("label", LABELS), ("gold", GOLDS)):
        bad = ~df[c].isin(allowed).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            problems.append(
                (
                    i,
                    f"{c} {df[c].iloc[i][:40]!r} is not one of {', '.join(allowed)}",
                    "use the release's codes (2, 1, 0 relevance; -1 no gold; -2 broken link)",
                )
            )
    if problems:
        i, what, fix = min(problems)
        raise InputError(
            f"row {df.index[i] + 2} (counting the header as row 1): {what}; {fix} "
            "(a row with too few tab-separated fields shows up as empty cells)",
            source=src,
        )
