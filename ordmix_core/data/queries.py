"""Which query each instance belongs to, checked: an instance belongs to one query.

A ratings table with a ``query`` column repeats an instance's query on each of its ratings;
``instance_queries`` reduces it to one query per instance and finds the first rating that
contradicts it, and ``query_clash`` says so in words. Pure functions of coded arrays, so the
in-memory reader and the Dask engine's blocks (which see one shuffled partition and no
meaningful row numbers) share the check and its message.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def instance_queries(
    inst: np.ndarray, query: np.ndarray | pd.api.extensions.ExtensionArray, n_instances: int
) -> tuple[np.ndarray, int | None]:
    """``(inst_query, clash)``: each instance's query, object (M,), the query of its first
    rating; ``clash`` the first rating (row index into ``inst``/``query``, each (L,)) whose
    query differs from its instance's, None when there is none.

    Compares integer codes, so it costs the same for numpy objects and Arrow strings: each
    instance first takes the query of any one of its ratings, and only when some rating
    differs is the first rating of each instance looked for (the message names it).
    """
    if isinstance(query, pd.Categorical):
        codes, names = query.codes, query.categories  # 1-2 bytes a rating, no hashing
    else:
        codes, names = pd.factorize(query)
    some = np.zeros(n_instances, dtype=codes.dtype)
    some[inst] = codes
    if not np.array_equal(codes, some[inst]):
        first = np.zeros(n_instances, dtype=np.int64)
        first[inst[::-1]] = np.arange(inst.size)[::-1]
        some = codes[first]
        clash = np.flatnonzero(codes != some[inst])
        return np.asarray(names, dtype=object)[some], int(clash[0])
    return np.asarray(names, dtype=object)[some], None


def query_clash(instance: object, query: object, first: object, row: int | None = None) -> str:
    """The message for an instance rated with ``query`` whose first rating had ``first``.

    ``row``: the clashing rating's 0-based data row, when rows mean something to the user (a
    file as read); the Dask engine's shuffled blocks have none.
    """
    if row is None:
        return (
            f"instance {instance!r} has query {query!r} in one row but {first!r} in another; "
            "an instance belongs to one query"
        )
    return (
        f"row {row + 2} (counting the header as row 1): instance {instance!r} has query "
        f"{query!r} here but {first!r} earlier; an instance belongs to one query"
    )
