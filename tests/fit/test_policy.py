"""The fit's control constants (``policy.py``): each field says why, the derived numbers
follow their fields, and a fit follows the policy it is given."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from ordmix_core import OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.fit import policy
from ordmix_core.fit.policy import DEFAULT, FitPolicy


def test_every_field_says_why() -> None:
    """Each field stands under a ``#:`` comment of its own."""
    lines = inspect.getsource(policy).splitlines()
    cls = next(
        node
        for node in ast.parse("\n".join(lines)).body
        if isinstance(node, ast.ClassDef) and node.name == "FitPolicy"
    )
    fields = [node for node in cls.body if isinstance(node, ast.AnnAssign)]
    assert [f.target.id for f in fields] == [f.name for f in dataclasses.fields(FitPolicy)]
    silent = [f.target.id for f in fields if not lines[f.lineno - 2].lstrip().startswith("#:")]
    assert silent == []


def test_the_derived_numbers_follow_their_fields() -> None:
    p = dataclasses.replace(
        DEFAULT, squarem_every=4, hold_windows=3, window_settle_move=2e-3, escape_floor_share=0.5
    )
    assert p.window == 4  # one SQUAREM cycle
    assert p.min_plain_sweeps == (2 + 3) * 4 - 1
    assert p.moving_min_sweeps == 2 * 4 + 1
    assert p.escape_floor == 1e-3
    assert (DEFAULT.window, DEFAULT.min_plain_sweeps, DEFAULT.moving_min_sweeps) == (3, 17, 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.keep = 3  # type: ignore[misc]


def test_a_fit_follows_the_policy_it_is_given(monkeypatch) -> None:
    """Both estimators fit with ``DEFAULT``; given another ``keep``, successive halving stops
    at that many restarts."""
    from ordmix_core.dask_engine import DaskOrdinalMixture

    assert OrdinalMixture.fit_policy is DEFAULT and DaskOrdinalMixture.fit_policy is DEFAULT
    crowd = simulate_crowd(n_items=80, n_annotators=10, ratings_per_item=4, random_state=4)
    kw = dict(model="paper", n_restarts=6, tol=1e-4, prune_start=3, random_state=0)
    default = OrdinalMixture(**kw).fit(crowd.ratings)
    monkeypatch.setattr(OrdinalMixture, "fit_policy", dataclasses.replace(DEFAULT, keep=3))
    three = OrdinalMixture(**kw).fit(crowd.ratings)
    assert (~default.restarts_["dropped"]).sum() == DEFAULT.keep == 2
    assert (~three.restarts_["dropped"]).sum() == 3
