"""The end of a fit (``learned.py``): its warnings are classes, a collapsed fit gives
``CollapseWarning``, an unfinished one ``ConvergenceWarning``; the class is chosen where the
warning arises (``fit_warnings``), not from its text."""

from __future__ import annotations

import warnings

import pytest

from ordmix_core import CollapseWarning, ConvergenceWarning, OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.errors import SpamWarning
from ordmix_core.estimators.learned import fit_warnings
from ordmix_core.estimators.ordinal_mixture import CollapseWarning as ModelCollapseWarning
from ordmix_core.fit.restarts import RestartRun


def _run(converged: bool) -> RestartRun:
    return RestartRun(0, "data", None, trace=[-12.0, -10.0], converged=converged, done=True)


def test_fit_warnings_carry_their_class():
    assert ModelCollapseWarning is CollapseWarning  # still importable where it was
    assert issubclass(CollapseWarning, UserWarning) and issubclass(ConvergenceWarning, UserWarning)
    assert fit_warnings(_run(True), False, False, 100, 0.1) == []
    (w,) = fit_warnings(_run(True), True, False, 100, 0.1)
    assert w.category is CollapseWarning
    # one message for every front end: the option named as the API, the CLI and the page do
    assert "spam=False, --spam off, or Spam component on the Fit page" in w.message
    (w,) = fit_warnings(_run(False), False, False, 100, 0.1)
    assert w.category is ConvergenceWarning and "max_iter=100" in w.message
    (w,) = fit_warnings(_run(False), False, True, 100, 0.1)
    assert w.category is ConvergenceWarning and "stopped" in w.message


def test_the_convergence_warning_names_only_what_was_measured():
    """Two sweeps: the bound's change is known (2 / 10), no estimate's rate yet; one sweep:
    nothing, said in words, never as nan or inf."""
    (w,) = fit_warnings(_run(False), False, False, 100, 0.1)
    assert w.message.endswith("(last relative change of the bound 0.2, tol 0.1)")
    one = RestartRun(0, "data", None, trace=[-12.0], converged=False, done=True)
    (w,) = fit_warnings(one, False, False, 1, 0.1)
    assert w.message == (
        "the chosen restart did not converge within max_iter=1 sweeps (too few sweeps to "
        "measure a change)"
    )
    assert "nan" not in w.message and "inf" not in w.message


@pytest.fixture(scope="module")
def ratings():
    return simulate_crowd(n_items=60, n_annotators=8, spammer_share=0.3, random_state=4).ratings


def test_fit_that_hits_max_iter_warns_convergence(ratings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = OrdinalMixture(n_restarts=1, max_iter=2, random_state=0).fit(ratings)
    assert not m.converged_
    assert [w.category for w in caught] == [ConvergenceWarning]
    assert [str(w.message) for w in caught] == m.warnings_
    assert caught[0].filename == __file__  # attributed to the caller of fit


def test_stopped_fit_warns_convergence(ratings):
    with pytest.warns(ConvergenceWarning, match="stopped"):
        m = OrdinalMixture(n_restarts=2, random_state=0).fit(ratings, callback=lambda *a: False)
    assert m.interrupted_


def test_collapsed_fit_warns_collapse():
    """A crowd of spammers only: every restart explains (nearly) every rating as spam."""
    spam_only = simulate_crowd(n_items=60, n_annotators=8, spammer_share=1.0, random_state=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = OrdinalMixture(n_restarts=2, random_state=0).fit(spam_only.ratings)
    assert m.collapsed_
    assert [w.category for w in caught][0] == CollapseWarning  # then what the labels say
    assert not [w for w in caught if issubclass(w.category, SpamWarning)]  # said already
    assert str(caught[0].message) == m.warnings_[0]


def test_a_fit_with_gold_gives_no_numpy_warning(tmp_path):
    """Gold items have sd 0 (their value is known): the decisions handle that without a
    division by zero, so ``ordmix fit --gold`` prints no warning."""
    from _cli_helpers import run_cli

    crowd = simulate_crowd(n_items=60, n_annotators=8, spammer_share=0.3, random_state=4)
    crowd.ratings.to_csv(tmp_path / "r.csv", index=False)
    crowd.gold.iloc[:10].to_csv(tmp_path / "gold.csv")
    argv = ["fit", tmp_path / "r.csv", "--gold", tmp_path / "gold.csv", "--out", tmp_path / "o"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rc, err = run_cli([*argv, "--quiet", "--restarts", "2"])[:2]
    assert rc == 0 and not [line for line in err if "warning" in line], err
