"""The fused kernel's scalar formulas against scipy and ``truncnorm.py`` (and mpmath where
installed)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import erfcx, expit, xlogy

from ordmix_core.numerics import truncnorm
from ordmix_core.vb import kernels

N_RANDOM = 200_000 if kernels.HAVE_NUMBA else 2_000  # pure Python without numba: keep it small


def _random_intervals(n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-5, 5, n)
    hi = lo + rng.exponential(1.0, n)
    mean = rng.normal(0, 3, n)
    prec = np.exp(rng.normal(0, 2.5, n))
    return lo, hi, mean, prec


def _extreme_intervals() -> tuple[np.ndarray, ...]:
    """Far tails on both sides, huge and tiny precisions, narrow and very wide intervals."""
    rows = []
    for centre in (-1e4, -600.0, -501.0, -40.0, -8.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 8.0, 40.0, 1e4):
        for width in (1e-9, 1e-7, 2e-6, 1e-3, 0.5, 1.0, 3.0, 50.0, 1e4):
            for prec in (1e-12, 1e-4, 1.0, 1e4, 1e8):
                rows.append((centre - width / 2, centre + width / 2, 0.0, prec))
                rows.append((centre, centre + width, 0.3, prec))
    a = np.array(rows)
    return a[:, 0], a[:, 1], a[:, 2], a[:, 3]


def _scaled_errors(lo, hi, mean, prec, ref, got, flat: bool = False) -> dict[str, np.ndarray]:
    """Differences divided by each statistic's natural scale and by truncnorm.py's conditioning.

    Scales (standardised ends A, B; ``big = max(1, A^2, B^2)``): E[x] in sds times
    ``sqrt(big)``; Var[x] as ``big / prec``; log Z as ``max(1, |log Z|)``; the entropy as
    ``max(1, |log Z|, big)`` (its log Z and E[s^2]/2 parts cancel). Conditioning: truncnorm.py's own
    error grows like ``eps * big`` in the tails (exp of a huge log) and ``eps / width`` for
    narrow intervals (a difference of CDFs), and as their product for narrow intervals far in a
    tail, so the tolerance is ``1e-12 + 4e-15 big (1 + 1/width)`` (``flat``: 1e-12).
    """
    sq = np.sqrt(prec)
    a, b = (lo - mean) * sq, (hi - mean) * sq
    big = np.maximum(1.0, np.maximum(a * a, b * b))
    width = (hi - lo) * sq
    scale = {
        "ex": np.sqrt(big) / sq,
        "var": big / prec,
        "log_z": np.maximum(1.0, np.abs(ref.log_z)),
        "entropy": np.maximum(1.0, np.maximum(np.abs(ref.log_z), big)),
    }
    tol = 1e-12 + (0.0 if flat else 4e-15 * big * (1.0 + 1.0 / np.maximum(width, 1e-300)))
    return {f: np.abs(getattr(ref, f) - getattr(got, f)) / scale[f] / tol for f in scale}


def test_erfcx_table_matches_scipy() -> None:
    x = np.concatenate([[0.0], np.geomspace(1e-12, 1e9, 20_001), np.linspace(0, 60, 20_001)])
    got = np.array(
        [kernels.erfcx_pos(v, kernels.ERFCX_TABLE) for v in x[:: 1 if kernels.HAVE_NUMBA else 50]]
    )
    ref = erfcx(x[:: 1 if kernels.HAVE_NUMBA else 50])
    assert np.max(np.abs(got / ref - 1.0)) < 3e-15


def test_the_stored_erfcx_table_is_the_fit_and_cannot_change() -> None:
    """``erfcx_table`` is ``fit_erfcx_table``'s result up to the last bits a CPU's BLAS kernel
    decides, and it is stored so that the kernels read the same bits on every machine:
    read-only, and the fit's own bits unread. The polynomials are compared by their values
    on the pieces ``erfcx_pos`` reads (x <= 50: from piece 7 on), within two ulp: their
    highest coefficients, 1e-15 and below, differ by up to 7e-4 relative between OpenBLAS's
    SkylakeX and Haswell kernels (Prescott, Sandybridge: less)."""
    fresh = kernels.fit_erfcx_table()
    t = np.linspace(-1.0, 1.0, 2001)
    used = slice(int(400.0 / (4.0 + 50.0)), None)

    def values(tab: np.ndarray) -> np.ndarray:
        return np.polynomial.polynomial.polyval(t, tab[used].T)

    np.testing.assert_allclose(values(kernels.ERFCX_TABLE), values(fresh), rtol=5e-16, atol=0)
    assert np.max(np.abs(kernels.ERFCX_TABLE - fresh)) < 1e-15
    assert kernels.TN_CONSTS[0] is kernels.ERFCX_TABLE and not kernels.ERFCX_TABLE.flags.writeable
    assert kernels.ERFCX_TABLE.shape == (100, 7) and kernels.ERFCX_TABLE[0, 0] == float.fromhex(
        "0x1.739ae282f9569p-11"
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_tn_stats_equal_reference_on_random_intervals(seed: int) -> None:
    lo, hi, mean, prec = _random_intervals(N_RANDOM, seed)
    ref = truncnorm.tn_stats(lo, hi, mean, prec)
    got = kernels.tn_stats(lo, hi, mean, prec)
    for f, err in _scaled_errors(lo, hi, mean, prec, ref, got).items():
        assert np.max(err) <= 2.0, f
    # well-conditioned intervals (width >= 0.1 sd, ends within 30 sd): 1e-12 of the natural scale
    sq = np.sqrt(prec)
    good = ((hi - lo) * sq > 0.1) & (np.maximum(np.abs(lo - mean), np.abs(hi - mean)) * sq < 30)
    tol_flat = _scaled_errors(lo, hi, mean, prec, ref, got, flat=True)
    for f, err in tol_flat.items():
        assert np.max(err[good]) <= 1.0, f


@pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba")
def test_tn_stats_over_the_cores_while_alone_is_the_serial_result() -> None:
    """A thread whose sweep runs alone takes the cores from ``CHUNK_RATINGS`` values (the
    settle's rounds); the values are the calling thread's, bit for bit."""
    lo, hi, mean, prec = _random_intervals(kernels.CHUNK_RATINGS + 7, 3)
    serial = kernels.tn_stats(lo, hi, mean, prec)
    calls = []
    try:
        kernels.run_alone(lambda: calls.append(1) or True)
        alone = kernels.tn_stats(lo, hi, mean, prec)
    finally:
        kernels.run_alone(None)
    assert calls  # the check was asked: the parallel copy ran
    for f in serial._fields:
        np.testing.assert_array_equal(getattr(alone, f), getattr(serial, f))


def test_tn_stats_extreme_inputs_finite_and_close() -> None:
    lo, hi, mean, prec = _extreme_intervals()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = kernels.tn_stats(lo, hi, mean, prec)
    for f in got._fields:
        assert np.all(np.isfinite(getattr(got, f))), f
    assert np.all(got.var >= 0)
    assert np.all((got.ex >= lo) & (got.ex <= hi))
    with np.errstate(all="ignore"):
        ref = truncnorm.tn_stats(lo, hi, mean, prec)
    for f, err in _scaled_errors(lo, hi, mean, prec, ref, got).items():
        assert np.max(err) <= 2.0, f


def test_tn_stats_at_least_as_accurate_as_reference_mpmath() -> None:
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    lo, hi, mean, prec = _random_intervals(N_RANDOM, 3)
    ref = truncnorm.tn_stats(lo, hi, mean, prec)
    got = kernels.tn_stats(lo, hi, mean, prec)
    err = _scaled_errors(lo, hi, mean, prec, ref, got)
    worst = np.unique(np.concatenate([np.argsort(-e)[:5] for e in err.values()]))
    xlo, xhi, xmean, xprec = _extreme_intervals()
    cases = [(lo[i], hi[i], mean[i], prec[i]) for i in worst]
    cases += [(xlo[i], xhi[i], xmean[i], xprec[i]) for i in range(0, xlo.size, 37)]
    for c in cases:
        truth = _mp_tn(mp, *c)
        r = truncnorm.tn_stats(*[np.array([v]) for v in c])
        g = kernels.tn_stats(*[np.array([v]) for v in c])
        sq = np.sqrt(c[3])
        big = max(1.0, ((c[0] - c[2]) * sq) ** 2, ((c[1] - c[2]) * sq) ** 2)
        scale = {"ex": np.sqrt(big) / sq, "log_z": max(1.0, abs(truth["log_z"])),
                 "entropy": max(1.0, abs(truth["log_z"]), big), "var": big / c[3]}  # fmt: skip
        width = (c[1] - c[0]) * sq
        tol = 1e-12 + 4e-15 * (big + 1.0 / width)  # the conditioning without truncnorm.py's product
        for f, s in scale.items():
            e_ref = abs(getattr(r, f)[0] - truth[f]) / s
            e_got = abs(getattr(g, f)[0] - truth[f]) / s
            assert e_got <= max(2.0 * e_ref, tol), (f, c, e_got, e_ref)


def _mp_tn(mp, lo: float, hi: float, mean: float, prec: float) -> dict[str, float]:
    lo, hi, mean, prec = (mp.mpf(float(v)) for v in (lo, hi, mean, prec))
    sq = mp.sqrt(prec)
    a, b = (lo - mean) * sq, (hi - mean) * sq
    sign = 1
    if a + b > 0:
        a, b, sign = -b, -a, -1
    z = mp.ncdf(b) - mp.ncdf(a)
    pa, pb = mp.npdf(a) / z, mp.npdf(b) / z
    m = pa - pb
    e2 = 1 + a * pa - b * pb
    return {
        "ex": float(mean + sign * m / sq),
        "var": float((e2 - m * m) / prec),
        "log_z": float(mp.log(z)),
        "entropy": float(mp.log(2 * mp.pi) / 2 - mp.log(sq) + mp.log(z) + e2 / 2),
    }


def test_omega_and_bernoulli_entropy() -> None:
    t = np.concatenate([np.linspace(-50, 50, 2001), [-745.0, -40.0, 0.0, 1e-12, 40.0, 745.0]])
    out = np.array([kernels.omega_vector(v) for v in t])
    om, om1 = expit(t), expit(-t)
    # H = -om log om - (1-om) log(1-om), with log om = -softplus(-t): no 1 - om cancellation
    h = om * np.logaddexp(0.0, -t) + om1 * np.logaddexp(0.0, t)
    mid = np.abs(t) < 30  # the textbook form, to its absolute accuracy
    np.testing.assert_allclose(h[mid], (-xlogy(om, om) - xlogy(om1, om1))[mid], atol=1e-15)
    np.testing.assert_allclose(out[:, 0], om, rtol=1e-14, atol=1e-320)
    np.testing.assert_allclose(out[:, 1], om1, rtol=1e-14, atol=1e-320)
    np.testing.assert_allclose(out[:, 2], h, rtol=1e-13, atol=1e-300)


def test_log1p_fast() -> None:
    x = np.concatenate([-np.geomspace(1e-300, 0.999, 500), np.geomspace(1e-300, 1e10, 500)])
    got = np.array([kernels.log1p_fast(v) for v in x])
    np.testing.assert_allclose(got, np.log1p(x), rtol=4e-16 * 4, atol=0)


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_far_tail_matches_exponential_asymptotics(side: float) -> None:
    """Far in a tail q(x) is exponential with rate |b| sqrt(prec): E[x] ~ end + 1/rate.

    Here truncnorm.py loses ~eps * b^2 in log space (its E[x] is off in the 4th digit at b = 1e4);
    the kernel keeps the asymptotics.
    """
    prec = np.array([1.0, 1e3, 1e6])
    lo, hi = np.full(3, 0.5), np.full(3, 1.5)
    mean = np.full(3, -1e4) if side > 0 else np.full(3, 1e4 + 2.0)
    got = kernels.tn_stats(lo, hi, mean, prec)
    end = lo if side > 0 else hi
    rate = np.abs(end - mean) * prec  # in x units
    # next term of the asymptotics ~1/b^2; E[x] = mean + offset carries eps * |mean|
    assert np.all(np.abs(got.ex - (end + side / rate)) <= 1e-6 / rate + 1e-15 * np.abs(mean))
    np.testing.assert_allclose(got.var, 1.0 / rate**2, rtol=1e-6)
    # entropy 1 - log(rate): a difference of two ~b^2/2 terms, so only ~eps b^2 absolute
    b2 = (np.abs(end - mean) ** 2) * prec
    assert np.all(np.abs(got.entropy - (1.0 - np.log(rate))) <= 1e-3 + 4e-16 * b2)


@pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("temp_usable", [True, False])
def test_import_and_version_without_a_writable_cache(tmp_path, temp_usable: bool) -> None:
    """A read-only install without a home folder: numba cannot cache next to the package nor
    in the user's cache. Importing still works: the kernels are cached in a private
    folder of the temp folder, or, when that is not possible either, compiled in memory.

    (Folders are blocked by a regular file standing where a folder must be made, which stops
    root too, unlike permissions.)
    """
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pkg = tmp_path / "site"
    src = Path(kernels.__file__).resolve().parents[1]  # the package, kernels in its vb/
    shutil.copytree(src, pkg / "ordmix_core", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "ordmix_core" / "vb" / "__pycache__").write_text("not a folder")
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")
    temp = tmp_path / "temp"
    temp.mkdir()
    private = temp / f"ordmix-numba-{os.getuid()}"
    if not temp_usable:
        private.write_text("not a folder")
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "NUMBA_CACHE_DIR")}
    env.update(
        PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(temp),
        XDG_CACHE_HOME=str(blocked / "cache"),
    )  # fmt: skip
    version = subprocess.run(
        [sys.executable, "-m", "ordmix_core.cli.main", "--version"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("ordmix ")
    where = str(pkg)
    code = (
        f"from ordmix_core.vb import kernels; assert kernels.__file__.startswith({where!r}); "
        "print(kernels.CACHE, kernels.CACHE_WHERE); print(kernels.omega_vector(0.0)[0])"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    cache_line, value = run.stdout.splitlines()
    assert float(value) == 0.5  # a compiled kernel runs
    if temp_usable:
        assert cache_line == f"True {private}"
        assert any(private.rglob("*.nbi"))  # and its compiled code was kept there
    else:
        assert cache_line.startswith("False ")


def test_grid_loglik_is_the_per_annotator_sum_of_logaddexp() -> None:
    """The reliability posterior's grid, compiled, against numpy: for every node k and
    annotator n, sum over n's ratings of logaddexp(log(1 - eps), log eps + clip(log r))."""
    rng = np.random.default_rng(4)
    n, g, length, clip = 7, 5, 400, 3.0
    ann = rng.integers(0, n, length).astype(np.int32)
    log_r = rng.normal(0, 3.0, length)  # some beyond the clip
    u = rng.normal(0, 4.0, (g, n))
    log_e, log_1me = -np.logaddexp(0, -u), -np.logaddexp(0, u)
    want = np.stack(
        [
            np.bincount(ann, np.logaddexp(l1[ann], le[ann] + np.clip(log_r, -clip, clip)), n)
            for le, l1 in zip(log_e, log_1me, strict=True)
        ]
    )
    got = kernels.grid_loglik(ann, log_r, clip, log_e, log_1me)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)


