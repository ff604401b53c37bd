"""The Dask engine's tests' cluster: one local cluster of 2 worker processes per test module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    """A client of a local cluster of 2 single-threaded worker processes (the default engine's
    shape), shared by a module's tests."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c
