"""Shared fixtures and the CI skip guard.

st.cache_data outlives an AppTest, so every test starts with it empty.

Skips: on a developer's machine a test may skip when something it needs is missing (chromium,
the Dask extra, mpmath, the shared data beside the repo); the summary lists each skip with its
reason. When the environment variable ``CI`` is set (CI sets ``CI=true``; ``.ci/run`` sets it
too), a skip is a failure that names the test and the reason: CI cannot go green by skipping.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import streamlit as st

# the helper modules (_cli_helpers, _shared, _sweeps, _bound_reference) sit here, beside the
# folders of tests that mirror ordmix_core's (tests/fit/test_schedule.py, ...); a test module
# may import another's helpers by name (test_app_main's), whichever folder it is in
_HERE = Path(__file__).resolve().parent
for _folder in [
    _HERE,
    *sorted(
        p
        for p in _HERE.iterdir()
        if (p / "__init__.py").exists() is False and p.is_dir() and any(p.glob("test_*.py"))
    ),
]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# the tests compile what they call themselves: the dashboard's background compile of a first
# run (compile_ahead.start_background) would only compete with them for the cores; its own
# tests unset this
os.environ.setdefault("ORDMIX_NO_BACKGROUND_COMPILE", "1")

CI_HINT = (
    "CI runs every test: install what it needs (.ci/run installs chromium and the Dask extra; "
    "the shared data must sit beside the repository as ../shared) or fix the test"
)


def in_ci() -> bool:
    """True when ``CI`` is set to anything but an empty string, 0, false or no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _skip_reason(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_configure(config: pytest.Config) -> None:
    # list every skip with its reason in the summary (pytest shows only failures by default)
    chars = config.option.reportchars or ""
    if "s" not in chars and "a" not in chars and "A" not in chars:
        config.option.reportchars = chars + "s"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CI={os.environ['CI']}: {item.nodeid} was skipped ({reason}). {CI_HINT}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if in_ci() and report.outcome == "skipped":  # e.g. a module-level importorskip
        reason = _skip_reason(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"CI={os.environ['CI']}: every test in {collector.nodeid} was skipped ({reason}). "
            f"{CI_HINT}"
        )
    return report


@pytest.fixture(autouse=True, scope="session")
def _elementwise_kernels_loaded():
    """numba's first load (its registries, 0.3 s) and the elementwise kernels (``libm``,
    ``gamma_functions``: from the on-disk cache, or compiled when it is cold, ~1 s) once
    before any test: a hypothesis test that happened to be first to call them would time
    that, not the function, against its deadline."""
    import numpy as np

    from ordmix_core.numerics import gamma_functions, libm

    x = np.array([0.5, 2.0])
    libm.exp(x)
    gamma_functions.digamma(x)


@pytest.fixture(autouse=True)
def _clear_streamlit_cache():
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def csv_downloads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every CSV the dashboard hands to a download button, in order (``io.to_csv_bytes``,
    which the pages' downloads call, recorded as it returns)."""
    import ordmix_core.io as oio

    written: list[bytes] = []
    real = oio.to_csv_bytes

    def spy(df, id_columns=None) -> bytes:
        written.append(real(df, id_columns))
        return written[-1]

    monkeypatch.setattr(oio, "to_csv_bytes", spy)
    return written
