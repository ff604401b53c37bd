"""The ``ordmix`` command line: ``ordmix fit``, ``ordmix compare``, ``ordmix experiment``.

A user's mistake prints one line ``ordmix: error: ...`` naming the file, row or column and the
fix, exits 2 and writes nothing; Ctrl-C exits 130 and leaves earlier output intact.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Sequence

from . import __version__
from .errors import InputError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for bad files
        self.print_usage(sys.stderr)
        raise SystemExit(f"ordmix: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ordmix", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"ordmix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    fit = sub.add_parser("fit", help="fit the ordinal-discrete-mixture and write the results")
    fit.add_argument("ratings", help="CSV, TSV or Parquet: annotator, instance, rating[, query]")
    fit.add_argument("--out", required=True, help="output folder (replaced atomically)")
    add_model_options(fit)
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fit.add_argument(
        "--engine",
        choices=["memory", "dask"],
        default="memory",
        help="memory (default) or dask: partitioned, out of core, on a Dask cluster",
    )
    fit.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: join this dask.distributed scheduler (default: a local cluster)",
    )
    fit.set_defaults(func=cmd_fit)

    try:  # the comparison commands (baselines, metrics, experiments)
        from .cli_compare import add_subcommands
    except ImportError:  # pragma: no cover - only while that module is absent
        pass
    else:
        add_subcommands(sub, add_model_options)
    return parser


def add_model_options(p: argparse.ArgumentParser, fit_only: bool = True) -> None:
    """Options shared by every command that fits the model."""
    p.add_argument(
        "--granularity",
        choices=["instance", "query", "global"],
        default="instance",
        help="category of instance difficulty (query needs a query column)",
    )
    p.add_argument("--scale", help="the ordinal scale, e.g. 1,2,3,4,5 (default: values seen)")
    p.add_argument("--restarts", type=_positive_int, default=10, help="restarts (default 10)")
    p.add_argument("--seed", type=int, default=None, help="random seed")
    if not fit_only:
        return
    p.add_argument("--max-iter", type=_positive_int, default=1000, help="iteration cap per restart")
    p.add_argument("--tol", type=float, default=0.1, help="stop when |change of bound| < tol")
    p.add_argument("--no-spam", action="store_true", help="drop the spam component")
    p.add_argument(
        "--real-valued", action="store_true", help="real-valued likelihood, no ordinal mapping"
    )
    p.add_argument(
        "--paper-updates", action="store_true", help="the paper's literal eq. (4) for q(y)"
    )


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


class Progress:
    """Progress on stderr: one line per restart start, then at most one update a second."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.last = 0.0
        self.restart = -1

    def __call__(self, restart: int, iteration: int, bound: float) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if restart != self.restart or now - self.last >= 1.0:
            self.restart, self.last = restart, now
            print(
                f"restart {restart} iteration {iteration} lower bound {bound:,.2f}",
                file=sys.stderr,
                flush=True,
            )


def model_kwargs(args: argparse.Namespace) -> dict:
    """The estimator's parameters from the fit options (both engines take these)."""
    return dict(
        granularity=args.granularity,
        scale=args.scale,
        ordinal=not args.real_valued,
        spam=not args.no_spam,
        updates="paper" if args.paper_updates else "exact",
        n_restarts=args.restarts,
        max_iter=args.max_iter,
        tol=args.tol,
        random_state=args.seed,
    )


def model_from_args(args: argparse.Namespace):
    from .model import OrdinalMixture

    return OrdinalMixture(**model_kwargs(args))


def cmd_fit(args: argparse.Namespace) -> int:
    from .io import atomic_output_dir, read_ratings
    from .outputs import write_fit_outputs

    if not (args.tol >= 0):
        raise InputError(f"--tol must be a number >= 0, not {args.tol}")
    if getattr(args, "engine", "memory") == "dask":
        return cmd_fit_dask(args)
    if getattr(args, "scheduler", None):
        raise InputError("--scheduler needs --engine dask")
    ratings = read_ratings(args.ratings, scale=args.scale)
    model = model_from_args(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(ratings, callback=Progress(args.quiet))
    for w in caught:
        print(f"ordmix: warning: {w.message}", file=sys.stderr)
    with atomic_output_dir(args.out) as tmp:
        write_fit_outputs(model, tmp, settings=vars(args))
    if not args.quiet:
        print(
            f"wrote {args.out}/items.csv, annotators.csv, trace.csv, summary.json "
            f"({model.seconds_:.1f} s)",
            file=sys.stderr,
        )
    return 0


def cmd_fit_dask(args: argparse.Namespace) -> int:
    """``ordmix fit --engine dask``: the same fit and files from ``dask_engine``."""
    from .dask_engine import DaskOrdinalMixture, write_outputs
    from .io import atomic_output_dir

    model = DaskOrdinalMixture(**model_kwargs(args), scheduler=args.scheduler or None)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(args.ratings, callback=Progress(args.quiet))
        for w in caught:
            if "ordmix_core" in (w.filename or ""):  # not the cluster's own warnings
                print(f"ordmix: warning: {w.message}", file=sys.stderr)
        with atomic_output_dir(args.out) as tmp:
            write_outputs(model, tmp, settings=vars(args))
    finally:
        model.close()
    if not args.quiet:
        print(f"wrote {args.out} ({model.seconds_:.1f} s, Dask engine)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as e:
        print(f"ordmix: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ordmix: interrupted; no output written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
