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
