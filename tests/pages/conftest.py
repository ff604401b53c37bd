"""The page tests' AppTests: the installed packages' component manifests scanned once."""

from __future__ import annotations

import functools

import pytest


@pytest.fixture(autouse=True, scope="session")
def _component_manifests_scanned_once():
    """Every new ``AppTest`` asks streamlit for the installed packages' component manifests,
    which reads every installed distribution's metadata (~0.8 s each time, most of a page
    test's first run); the packages do not change during a test run, so the scan's answer is
    kept from the first one."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a streamlit without v2 components scans nothing
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        scan = functools.cache(manifest_scanner.scan_component_manifests)
        mp.setattr(manifest_scanner, "scan_component_manifests", scan)
        yield


@pytest.fixture(autouse=True, scope="session")
def _demo_data_read_once():
    """Every new ``AppTest`` opens on the default demo (TREC, 91,783 ratings): read and
    validated, about 0.25 s, in every page test since st.cache_data is emptied between tests;
    and the Data page shows its report (``validation_report``). The demo files do not change
    during a test run, so each demo is read once and every later call gets a copy of it, as
    st.cache_data hands out (unpickled from the first read); the report of such a copy is
    computed once per demo and handed out as a copy too. Any other data set (an upload, a
    rescaled demo) gets its own.
    """
    import pickle
    import weakref

    from test_app_main import ui

    from ordmix_core.dashboard import report

    package = ui()
    real_load, real_report = package.layout.load_demo, report.validation_report
    kept: dict[str, bytes] = {}
    reports: dict[str, bytes] = {}
    copies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a demo's copy -> its label

    def load_demo(label: str):
        if label not in kept:
            kept[label] = pickle.dumps(real_load(label))
        ds = pickle.loads(kept[label])
        copies[ds] = label
        return ds

    def validation_report(ds):
        label = copies.get(ds)
        if label is None:
            return real_report(ds)
        if label not in reports:
            reports[label] = pickle.dumps(real_report(ds))
        return pickle.loads(reports[label])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(package.layout, "load_demo", load_demo)
        mp.setattr(package, "load_demo", load_demo)
        mp.setattr(report, "validation_report", validation_report)
        yield
