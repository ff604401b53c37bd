"""The fit's blocks on the cluster, from the client: tasks pinned to each block's worker
(``Blocks``: run a function on every block, broadcast a value to them, tree-reduce their
results) and the watch that stops a fit whose worker left or was paused.

The blocks themselves (their ratings, slots and phases) are ``blocks``' and live on the
workers; the engine's sweeps over them are ``client``'s."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import InputError
from . import blocks

#: broadcast values bigger than this are scattered once instead of sent with every task
_SCATTER_BYTES = 1 << 20

#: fan-in of the tree reductions
FAN_IN = 8

#: how often (seconds) the client checks that every block's worker is still in the cluster
WATCH_SECONDS = 1.0


class Blocks:
    """The fit's blocks on the cluster: tasks pinned to each block's worker, broadcasts and
    tree reductions of their results; ``watch``, the check that their workers stay."""

    def __init__(self, client, fit_id: str) -> None:
        self.client = client
        self.fit_id = fit_id
        self.workers: list = []  # block i lives on workers[i]
        self.lost: str | None = None  # a block's worker that left the cluster (``watch``)
        self.paused = False  # ... or that Dask paused (its memory past the pause threshold)
        self._pending: list = []  # futures of the blocks' tasks not yet done
        self._lock = threading.Lock()

    def _pinned(self, i: int, fn: Callable, *args):
        """``fn(fit_id, i, *args)`` submitted to block ``i``'s worker (and watched)."""
        fut = self.client.submit(
            fn, self.fit_id, i, *args, workers=[self.workers[i]], allow_other_workers=False,
            pure=False,
        )  # fmt: skip
        with self._lock:
            self._pending.append(fut)
        return fut

    def run(self, fn: Callable, *args) -> list:
        """``fn(fit_id, i, *args)`` on every block ``i``, on its worker; the futures."""
        return [self._pinned(i, fn, *args) for i in range(len(self.workers))]

    def run_each(self, fn: Callable, per_block: list[tuple], *args) -> list:
        """``fn(fit_id, i, *per_block[i], *args)`` on every block ``i``: each block its own
        arguments (its annotators' entries, say); the futures."""
        return [self._pinned(i, fn, *own, *args) for i, own in enumerate(per_block)]

    def run_one(self, i: int, fn: Callable, *args):
        """``fn(fit_id, i, *args)`` on block ``i``'s worker; its result. The task's future is
        let go of once the result is here, so the worker drops its copy at once."""
        fut = self._pinned(i, fn, *args)
        out = fut.result()
        with self._lock:
            self._pending = [f for f in self._pending if f is not fut]
        return out

    def gather_each(self, fn: Callable, *args) -> list:
        """``fn(fit_id, i, *args)``'s results of every block ``i``, in block order, one block
        at a time (``run_one``): the workers hold one block's result at a time (the items'
        frames: 130 bytes an item) rather than all of them on top of the blocks."""
        return [self.run_one(i, fn, *args) for i in range(len(self.workers))]

    @contextmanager
    def watch(self) -> Iterator[None]:
        """While the block runs, a thread checks every ``WATCH_SECONDS`` that every block's
        worker is still in the cluster and running: a pinned task of a worker that left, or
        that Dask paused (its memory past ``distributed.worker.memory.pause``: the blocks are
        not Dask's data, so nothing it can spill frees them), would wait for it forever.
        When one has left or is paused (``lost``, ``paused``), the blocks' pending tasks are
        cancelled, so that whatever waits on them raises (``DaskOrdinalMixture.fit``:
        ``ClusterError``)."""
        stop = threading.Event()

        def check() -> None:
            while not stop.wait(WATCH_SECONDS):
                try:  # the scheduler's answer itself: ``scheduler_info()`` returns the
                    # client's cached identity, which its periodic refresh may replace at
                    # any moment with one that lists no workers (every worker "gone")
                    info = self.client.sync(self.client.scheduler.identity, n_workers=-1)
                    present = info["workers"]
                except Exception:  # noqa: BLE001 - the client closing: nothing to watch
                    return
                gone = [w for w in self.workers if w not in present]
                paused = [w for w in self.workers if present.get(w, {}).get("status") == "paused"]
                if paused and not gone:
                    gone, self.paused = paused, True
                with self._lock:
                    self._pending = [f for f in self._pending if not f.done()]
                    pending = list(self._pending)
                if gone:
                    self.lost = gone[0]
                    self.client.cancel(pending, force=True)
                    return

        thread = threading.Thread(target=check, name="ordmix-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def loss(self) -> str:
        """The message of a fit stopped by ``watch``: the worker ``lost``, left or paused."""
        if self.paused:
            return (
                f"the Dask worker {self.lost} paused during the fit, its memory past the "
                "cluster's pause threshold (distributed.worker.memory.pause), and its blocks "
                "of ratings cannot be spilled; the fit stopped and nothing was written: give "
                "the workers more memory or the fit more workers, or start them with that "
                "threshold off"
            )
        return (
            f"the Dask worker {self.lost} left the cluster during the fit (killed, or out of "
            "memory) and took its blocks of ratings with it; the fit stopped and nothing "
            "was written: run it again (if a worker ran out of memory, give the workers "
            "more memory or the fit more workers)"
        )

    def send(self, value):
        """``value`` for every block: boxed (``blocks.Factors`` as is), scattered once when big."""
        box = value if isinstance(value, blocks.Factors) else blocks.Box(value)
        size = sum(getattr(a, "nbytes", 0) for a in _arrays(value))
        if size > _SCATTER_BYTES:
            return self.client.scatter(box, broadcast=True, hash=False)
        return box

    def reduce(self, futs: list, combine: Callable = blocks.add_sums):
        """``tree_reduce`` of the futures' results."""
        return tree_reduce(self.client, futs, combine)


def _arrays(value) -> list:
    if isinstance(value, blocks.Factors):
        return [*value.ann, *(value.cat or ())]
    return [value]


def empty_frame(frame):
    """A block's frame without its rows (Dask's meta: its columns and their types)."""
    return frame.iloc[:0]


def add_arrays(*parts: np.ndarray) -> np.ndarray:
    """The blocks' arrays added, in their order (a reduction's ``combine``)."""
    acc = parts[0].copy()
    for a in parts[1:]:
        acc += a
    return acc


def tree_reduce(client, futs: list, combine: Callable = blocks.add_sums):
    """Combine the futures' results ``FAN_IN`` at a time on the workers; the result, local."""
    futs = list(futs)
    if not futs:
        raise InputError("no ratings (the input has no rows)")
    if len(futs) <= FAN_IN:  # one level: combining on the client saves a round trip
        return combine(*client.gather(futs))
    while len(futs) > 1:
        futs = [
            client.submit(combine, *futs[i : i + FAN_IN], pure=False)
            for i in range(0, len(futs), FAN_IN)
        ]
    return futs[0].result()
