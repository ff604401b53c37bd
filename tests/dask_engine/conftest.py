"""The Dask engine's tests' cluster: one local cluster of 2 worker processes per test module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    """A client of the local cluster a fit without a scheduler starts (2 single-threaded worker
    processes, ``cluster.local_cluster``), shared by a module's tests."""
    pytest.importorskip("distributed")
    from distributed import Client

    from ordmix_core.dask_engine.cluster import local_cluster

    with local_cluster(2, "auto") as cluster, Client(cluster) as c:
        yield c
