import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.stats import norm, truncnorm

from ordmix_core.tn import log_diff_ndtr, tn_stats


def _reference(lo, hi, mean, prec):
    sd = 1 / np.sqrt(prec)
    d = truncnorm((lo - mean) / sd, (hi - mean) / sd, loc=mean, scale=sd)
    pdf = d.pdf
    ent = quad(lambda x: -pdf(x) * np.log(pdf(x)) if pdf(x) > 0 else 0.0, lo, hi, limit=200)[0]
    return d.mean(), d.var(), ent


@pytest.mark.parametrize(
    "lo,hi,mean,prec",
    [(0.5, 1.5, 1.2, 1.0), (1.5, 2.5, 0.3, 4.0), (2.5, 3.5, 4.0, 0.2), (-1.0, 0.0, 0.5, 9.0)],
)
def test_matches_scipy_and_quadrature(lo, hi, mean, prec):
    s = tn_stats(*(np.array([v], dtype=float) for v in (lo, hi, mean, prec)))
    ex, var, ent = _reference(lo, hi, mean, prec)
    assert s.ex[0] == pytest.approx(ex, rel=1e-10)
    assert s.var[0] == pytest.approx(var, rel=1e-8)
    assert s.entropy[0] == pytest.approx(ent, abs=1e-7)
    z = norm.cdf((hi - mean) * np.sqrt(prec)) - norm.cdf((lo - mean) * np.sqrt(prec))
    assert s.log_z[0] == pytest.approx(np.log(z), rel=1e-10)


def test_far_tails_finite_and_inside_interval():
    lo = np.array([0.5, 4.5, 0.5, 2.5, 0.5])
    hi = lo + 1.0
    mean = np.array([5.0, 1.0, 1.0, 2.0, 3.0])
    prec = np.array([1e4, 1e6, 1e-12, 1e-300, 1e5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = tn_stats(lo, hi, mean, prec)
    for arr in s:
        assert np.all(np.isfinite(arr))
    assert np.all((s.ex >= lo) & (s.ex <= hi))
    assert np.all(s.var >= 0) and np.all(s.var <= 1 / 12 + 1e-15)
    # deep in the lower tail the mass sits at the upper end with variance ~ 1/(rate^2 prec)
    assert s.ex[0] == pytest.approx(1.5, abs=1e-3)
    rate = (5.0 - 1.5) * 100.0
    assert s.var[0] == pytest.approx(1 / rate**2 / 1e4, rel=1e-3)


def test_log_diff_ndtr_precise_far_out():
    # Phi(-39) - Phi(-40): both tiny; the difference is essentially Phi(-39)
    v = log_diff_ndtr(np.array([-40.0]), np.array([-39.0]))
    assert v[0] == pytest.approx(norm.logcdf(-39.0), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    lo=st.floats(-50, 50),
    width=st.floats(1e-9, 20),
    mean=st.floats(-100, 100),
    log_prec=st.floats(-20, 12),
)
def test_any_interval_gives_finite_moments_inside(lo, width, mean, log_prec):
    hi = lo + width
    s = tn_stats(np.array([lo]), np.array([hi]), np.array([mean]), np.array([np.exp(log_prec)]))
    assert all(np.isfinite(a[0]) for a in s)
    assert lo - 1e-9 * (1 + abs(lo)) <= s.ex[0] <= hi + 1e-9 * (1 + abs(hi))
    # standardising a 1e-9 wide interval far from the mean costs ~1e-5 relative precision
    assert 0 <= s.var[0] <= (hi - lo) ** 2 / 12 * (1 + 1e-4)


def test_far_tail_threshold_is_where_the_exponential_becomes_more_accurate(monkeypatch):
    """``FAR_TAIL``: below it e2 - m^2 gives Var[x] more precisely than the exponential tail,
    above it less (measured against mpmath; a unit-width interval, the worst case)."""
    mp = pytest.importorskip("mpmath")
    from ordmix_core import tn

    mp.mp.dps = 60

    def var_error(b: float, far: float) -> float:
        a = mp.mpf(b) - 1
        z = (mp.erfc(-mp.mpf(b) / mp.sqrt(2)) - mp.erfc(-a / mp.sqrt(2))) / 2
        pa, pb = mp.npdf(a) / z, mp.npdf(b) / z
        truth = 1 + a * pa - b * pb - (pa - pb) ** 2
        monkeypatch.setattr(tn, "FAR_TAIL", far)
        with np.errstate(all="ignore"):
            got = tn.tn_stats(np.array([b - 1.0]), np.array([b]), np.zeros(1), np.ones(1)).var[0]
        return abs(got - float(truth)) / float(truth)

    far = tn.FAR_TAIL
    generic, exponential = np.inf, 0.0  # a threshold that never / always takes the tail branch
    for b in (-0.7 * far, -0.9 * far):
        assert var_error(b, generic) < var_error(b, exponential)
    for b in (-1.3 * far, -2.0 * far):
        assert var_error(b, exponential) < var_error(b, generic)
