"""The estimator interface: parameters declared once, listed by ``get_params`` and ``repr``."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from ordmix_core.estimators.base import CrowdEstimator, extends_params
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture


class _Parent(CrowdEstimator):
    def __init__(self, a: int = 1, *, b: str = "x") -> None:
        self.a = a
        self.b = b


class _Child(_Parent):
    @extends_params(_Parent.__init__)
    def __init__(self, *args, c: float = 2.0, **params) -> None:
        super().__init__(*args, **params)
        self.c = c


def test_subclass_declares_only_its_own_parameters() -> None:
    m = _Child(5, b="y", c=3.0)
    assert m.get_params() == {"a": 5, "b": "y", "c": 3.0}
    assert repr(m) == "_Child(a=5, b='y', c=3.0)"
    sig = inspect.signature(_Child)
    assert list(sig.parameters) == ["a", "b", "c"]
    assert sig.parameters["c"].default == 2.0 and sig.parameters["b"].default == "x"
    assert _Child().get_params() == {"a": 1, "b": "x", "c": 2.0}
    with pytest.raises(TypeError):
        _Child(d=1)


def test_extends_params_refuses_a_restated_or_positional_parameter() -> None:
    with pytest.raises(TypeError, match="keyword-only"):

        class _Again(_Parent):
            @extends_params(_Parent.__init__)
            def __init__(self, *args, b: str = "z", **params) -> None:
                super().__init__(*args, **params)

    with pytest.raises(TypeError, match="keyword-only"):

        class _Positional(_Parent):
            @extends_params(_Parent.__init__)
            def __init__(self, d: int = 0, **params) -> None:
                super().__init__(**params)


def test_dask_estimator_lists_every_parameter() -> None:
    from ordmix_core.dask_engine.estimator import DaskOrdinalMixture

    own = ["scheduler", "n_workers", "memory_limit", "n_partitions", "blocksize"]
    own.append("max_local_items")
    d = DaskOrdinalMixture("query", n_restarts=3, n_workers=4)
    params = d.get_params()
    assert list(params) == list(OrdinalMixture().get_params()) + own
    assert params["granularity"] == "query" and params["n_restarts"] == 3
    assert params["n_workers"] == 4 and params["tol"] == OrdinalMixture().tol
    assert repr(d).startswith("DaskOrdinalMixture(granularity='query', scale=None,")


# --- crowd-kit's names and return types
@pytest.fixture(scope="module")
def crowdkit_frame():
    import pandas as pd

    rows = [  # crowd-kit's own column names; t1 is a clear 1, t2 a clear 3, t3 split
        ("w1", "t1", 1), ("w2", "t1", 1), ("w3", "t1", 1), ("w4", "t1", 2),
        ("w1", "t2", 3), ("w2", "t2", 3), ("w3", "t2", 3), ("w4", "t2", 3),
        ("w1", "t3", 2), ("w2", "t3", 2), ("w3", "t3", 1), ("w4", "t3", 3),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["worker", "task", "label"])


#: a fit of ``crowdkit_frame``'s twelve ratings does not converge within the default 1,000
#: sweeps (3-7 s); the shapes and decisions tested on it are a fit's whatever its length, so
#: its fits stop at 100 sweeps
SHORT = {"n_restarts": 2, "max_iter": 100}


@pytest.mark.parametrize("method", ["odm", "dawid-skene", "majority", "mean"])
def test_crowdkit_names_return_crowdkit_types(crowdkit_frame, method) -> None:
    """``fit_predict`` labels (Series by ``task``, named ``agg_label``, the scale's own
    values), ``fit_predict_proba`` tasks x levels summing to 1, ``fit_predict_score`` the
    estimate; the same shapes as crowd-kit's ``DawidSkene``."""
    import numpy as np

    from ordmix_core.evaluation.compare import METHODS

    model = METHODS[method].make(SHORT, np.random.default_rng(0), "instance")
    labels = model.fit_predict(crowdkit_frame)
    assert labels.index.name == "task" and labels.name == "agg_label"
    assert sorted(labels.index) == ["t1", "t2", "t3"]
    assert labels.dtype == np.int64  # written 3, not 3.0
    assert labels["t1"] == 1 and labels["t2"] == 3
    proba = model.fit_predict_proba(crowdkit_frame)
    assert proba.index.name == "task" and list(proba.columns) == [1, 2, 3]
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert (proba.loc[labels.index].idxmax(axis=1) == labels).all() or method == "odm"
    score = model.fit_predict_score(crowdkit_frame)
    assert score.index.name == "instance" and score.name == "estimate"
    assert model.labels_.equals(labels) and model.probas_.equals(proba)