def test_passes_hand_the_turn_over_while_they_run():
    """A thread taking turns (``take_turns``) holds its turn lock in Python and lets go of it
    only inside a pass, and has it back afterwards; without a turn the passes are the plain
    compiled functions."""
    import threading

    assert kernels.passes(10, 1) == (
        kernels.pass_xy_serial, kernels.pass_tau_serial, kernels.pass_delta_serial
    )  # fmt: skip
    turn = threading.Lock()
    seen = []

    def fake_pass(x):
        seen.append(turn.locked())
        return x + 1

    turn.acquire()
    kernels.take_turns(turn)
    try:
        wrapped = kernels.passes(10, 1)
        assert all(f not in (kernels.pass_xy_serial, kernels.pass_xy) for f in wrapped)
        assert kernels._taking_turns(fake_pass, turn)(1) == 2
        assert seen == [False] and turn.locked()
        with pytest.raises(ZeroDivisionError):
            kernels._taking_turns(lambda: 1 / 0, turn)()
        assert turn.locked()  # taken back after an error too
    finally:
        kernels.take_turns(None)
        turn.release()
    assert kernels.passes(10, 1)[0] is kernels.pass_xy_serial


@pytest.mark.skipif(not kernels.USE_JIT, reason="numba's error model")
def test_compiled_division_by_zero_is_numpys():
    """``jit.jit`` compiles with numpy's error model: 1/0 is inf, not a ZeroDivisionError (no
    check before every division in the passes)."""
    from ordmix_core.numerics import jit

    def inverse(x):
        return 1.0 / x

    assert jit.jit()(inverse)(0.0) == np.inf


@pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba")
def test_eps_block_compiled_is_the_numpy_one_bit_for_bit():
    """The same sums in the same order and the same Newton steps: identical bits."""
    from scipy.special import expit

    from ordmix_core.vb import updates

    rng = np.random.default_rng(3)
    n, size = 40, 3000
    ann = rng.integers(0, n, size).astype(np.int32)  # annotators n, n + 1: no ratings
    eps_used = np.clip(rng.uniform(0, 1, n + 2) ** rng.choice([0.05, 1, 20], n + 2), 1e-10, 1)
    eps_used = np.minimum(eps_used, 1 - 1e-10)
    omega = expit(np.log(eps_used / (1 - eps_used))[ann] + rng.normal(0, 4, size))
    start = rng.uniform(0, 1, n + 2)
    want = updates.eps_block(ann, omega, eps_used, start)
    groups = kernels.annotator_groups(ann, n + 2)
    threads = kernels.numba.get_num_threads()
    try:
        for n_threads in (1, threads):  # over the cores and on the calling thread
            kernels.numba.set_num_threads(n_threads)
            for alone in (lambda: True, None):
                kernels.run_alone(alone)
                np.testing.assert_array_equal(
                    kernels.eps_block(groups, omega, eps_used, start), want
                )
    finally:
        kernels.numba.set_num_threads(threads)
        kernels.run_alone(None)


