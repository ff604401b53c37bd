"""label_thread: the label fit beside the race gives the same labels as after it."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pandas as pd
import pytest

from ordmix_core import OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators import compile_ahead, label_thread
from ordmix_core.numerics import jit


def test_the_result_is_the_calls_value_made_on_another_thread():
    names = []

    def fn():
        names.append(threading.current_thread().name)
        return 41 + 1

    assert label_thread.LabelThread(fn).result() == 42
    assert names == ["ordmix-labels"]


def test_the_calls_exception_is_raised_by_result():
    def fn():
        raise ValueError("from the label fit")

    thread = label_thread.LabelThread(fn)
    with pytest.raises(ValueError, match="from the label fit"):
        thread.result()


@pytest.fixture
def can_start(monkeypatch):
    monkeypatch.setattr(jit, "USE_JIT", True)
    monkeypatch.setattr(jit, "cores", lambda: 2)
    monkeypatch.setattr(compile_ahead, "pending_label_kernels", lambda: [])


def test_started_up_to_max_ratings_on_two_cores_with_compiled_kernels(can_start):
    started = label_thread.start(lambda: "labels", label_thread.MAX_RATINGS)
    assert started is not None and started.result() == "labels"


@pytest.mark.parametrize("case", ["too many ratings", "one core", "no compiled code", "pending"])
def test_not_started(can_start, monkeypatch, case):
    n = label_thread.MAX_RATINGS + (case == "too many ratings")
    if case == "one core":
        monkeypatch.setattr(jit, "cores", lambda: 1)
    if case == "no compiled code":
        monkeypatch.setattr(jit, "USE_JIT", False)
    if case == "pending":  # compiled here, the label kernels would hold the race up
        monkeypatch.setattr(compile_ahead, "pending_label_kernels", lambda: ["a kernel"])
    assert label_thread.start(lambda: "labels", n) is None


START, MAX_RATINGS = label_thread.start, label_thread.MAX_RATINGS


def _fit(ratings: pd.DataFrame, monkeypatch, beside: bool) -> tuple[OrdinalMixture, list]:
    started = []

    def spy(fn, n):
        thread = START(fn, n)
        started.append(thread is not None)
        return thread

    monkeypatch.setattr(label_thread, "start", spy)
    monkeypatch.setattr(label_thread, "MAX_RATINGS", MAX_RATINGS if beside else 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OrdinalMixture(random_state=0, n_restarts=2).fit(ratings)
    return model, started


def test_the_labels_beside_the_race_are_the_labels_after_it(can_start, monkeypatch):
    crowd = simulate_crowd(n_items=150, n_annotators=15, random_state=4)
    after, started_after = _fit(crowd.ratings, monkeypatch, beside=False)
    beside, started_beside = _fit(crowd.ratings, monkeypatch, beside=True)
    assert started_after == [False] and started_beside == [True]
    pd.testing.assert_frame_equal(beside.items_, after.items_)
    pd.testing.assert_frame_equal(beside.annotators_, after.annotators_)
    np.testing.assert_array_equal(
        beside.label_result_.posterior.proba, after.label_result_.posterior.proba
    )


def test_a_fit_whose_labels_are_continuous_starts_no_thread(can_start, monkeypatch):
    crowd = simulate_crowd(n_items=80, n_annotators=10, random_state=5)
    called = []
    monkeypatch.setattr(label_thread, "start", lambda fn, n: called.append(n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OrdinalMixture(random_state=0, model="paper", n_restarts=1).fit(crowd.ratings)
    assert called == []