def test_ordinal_mixture_skills_are_worker_reliabilities(crowdkit_frame) -> None:
    m = OrdinalMixture(**SHORT, random_state=0).fit(crowdkit_frame)
    skills = m.skills_
    assert skills.index.name == "worker" and skills.name == "skill"
    assert list(skills.index) == list(m.annotators_.index)
    assert skills.equals(m.annotators_["reliability"].rename("skill").rename_axis("worker"))
    # labels are the decisions' (ties included), probas their p_level_*
    from ordmix_core.results import decisions

    dec = decisions.item_decisions(m)
    assert list(m.labels_) == list(dec["label"])
    assert (m.probas_.to_numpy() == dec.filter(like="p_level_").to_numpy()).all()


def test_labels_and_probas_share_one_computation_of_the_decisions(
    crowdkit_frame, monkeypatch
) -> None:
    """The items' decisions are computed once per fit, when first asked for (the fit itself
    counts its undetermined items from the posterior, not from them): ``labels_`` then
    ``probas_`` (and again) reuse them; a refit computes them again, from the new fit."""
    from ordmix_core.results import decisions

    calls = []
    real = decisions.item_decisions
    monkeypatch.setattr(decisions, "item_decisions", lambda m: calls.append(1) or real(m))
    m = OrdinalMixture(**SHORT, random_state=0).fit(crowdkit_frame)
    assert len(calls) == 0
    first = (m.labels_, m.probas_, m.labels_, m.probas_)
    assert len(calls) == 1
    m.fit(crowdkit_frame.iloc[:8])  # t3 gone: the decisions must be the new fit's
    assert len(calls) == 1
    assert sorted(m.labels_.index) == ["t1", "t2"] and len(calls) == 2
    assert len(calls) == 2 and list(m.probas_.index) == ["t1", "t2"]
    assert len(calls) == 2 and first[0].index.tolist() == ["t1", "t2", "t3"]


# --- a crowd-kit script, unchanged, on ordmix: crowd-kit's shapes written down from its source
def crowdkit_shapes(data):
    """``(labels_, probas_)`` in crowd-kit 1.4.2's shapes (crowd-kit is not a dependency).

    From its source (``crowdkit/aggregation``): ``DawidSkene._e_step`` sums per task with
    ``groupby("task", sort=False)`` (tasks in first-seen order) and sets the columns to
    ``pd.Index(columns, name="label", dtype=data.label.dtype)`` (the input's label type), the
    levels sorted as its ``MajorityVote`` start's ``groupby(["task", "label"])`` sorts them;
    ``utils.get_most_probable_labels`` is ``probas.idxmax(axis="columns")``, and
    ``base.BaseClassificationAggregator.labels_`` is named ``agg_label``. The numbers here are
    a plain vote's: only the shapes are crowd-kit's.
    """
    import pandas as pd

    counts = data.groupby(["task", "label"]).size().unstack("label", fill_value=0)
    counts = counts.reindex(data["task"].drop_duplicates())  # first-seen order
    probas = counts.div(counts.sum(axis=1), axis=0)
    probas.columns = pd.Index(probas.columns, name="label", dtype=data["label"].dtype)
    probas.index.name = "task"
    return probas.idxmax(axis="columns").rename("agg_label"), probas