def test_eps_block_sums_compiled_are_the_numpy_ones_bit_for_bit():
    """One pass, no temporaries, the same bits as ``updates.eps_block_sums`` of
    ``updates.eps_block_terms`` (what a Dask block adds up each Newton step); annotators
    without ratings sum to zero."""
    from scipy.special import expit

    from ordmix_core.vb import updates

    rng = np.random.default_rng(4)
    n, size = 30, 5000
    ann = rng.integers(0, n, size).astype(np.int32)  # annotators n, n + 1: no ratings
    eps_used = np.clip(rng.uniform(0, 1, n + 2) ** rng.choice([0.05, 1, 20], n + 2), 1e-10, 1)
    omega = expit(np.log(eps_used / (1 - eps_used + 1e-12))[ann] + rng.normal(0, 4, size))
    x = rng.uniform(0, 1, n + 2)
    a, b = updates.eps_block_terms(omega, eps_used[ann])
    want = updates.eps_block_sums(ann, a, b, x, n + 2)
    got = kernels.eps_block_sums(ann, omega, eps_used, x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert got[0][n:].tolist() == [0.0, 0.0] and np.abs(got[0][:n]).sum() > 0


def test_annotator_groups_are_a_stable_sort_by_annotator():
    """Each annotator's ratings in rating order, at ``order[starts[n]:starts[n + 1]]``;
    annotators without ratings get an empty range."""
    ann = np.random.default_rng(5).integers(0, 7, 500).astype(np.int32)
    order, starts = kernels.annotator_groups(ann, 9)
    np.testing.assert_array_equal(order, np.argsort(ann, kind="stable"))
    np.testing.assert_array_equal(np.diff(starts), np.bincount(ann, minlength=9))
    assert starts[0] == 0 and starts[-1] == ann.size
