"""The label fit on a thread of its own, beside the race (the in-memory engine).

The label model reads the ratings alone, never the continuous fit (``labels.choose``), so on
a machine with a second core it need not wait for the race: ``start`` runs it while the race
sweeps and ``LabelThread.result`` hands its answer over after the race. The race and the
label model's compiled passes let go of the interpreter's lock while they run, so each
thread's Python runs during the other's passes. The answer is the same bits either way: the
label fit is the same calls on the same arrays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..numerics import jit
from . import compile_ahead

#: the most ratings whose label fit runs beside the race: its arrays (the ratings grouped
#: twice, the items' posteriors, about 60 bytes a rating) then add to the race's peak instead
#: of following it, and the 10M-rating fit's peak is held to its memory target; where the
#: fit is seconds (TREC, adult-content2, a 1M crowd) the label fit is a fifth of it
MAX_RATINGS = 2_000_000


class LabelThread:
    """``fn()`` on a daemon thread (a stopped fit does not wait for it); ``result`` waits for
    it and returns its value or raises its exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._out: dict[str, Any] = {}

        def run() -> None:
            try:
                self._out["value"] = fn()
            except BaseException as err:  # noqa: BLE001 - raised again by ``result``
                self._out["error"] = err

        self._thread = threading.Thread(target=run, name="ordmix-labels", daemon=True)
        self._thread.start()

    def result(self) -> Any:
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


def start(fn: Callable[[], Any], n_ratings: int) -> LabelThread | None:
    """``fn`` (the label fit) started beside the race, or None (it runs after the race): over
    ``MAX_RATINGS`` ratings, on one core, without compiled code, or while a label kernel is
    still to compile (``compile_ahead`` compiles those in another process meanwhile; compiled
    here, they would hold the race up)."""
    if n_ratings > MAX_RATINGS or not jit.USE_JIT or jit.cores() < 2:
        return None
    if compile_ahead.pending_label_kernels():
        return None
    return LabelThread(fn)
