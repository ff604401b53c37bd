"""The local cluster a Dask fit starts when it is given no scheduler, and its end.

Its workers are processes of one thread each, with the memory settings of ``OWN_MEMORY`` and
the allocator settings of ``WORKER_MALLOC``. The fit, the Dask tests and the benchmarks start it
through ``local_cluster``, so all of them measure the cluster a user gets.
"""

from __future__ import annotations

import logging

#: the local cluster's workers neither spill nor pause: the blocks live outside Dask's memory
#: manager (``blocks._REGISTRY``), so there is nothing to spill, and a worker paused past 80% of
#: its limit would leave its blocks' tasks waiting forever (a 10M-rating fit at 2 GiB a
#: worker stalled so); past 95% the nanny still ends the worker, and the fit stops with one line
OWN_MEMORY = {
    "distributed.worker.memory.target": False,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
}

#: glibc's allocator in the local cluster's workers: Dask sets ``MALLOC_TRIM_THRESHOLD_`` to
#: 64 KiB, and any such setting also fixes the mmap threshold at 128 KiB, so every per-rating
#: array of a block (8 MB for a block of 1M ratings) was a fresh mapping whose pages fault in
#: at every sweep: a quarter of a worker's CPU was system time. Arrays of up to 32 MiB
#: (glibc's largest mmap threshold) now come from the heap and are reused, and up to 128 MiB
#: of free heap is kept between sweeps (``docs/benchmarks.md``, "the workers' allocator").
#: pyarrow's allocator (mimalloc) hands the pages it frees back at once rather than after a
#: delay: the shuffle's Arrow buffers, freed and made again partition after partition, held
#: 150 MB more at a worker's loading peak at 10M ratings (Arrow is not used by the sweeps)
WORKER_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": 32 * 2**20,
    "MALLOC_TRIM_THRESHOLD_": 128 * 2**20,
    "MIMALLOC_PURGE_DELAY": 0,
}


def local_cluster(n_workers: int, memory_limit: str | int | None):
    """The local cluster a fit without a scheduler starts (and the benchmarks): ``n_workers``
    processes of one thread, ``memory_limit`` each, with ``OWN_MEMORY`` and
    ``WORKER_MALLOC``, no dashboard and no logs (a bad file gives one InputError)."""
    import dask
    from distributed import LocalCluster

    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ"), **WORKER_MALLOC}
    with dask.config.set({**OWN_MEMORY, "distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        )


def shut_down(client) -> None:
    """Close a client and the cluster it started."""
    cluster = client.cluster
    client.close()
    if cluster is not None:
        cluster.close()
