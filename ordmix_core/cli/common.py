"""What the ``ordmix`` commands share: progress on stderr, warnings printed only after a
command succeeds, and how a folder is named in the closing line.

``cli.py`` (fit), ``cli/compare.py`` (compare, experiment) and ``cli/next.py`` (next) import
this module; it imports none of them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import TextIO

from ..numerics import jit


class Progress:
    """Progress on stderr: a bar updated in place on a terminal, else one line per restart
    (``every_sweep``: one line per sweep, for the Dask engine, whose sweeps take seconds).

    Restarts run in rounds and side by side (threads), so progress is kept per restart.
    """

    #: sweeps a restart of a race typically needs (most are dropped early), for the bar's
    #: estimate ...
    TYPICAL_SWEEPS = 40
    #: ... and a restart that runs alone, every stage to the end (the data start: 151-282 on
    #: the four real sets)
    LONE_SWEEPS = 200

    def __init__(
        self,
        n_restarts: int,
        quiet: bool = False,
        stream: TextIO | None = None,
        every_sweep: bool = False,
    ):
        self.n = n_restarts
        self.quiet = quiet
        self.every_sweep = every_sweep
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.sweeps: dict[int, int] = {}
        self.peak = 0.0
        self.last = 0.0
        self.drawn = False
        self.compile_start: float | None = None  # when numba started compiling, if it did
        self.note = ""
        self.lock = threading.Lock()

    def __call__(self, restart: int, iteration: int, bound: float) -> None:
        if self.quiet:
            return
        with self.lock:
            new = restart not in self.sweeps
            self.sweeps[restart] = self.sweeps.get(restart, 0) + 1
            self.n = max(self.n, len(self.sweeps))  # a scale not known when it was made
            if not self.tty:
                if self.every_sweep:
                    print(
                        f"ordmix: restart {restart}, sweep {self.sweeps[restart]}, "
                        f"lower bound {bound:,.2f}",
                        file=self.stream,
                        flush=True,
                    )
                elif new:
                    print(
                        f"ordmix: restart {restart} started ({len(self.sweeps)} of {self.n})",
                        file=self.stream,
                        flush=True,
                    )
                return
            now = time.monotonic()
            if not new and now - self.last < 0.1:
                return
            self.last = now
            t = self.TYPICAL_SWEEPS if self.n > 1 else self.LONE_SWEEPS
            done = sum(min(s, t) for s in self.sweeps.values()) / (self.n * t)
            self.peak = max(self.peak, min(done, 0.99))
            bar = "#" * int(round(self.peak * 24))
            self.stream.write(
                f"\rordmix: [{bar:<24}] restart {len(self.sweeps)} of {self.n}, "
                f"lower bound {bound:,.2f}\x1b[K"
            )
            self.stream.flush()
            self.drawn = True

    def compiling(self, done: int, total: int, active: bool) -> None:
        """numba compiling the fit's kernels (``jit.compile_progress``): one line, "ordmix:
        compiling (once, about N s)", on a terminal with the seconds so far."""
        if self.quiet:
            return
        with self.lock:
            if self.compile_start is None:
                self.compile_start = time.monotonic()
                self.note = f"ordmix: {jit.compile_note(total)}"
                if not self.tty:
                    print(self.note, file=self.stream, flush=True)
            if self.tty:
                seconds = time.monotonic() - self.compile_start
                self.stream.write(f"\r{self.note}: {seconds:.0f} s\x1b[K")
                self.stream.flush()
                self.drawn = True

    def close(self) -> None:
        """End the bar's line (a terminal only)."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


@contextlib.contextmanager
def collect_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Warnings of the block, kept to print only if the command succeeds (an error is one
    line, nothing else)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def print_warnings(caught: list[warnings.WarningMessage], prefix: str = "warning") -> None:
    """The package's own warnings, each once, as ``ordmix: warning: ...``."""
    seen = set()
    for w in caught:
        if "ordmix_core" not in (w.filename or "") and not str(w.category.__module__).startswith(
            "ordmix_core"
        ):
            continue
        text = " ".join(str(w.message).split())
        if text in seen:
            continue
        seen.add(text)
        kind = "note" if w.category.__name__ == "CompareNote" else prefix
        print(f"ordmix: {kind}: {text}", file=sys.stderr)


#: where every column of the fit's files is explained (the fit's closing line points there)
OUTPUTS_DOC = "docs/outputs.md"


def fit_report(
    model: object, summary: dict, out: str, files: list[str], engine: str = ""
) -> list[str]:
    """The closing lines of ``ordmix fit``: the items' labels and where they come from, the
    annotators' flags and the share of ratings treated as spam, the crowd's agreement
    (Krippendorff's ordinal alpha with its interval), and what was written where, in
    how long (``engine`` named after the time when it is not the in-memory one)."""
    dec = summary.get("decisions", {})
    items, ann = dec.get("items", {}), dec.get("annotators", {})
    lines = [
        f"ordmix: {summary['n_instances']:,} items: {items.get('confident', 0):,} labelled "
        f"confidently, {items.get('uncertain', 0):,} uncertain, "
        f"{items.get('undetermined', 0):,} undetermined (a tie between two levels)"
    ]
    labels = (summary.get("model_choice") or {}).get("labels")
    if isinstance(labels, dict) and "model" in labels:
        why = f": {labels['why']}" if labels.get("why") else ""
        lines.append(f"ordmix: labels from the {labels['model']}{why}")
    from ..results.decisions import truth_share

    spam = f"; {100 * (1.0 - truth_share(model)):.0f}% of the ratings treated as spam"
    if "flags" in ann:
        flags = f"not flagged here ({ann['flags']})"
    else:
        flags = (
            f"{ann.get('unreliable', 0):,} flagged unreliable, {ann.get('ok', 0):,} ok, "
            f"{ann.get('undetermined', 0):,} undetermined (too few ratings, or near the threshold)"
        )
    lines.append(f"ordmix: {summary['n_annotators']:,} annotators: {flags}{spam}")
    if summary.get("agreement") is not None:
        from ..results.agreement import words

        lines.append(f"ordmix: {words(summary['agreement'])}")
    trace = getattr(model, "trace_", None)
    sweeps = f", {len(trace):,} sweeps" if trace is not None else ""
    lines.append(
        f"ordmix: wrote {folder_name(out)} ({', '.join(files)}) in "
        f"{summary.get('seconds', 0.0):.1f} s{engine and f' ({engine})'}{sweeps}; every column: "
        f"{OUTPUTS_DOC}"
    )
    return lines


def folder_name(path: str) -> str:
    """``path`` with one trailing slash, to put file names after it."""
    return path.rstrip("/") + "/"
