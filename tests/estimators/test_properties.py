"""Properties that must hold for any valid crowd (hypothesis)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ordmix_core import OrdinalMixture


@st.composite
def crowds(draw):
    k = draw(st.integers(2, 5))
    steps = draw(st.lists(st.floats(0.25, 4.0), min_size=k - 1, max_size=k - 1))
    scale = np.concatenate([[draw(st.floats(-5, 5))], np.cumsum(steps)])
    scale[1:] += scale[0]
    n_items = draw(st.integers(1, 12))
    n_ann = draw(st.integers(1, 6))
    n = draw(st.integers(1, 40))
    items = draw(st.lists(st.integers(0, n_items - 1), min_size=n, max_size=n))
    anns = draw(st.lists(st.integers(0, n_ann - 1), min_size=n, max_size=n))
    levels = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    df = pd.DataFrame(
        {
            "annotator": [f"a{j}" for j in anns],
            "instance": [f"i{i}" for i in items],
            "rating": scale[levels],
            "query": [f"q{i % 3}" for i in items],
        }
    )
    return df, scale


VARIANT = st.sampled_from([(True, True), (True, False), (False, True), (False, False)])
GRAN = st.sampled_from(["instance", "query", "global"])
# tiny random crowds often collapse or stop at max_iter: the warnings are expected here
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
# a fit is up to 2 restarts of 60 sweeps: the default run draws 15 crowds a property, CI's
# ``-m slow`` run 100 more (the ``*_deeper`` twins at the end)
FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEEP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fit(df, scale, gran, variant, seed=0, **kw):
    ordinal, spam = variant
    # the paper's model (the extensions: tests/estimators/test_extensions.py)
    return OrdinalMixture(
        gran,
        model="paper",
        scale=scale,
        ordinal=ordinal,
        spam=spam,
        n_restarts=2,
        max_iter=60,
        random_state=seed,
        **kw,
    ).fit(df)


@FAST
@given(crowds(), GRAN, VARIANT)
def test_estimates_finite_inside_outer_thresholds_and_bound_monotone(crowd, gran, variant):
    df, scale = crowd
    m = _fit(df, scale, gran, variant)
    b = m.scale_.thresholds
    est = m.estimates_.to_numpy()
    assert np.all(np.isfinite(est)) and np.all(np.isfinite(m.sd_))
    assert np.all((est >= b[0] - 1e-9) & (est <= b[-1] + 1e-9))
    for _, f in m.trace_.groupby(["restart", "stage"])["lower_bound"]:
        f = f.to_numpy()
        assert np.all(np.isfinite(f))
        assert np.all(np.diff(f) >= -1e-8 * np.maximum(1.0, np.abs(f[1:])))


@FAST
@given(crowds(), GRAN, VARIANT, st.integers(0, 2**32 - 1))
def test_same_seed_identical_and_row_order_irrelevant(crowd, gran, variant, perm_seed):
    df, scale = crowd
    a = _fit(df, scale, gran, variant, seed=5)
    b = _fit(df, scale, gran, variant, seed=5)
    pd.testing.assert_series_equal(a.estimates_, b.estimates_, check_exact=True)
    pd.testing.assert_frame_equal(a.trace_, b.trace_, check_exact=True)
    shuffled = df.sample(frac=1.0, random_state=np.random.RandomState(perm_seed % 2**32))
    c = _fit(shuffled, scale, gran, variant, seed=5)
    pd.testing.assert_series_equal(
        a.estimates_.sort_index(), c.estimates_.sort_index(), rtol=1e-6, atol=1e-8
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowds(), GRAN, VARIANT, st.sampled_from(["exact", "paper"]))
def test_reported_bound_equals_an_independent_computation(crowd, gran, variant, updates):
    """For any crowd, the F of the fit's last sweep (lower_bound_) equals quadrature of the
    model's terms (tests/_bound_reference.py; test_bound_independent.py covers every sweep
    kind on a fixed crowd)."""
    from _bound_reference import Crowd, lower_bound
    from _sweeps import record_sweeps, to_reference

    df, scale = crowd
    with pytest.MonkeyPatch.context() as mp:
        calls = record_sweeps(mp)
        m = _fit(df, scale, gran, variant, updates=updates)
    final = [c for c in calls if c.bound == m.lower_bound_][-1]
    k = len(scale)
    fixed = {"mu": float(np.mean(scale)), "lam": 0.1, "phi": 10.0, "eta": 5.0, "pi": [1 / k] * k}
    ref_crowd = Crowd.from_frame(df, list(scale), gran)
    q, h = to_reference(ref_crowd, m.data_, final, fixed, ordinal=variant[0])
    assert lower_bound(ref_crowd, q, h) == pytest.approx(m.lower_bound_, abs=1e-6)


@FAST
@given(crowds(), GRAN, VARIANT)
def test_an_alternative_only_with_annotators_still_moving_and_spreads_mark_items(
    crowd, gran, variant
):
    """For any crowd: an alternative exactly when an annotator is still moving (and the fit
    neither stopped nor collapsed); spreads never negative, and an item spread by 0.1 of a
    step or more is unstable. (Crowds this small end with no annotator still moving, so
    they make no alternative: its contents are tested on TREC and a simulated crowd in
    test_reproducible.py and test_dask_engine.py.)"""
    df, scale = crowd
    m = _fit(df, scale, gran, variant)
    moving = m.annotators_["still_moving"].to_numpy()
    made = m.alternative_ is not None
    assert made == (bool(moving.any()) and not m.collapsed_ and not m.interrupted_)
    spread = m.items_["estimate_spread"].to_numpy()
    assert np.all(spread >= 0)
    assert m.items_["unstable"].to_numpy()[spread >= 0.1 * m.scale_.step].all()
    assert np.all(m.annotators_["reliability_spread"].to_numpy() >= 0)


# --- the properties above over more crowds (-m slow)
def deeper(test, *strategies):
    """``test``'s body over ``DEEP``'s crowds, drawn from ``strategies`` (its arguments), in
    ``-m slow``."""

    @pytest.mark.slow
    @DEEP
    @given(st.tuples(*strategies))
    def run(args):
        test.hypothesis.inner_test(*args)

    return run


test_estimates_finite_inside_outer_thresholds_and_bound_monotone_deeper = deeper(
    test_estimates_finite_inside_outer_thresholds_and_bound_monotone, crowds(), GRAN, VARIANT
)
test_same_seed_identical_and_row_order_irrelevant_deeper = deeper(
    test_same_seed_identical_and_row_order_irrelevant,
    crowds(), GRAN, VARIANT, st.integers(0, 2**32 - 1),
)  # fmt: skip
test_an_alternative_only_with_annotators_still_moving_deeper = deeper(
    test_an_alternative_only_with_annotators_still_moving_and_spreads_mark_items,
    crowds(), GRAN, VARIANT,
)  # fmt: skip
