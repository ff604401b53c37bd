"""Each instance's query: one per instance, the first contradicting rating found."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ordmix_core.data.queries import instance_queries, query_clash


def _reference(inst: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, int | None]:
    """The obvious loop: the first query seen per instance, the first row that disagrees."""
    first: dict[int, object] = {}
    clash = None
    for row, (m, query) in enumerate(zip(inst, q, strict=True)):
        first.setdefault(m, query)
        if clash is None and first[m] != query:
            clash = row
    return np.array([first[m] for m in range(len(first))], dtype=object), clash


@pytest.mark.parametrize("kind", ["numpy", "arrow", "categorical"])
def test_instance_queries_equal_a_plain_loop(kind: str) -> None:
    """Queries as objects, Arrow strings or a Categorical (``io.read_ratings``' coded column,
    with an unused category)."""
    rng = np.random.default_rng(0)
    for _ in range(100):
        n_inst = int(rng.integers(1, 8))
        inst = np.concatenate([np.arange(n_inst), rng.integers(0, n_inst, 30)])
        rng.shuffle(inst)
        q_of = rng.integers(0, 3, n_inst)
        q = np.array([f"q{q_of[m]}" for m in inst], dtype=object)
        if rng.random() < 0.5:
            q[rng.integers(0, q.size)] = "other"
        ref, ref_row = _reference(inst, q)
        given = {
            "numpy": q,
            "arrow": pd.array(q, dtype="string"),
            "categorical": pd.Categorical(q, categories=["unused", *sorted(set(q))]),
        }[kind]
        got, row = instance_queries(inst, given, n_inst)
        assert got.dtype == object and list(got) == list(ref)
        assert row == ref_row


def test_query_clash_message() -> None:
    assert query_clash("i1", "q2", "q1") == (
        "instance 'i1' has query 'q2' in one row but 'q1' in another; "
        "an instance belongs to one query"
    )
    msg = query_clash("i1", "q2", "q1", row=3)
    assert msg.startswith("row 5 (counting the header as row 1): instance 'i1' has query 'q2'")
