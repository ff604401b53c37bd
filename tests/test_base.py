"""The estimator interface: parameters declared once, listed by ``get_params`` and ``repr``."""

from __future__ import annotations

import inspect

import pytest

from ordmix_core.base import CrowdEstimator, extends_params
from ordmix_core.model import OrdinalMixture


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