class _CrowdKitShapes:
    """A stand-in with crowd-kit's interface and shapes (``crowdkit_shapes``)."""

    def fit(self, data):
        self.labels_, self.probas_ = crowdkit_shapes(data)
        return self

    def fit_predict(self, data):
        return self.fit(data).labels_

    def fit_predict_proba(self, data):
        return self.fit(data).probas_


def user_script(aggregator, path):
    """A crowd-kit user's script, as the README reads ratings: every column as text."""
    import pandas as pd

    df = pd.read_csv(path, dtype=str).rename(
        columns={"annotator": "worker", "instance": "task", "rating": "label"}
    )[["worker", "task", "label"]]
    labels = aggregator.fit_predict(df)
    proba = aggregator.fit_predict_proba(df)
    joined = df.join(labels, on="task")
    return {
        "df": df,
        "labels": labels,
        "proba": proba,
        "agree": float((joined["label"] == joined["agg_label"]).mean()),
        "p_first_level": proba[df["label"].min()],  # crowd-kit's proba["1"]
        "first_task_label": labels.iloc[0],  # positional code
    }


SIMULATED = Path(__file__).resolve().parents[2] / "demo_data" / "simulated-ratings.csv"


def test_a_crowdkit_script_runs_unchanged_on_ordmix(tmp_path) -> None:
    """The same script through crowd-kit's shapes and ``OrdinalMixture``: labels in the
    input's type (text), tasks in first-seen order, crowd-kit's names; the labels agree with
    the ratings as often as a vote's do, and ``proba["1"]`` works."""
    import pandas as pd

    path = tmp_path / "ratings.csv"  # the demo's ratings in an order that is not the IDs'
    pd.read_csv(SIMULATED, dtype=str).sample(frac=1.0, random_state=0).to_csv(path, index=False)
    ck = user_script(_CrowdKitShapes(), path)
    om = user_script(OrdinalMixture(n_restarts=2, random_state=0), path)
    df = om["df"]
    first_seen = df["task"].drop_duplicates().tolist()
    assert first_seen != sorted(first_seen)  # the order is a real check here
    for run in (ck, om):
        labels, proba = run["labels"], run["proba"]
        assert labels.dtype == df["label"].dtype and proba.columns.dtype == df["label"].dtype
        assert all(isinstance(x, str) for x in labels)
        assert labels.index.name == "task" and labels.name == "agg_label"
        assert proba.index.name == "task" and proba.columns.name == "label"
        assert labels.index.tolist() == first_seen == proba.index.tolist()
        assert run["first_task_label"] == labels[first_seen[0]]
        assert run["p_first_level"].index.tolist() == first_seen
    assert om["proba"].columns.tolist() == ck["proba"].columns.tolist() == list("12345")
    assert abs(om["agree"] - ck["agree"]) < 0.1 and om["agree"] > 0.5  # not 0: the same type


def test_the_scripts_labels_are_the_most_probable_levels(tmp_path) -> None:
    """crowd-kit's ``labels_`` is ``probas_.idxmax(axis=1)``; ordmix's is too, on the first
    500 tasks of AdultContent2 (favourite-answer spammers, where an override would show: the
    level nearest the posterior mean is another on 113 of them)."""
    import pandas as pd
    from _shared import need_adult

    ratings = pd.read_csv(need_adult() / "ratings.csv", dtype=str)
    keep = ratings["instance"].drop_duplicates().iloc[:500]
    path = tmp_path / "ratings.csv"
    ratings[ratings["instance"].isin(keep)].to_csv(path, index=False)
    for aggregator in (_CrowdKitShapes(), OrdinalMixture(n_restarts=2, random_state=0)):
        run = user_script(aggregator, path)
        assert run["labels"].equals(run["proba"].idxmax(axis=1).rename("agg_label"))
