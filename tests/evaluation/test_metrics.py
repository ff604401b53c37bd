"""Metrics: hand-computed values, tie handling, alignment and the notes' TREC figures."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.errors import InputError
from ordmix_core.evaluation import metrics
from ordmix_core.evaluation.metrics import evaluate, mse, ndcg, pearson

TREC = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "trec-rf10"
D2 = 1 / math.log2(3)  # discount of rank 2
D3 = 1 / math.log2(4)  # discount of rank 3 (= 0.5)


def brute_ndcg_one_query(est, truth) -> float:
    """Mean over every tie-breaking order of the plain NDCG (the definition ties must match)."""
    est, truth = np.asarray(est, float), np.asarray(truth, float)
    gain = 2.0**truth - 1
    disc = 1 / np.log2(np.arange(2, est.size + 2))
    ideal = np.sum(np.sort(gain)[::-1] * disc)
    vals = []
    for perm in itertools.permutations(range(est.size)):
        perm = np.array(perm)
        order = perm[np.argsort(-est[perm], kind="stable")]
        vals.append(np.sum(gain[order] * disc) / ideal)
    return float(np.mean(vals))


def test_mse_and_pearson_by_hand():
    assert mse([1, 2, 3], [1, 2, 5]) == pytest.approx(4 / 3)
    assert pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson([2, 2, 2], [1, 2, 3]))
    with pytest.raises(InputError):
        mse([1, 2], [1, 2, 3])


def test_ndcg_perfect_and_reversed_by_hand():
    assert ndcg([3, 2, 1], [3, 2, 1]) == pytest.approx(1.0)
    assert ndcg([0.9, 0.5, 0.1], [3, 2, 1]) == pytest.approx(1.0)  # only the order matters
    # reversed, truth (2, 1): gains 3, 1 -> DCG 1 + 3 * D2, ideal 3 + D2
    assert ndcg([1, 2], [2, 1]) == pytest.approx((1 + 3 * D2) / (3 + D2))


def test_ndcg_ties_share_mean_discount_by_hand():
    # both tied: each gets (1 + D2) / 2
    assert ndcg([5, 5], [2, 1]) == pytest.approx(4 * (1 + D2) / 2 / (3 + D2))
    # first alone at rank 1, the two tied share ranks 2 and 3
    est, truth = [9, 4, 4], [1, 3, 2]
    dcg = 1 * 1 + (7 + 3) * (D2 + D3) / 2
    ideal = 7 + 3 * D2 + 1 * D3
    assert ndcg(est, truth) == pytest.approx(dcg / ideal)
    assert ndcg(est, truth) == pytest.approx(brute_ndcg_one_query(est, truth))


def test_ndcg_float_noise_does_not_split_ties():
    noisy = 0.1 * 3  # 0.30000000000000004
    truth = [1, 2]
    assert noisy != 0.3
    assert ndcg([0.3, noisy], truth) == pytest.approx(ndcg([0.3, 0.3], truth), abs=1e-12)
    assert ndcg([0.3, noisy], truth) < 0.9
    assert ndcg([2.0, 2.0 + 1e-15], truth) == ndcg([2.0 + 1e-15, 2.0], truth)
    assert ndcg([2.0, 2.0 + 1e-11], truth) == pytest.approx(1.0)  # a real difference ranks


def test_ndcg_mean_over_queries_skips_zero_ideal():
    est = np.array([1, 2, 3, 4, 5.0])
    truth = np.array([2, 1, 0, 0, 0.0])
    query = np.array(["a", "a", "b", "b", "b"])
    # query b has ideal DCG 0 (all gains 0) and is left out; query a is reversed
    assert ndcg(est, truth, query) == pytest.approx((1 + 3 * D2) / (3 + D2))
    assert math.isnan(ndcg([1, 2], [0, 0]))
    # two queries averaged with equal weight, not pooled
    est2 = np.array([2, 1, 1, 2.0, 0.5])
    truth2 = np.array([2, 1, 2, 1, 1.0])
    q2 = np.array(["a", "a", "b", "b", "b"])
    want = (1.0 + brute_ndcg_one_query(est2[2:], truth2[2:])) / 2
    assert ndcg(est2, truth2, q2) == pytest.approx(want)
    assert ndcg(est2, truth2, None) != pytest.approx(want)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_ndcg_is_the_average_over_tie_orders_and_order_invariant(pairs, rnd):
    est = np.array([p[0] for p in pairs], float)  # few distinct values: many ties
    truth = np.array([p[1] for p in pairs], float)
    if np.all(truth == 0):
        assert math.isnan(ndcg(est, truth))
        return
    got = ndcg(est, truth)
    assert got == pytest.approx(brute_ndcg_one_query(est, truth))
    perm = list(range(est.size))
    rnd.shuffle(perm)
    assert ndcg(est[perm], truth[perm]) == pytest.approx(got, abs=1e-12)
    assert 0 < got <= 1 + 1e-12


def test_ndcg_query_order_invariant_with_many_queries():
    rng = np.random.default_rng(3)
    n = 400
    est = rng.integers(1, 4, n).astype(float)  # heavy ties
    truth = rng.integers(1, 4, n).astype(float)
    query = rng.integers(0, 30, n).astype(str)
    base = ndcg(est, truth, query)
    for _ in range(3):
        p = rng.permutation(n)
        assert ndcg(est[p], truth[p], query[p]) == pytest.approx(base, abs=1e-12)
    assert ndcg(truth, truth, query) == pytest.approx(1.0)


def test_evaluate_aligns_on_instance_ids():
    est = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "x": 9.0})  # x has no gold
    gold = pd.Series({"c": 3, "b": 1, "a": 2, "y": 1})  # y has no estimate
    queries = pd.Series({"a": "q1", "b": "q1", "c": "q2", "x": "q2"})
    out = evaluate(est, gold, queries)
    assert out["n_gold"] == 3
    assert out["mse"] == pytest.approx((1 + 1 + 0) / 3)
    assert out["correlation"] == pytest.approx(pearson([1, 2, 3], [2, 1, 3]))
    # q1 reversed (truth 2, 1 ranked 1, 2 -> reversed), q2 a single item = 1
    assert out["ndcg"] == pytest.approx(((1 + 3 * D2) / (3 + D2) + 1) / 2)
    frame = pd.DataFrame({"instance": ["a", "b", "c"], "truth": [2, 1, 3]})
    assert evaluate(est, frame, queries) == out
    # without queries all gold items form one query
    assert evaluate(est, gold)["ndcg"] == pytest.approx(ndcg([1, 2, 3], [2, 1, 3]))


def test_evaluate_errors_name_the_fix():
    est = pd.Series({"a": 1.0, "b": 2.0})
    with pytest.raises(InputError, match="no instance has both"):
        evaluate(est, pd.Series({"z": 1}))
    with pytest.raises(InputError, match="have no query"):
        evaluate(est, pd.Series({"a": 1, "b": 2}), pd.Series({"a": "q"}))
    with pytest.raises(InputError, match="more than once"):
        evaluate(est, pd.Series([1, 2], index=["a", "a"]))
    with pytest.raises(InputError, match="not a number"):
        evaluate(est, pd.Series({"a": "high", "b": 2}))
    with pytest.raises(InputError, match="columns instance, truth"):
        evaluate(est, pd.DataFrame({"id": ["a"], "truth": [1]}))


@pytest.mark.slow
@pytest.mark.skipif(not TREC.exists(), reason=f"shared TREC RF10 data not found at {TREC}")
def test_mean_on_trec_matches_model_notes():
    ratings = pd.read_csv(TREC / "ratings.csv", dtype=str)
    gold = pd.read_csv(TREC / "gold.csv", dtype={"instance": str})
    vals = ratings["rating"].astype(float)
    est = vals.groupby(ratings["instance"]).mean()
    queries = ratings.groupby("instance")["query"].first()
    out = evaluate(est, gold, queries)
    assert out["n_gold"] == 3275
    assert out["mse"] == pytest.approx(0.6495, abs=1e-4)  # notes: 0.650
    assert out["correlation"] == pytest.approx(0.3591, abs=1e-4)  # notes: 0.359
    # tie-aware 0.8627; notes give 0.862 (truncated); input-order tie breaking would move it
    assert out["ndcg"] == pytest.approx(0.8627, abs=1e-4)


def test_calibration_error_is_the_binned_gap_between_accuracy_and_confidence():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=500)
    t = rng.integers(0, 4, 500)
    conf, hit = p.max(1), p.argmax(1) == t
    b = np.minimum((conf * 10).astype(int), 9)
    ref = sum(
        (b == i).mean() * abs(hit[b == i].mean() - conf[b == i].mean())
        for i in range(10)
        if (b == i).any()
    )
    assert metrics.calibration_error(p, t) == pytest.approx(ref, rel=1e-12)
    # labels that are always right with confidence 1: no calibration error
    assert metrics.calibration_error(np.eye(4)[t], t) == 0.0


def test_log_loss_of_the_gold_level():
    p = np.array([[0.5, 0.5, 0.0], [0.1, 0.2, 0.7]])
    t = np.array([2, 2])
    expected = -(np.log(metrics.LOG_LOSS_FLOOR) + np.log(0.7)) / 2
    assert metrics.log_loss(p, t) == pytest.approx(expected)


def test_the_shipped_labels_are_scored_when_given() -> None:
    """``labels`` (a clear majority, say) are scored, not ``proba``'s most probable level."""
    import pandas as pd

    from ordmix_core.evaluation.metrics import evaluate

    idx = pd.Index(["a", "b", "c", "d"])
    gold = pd.Series([1.0, 2.0, 3.0, 1.0], index=idx)
    est = pd.Series([1.0, 2.0, 3.0, 2.0], index=idx)
    proba = pd.DataFrame(np.eye(3)[[0, 1, 2, 1]], index=idx, columns=[1, 2, 3])
    assert evaluate(est, gold, levels=np.array([1.0, 2.0, 3.0]), proba=proba)["label_error"] == 0.25
    shipped = pd.Series([1, 2, 3, 1], index=idx)
    scores = evaluate(est, gold, levels=np.array([1.0, 2.0, 3.0]), proba=proba, labels=shipped)
    assert scores["label_error"] == 0.0 and scores["log_loss"] > 1.0  # proba still scored
