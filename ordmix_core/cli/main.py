"""The ordmix command line: ordmix fit, ordmix compare, ordmix experiment.

A user's mistake prints one line "ordmix: error: ..." naming the file, row, column or option
and the fix, exits 2 and writes nothing; options, inputs and the output path are all checked
before any compute. Ctrl-C exits 130 and leaves earlier output intact.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import textwrap
from collections.abc import Sequence
from typing import NoReturn

from .._version import __version__
from ..errors import InputError
from ..estimators import option_frontends, options
from .common import Progress, collect_warnings, fit_report, print_warnings

#: how long ``--scheduler`` may take to answer before the fit gives up (seconds)
CONNECT_TIMEOUT = 5.0

_argv: list[str] = []  # the arguments being parsed, for error hints


class _Formatter(argparse.HelpFormatter):
    """Help wrapped at spaces only, so method names such as odm-global stay whole."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )


class _Parser(argparse.ArgumentParser):
    """argparse with the house promise: one line ``ordmix: error: ...`` and exit 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        message = " ".join(message.split())
        m = re.match(r"argument (--[\w-]+)(?:/[\w-]+)?: expected one argument", message)
        if m:
            flag = m.group(1)
            nxt = _argv[_argv.index(flag) + 1] if flag in _argv[:-1] else None
            if nxt is not None and nxt.startswith("-"):
                message = (
                    f"argument {flag}: expected a value, but {nxt!r} looks like an option; "
                    f"if it is the value, write {flag}={nxt}"
                )
        print(f"ordmix: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ordmix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"ordmix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    fit = sub.add_parser(
        "fit",
        help="fit the ordinal-discrete-mixture and write the results",
        description="Fit the ordinal-discrete-mixture model to crowd ratings and write "
        "items.csv, annotators.csv, categories.csv, restarts.csv, trace.csv and summary.json "
        "into the output folder; docs/outputs.md in the ordmix repository explains every "
        "column.",
    )
    fit.add_argument("ratings", help="CSV, TSV or Parquet: annotator, instance, rating[, query]")
    fit.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output folder: new, empty, or an earlier ordmix output (replaced as a whole, "
        "only when the fit succeeds); a folder holding other files is refused",
    )
    option_frontends.add_fit_options(fit, "fit")
    fit.add_argument(
        "--gold",
        metavar="GOLD",
        help="CSV, TSV or Parquet: instance, truth. Known items anchor the fit: their truth "
        "is taken as known and their raters are judged against it (items.csv marks them)",
    )
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fit.add_argument(
        "--engine",
        choices=["memory", "dask"],
        default="memory",
        help="memory, or dask: partitioned, out of core, on a Dask cluster (default: memory)",
    )
    fit.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: join this dask.distributed scheduler, e.g. "
        "tcp://host:8786 (default: start a local cluster)",
    )
    fit.set_defaults(func=cmd_fit)

    from .compare import add_subcommands
    from .next import add_subcommand as add_next

    add_subcommands(sub)
    add_next(sub)
    return parser


def model_kwargs(args: argparse.Namespace) -> dict:
    """The estimator's parameters from the parsed flags (both engines take these)."""
    return option_frontends.to_estimator_kwargs(args)


def check_fit_args(args: argparse.Namespace):
    """Everything ``ordmix fit`` can check before reading the data: the model's parameters,
    the input path, the output folder, the scheduler. Returns the unfitted estimator."""
    from ..results.output_paths import check_input_file, check_output_dir

    dask = args.engine == "dask"
    if args.scheduler and not dask:
        raise InputError("--scheduler needs --engine dask")
    kw = model_kwargs(args)
    if dask:
        from ..dask_engine import DaskOrdinalMixture

        model = DaskOrdinalMixture(**kw, scheduler=args.scheduler or None)
    else:
        from ..estimators.ordinal_mixture import OrdinalMixture

        model = OrdinalMixture(**kw)
    options.validate_params(model)
    check_input_file(args.ratings, allow_dir=dask)
    if getattr(args, "gold", None) is not None:
        check_input_file(args.gold)
    check_output_dir(args.out, _inputs(args))
    if args.init_from is not None:  # read before the ratings: a bad folder fails at once
        from ..estimators.refit import read_previous

        read_previous(args.init_from)
    if args.scheduler:
        check_scheduler(args.scheduler)
    return model


def cmd_fit(args: argparse.Namespace) -> int:
    from ..data.crowd import crowd_from_coded
    from ..data.scale import as_scale
    from ..io import read_ratings
    from ..numerics.jit import compile_progress
    from ..results.output_paths import listing, safe_output_dir
    from ..results.outputs import write_fit_outputs

    model = check_fit_args(args)
    gold_path = getattr(args, "gold", None)
    if args.engine == "dask":
        return cmd_fit_dask(args, model)
    with collect_warnings() as caught:
        # io.read_crowd in steps, the messages in their order: reading and a given scale,
        # gold, the options against the scale, then the rest of the checks while coding
        coded = read_ratings(args.ratings, scale=args.scale)
        gold = None
        if gold_path is not None:
            from ..io import read_gold

            gold = read_gold(gold_path, scale=args.scale)
        options.validate_params(model, as_scale(args.scale, coded["rating"].to_numpy()))
        data = crowd_from_coded(
            coded, args.scale, model.granularity, coded.attrs["source"], copy=False
        )
        del coded  # the codes live on in data: no per-rating copy of the IDs remains
        progress = Progress(model.planned_restarts(data.scale), args.quiet)
        try:
            with compile_progress(progress.compiling):
                model.fit(data, callback=progress, gold=gold)
        finally:
            progress.close()
        with safe_output_dir(args.out, _inputs(args)) as tmp:
            summary = write_fit_outputs(model, tmp, settings=vars(args))
            files = listing(tmp)
    print_warnings(caught)
    if not args.quiet:
        for line in fit_report(model, summary, args.out, files):
            print(line, file=sys.stderr)
    return 0


def _inputs(args: argparse.Namespace) -> dict:
    """The fit's input files (never to be overwritten by its output)."""
    gold = getattr(args, "gold", None)
    return {"ratings": args.ratings, **({"gold": gold} if gold is not None else {})}


def cmd_fit_dask(args: argparse.Namespace, model) -> int:
    """``ordmix fit --engine dask``: the same fit and files from ``dask_engine``."""
    import dask

    from ..dask_engine import write_outputs
    from ..results.output_paths import listing, safe_output_dir

    try:
        with (
            collect_warnings() as caught,
            dask.config.set({"distributed.comm.timeouts.connect": f"{CONNECT_TIMEOUT:g}s"}),
        ):
            gold = None
            if getattr(args, "gold", None) is not None:
                from ..io import read_gold

                gold = read_gold(args.gold, scale=args.scale)
            progress = Progress(model.planned_restarts(), args.quiet, every_sweep=True)
            try:
                model.fit(args.ratings, callback=progress, gold=gold)
            finally:
                progress.close()
            with safe_output_dir(args.out, _inputs(args)) as tmp:
                summary = write_outputs(model, tmp, settings=vars(args))
                files = listing(tmp)
    finally:
        model.close()
    print_warnings(caught)
    if not args.quiet:
        for line in fit_report(model, summary, args.out, files, engine="Dask engine"):
            print(line, file=sys.stderr)
    return 0


def check_scheduler(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse a ``--scheduler`` that is not an address or does not answer within ``timeout``.

    Only TCP-based addresses (``tcp://``, ``tls://``, ``ws://``, ``wss://`` or ``host:port``)
    are probed; others are left to Dask.
    """
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return
    host, _, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(
            f"--scheduler {address!r} is not an address like tcp://host:8786; give the "
            "scheduler's address"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise InputError(
            f"--scheduler {address}: cannot connect ({why}, waited at most {timeout:g} s); "
            "check the address and that the scheduler is running"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0 done, 2 a user's mistake, 130 Ctrl-C)."""
    global _argv
    _argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(_argv)
    except SystemExit as e:  # --help, --version, or a bad option (already printed)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return int(args.func(args) or 0)
    except InputError as e:
        print(f"ordmix: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ordmix: interrupted; no output written", file=sys.stderr)
        return 130


def run() -> NoReturn:
    """The ``ordmix`` program: :func:`main`, then leave the process at once with its code,
    streams flushed. Every file the command wrote is closed by then; skipping the
    interpreter's teardown means nothing there (pyarrow's thread pools, numba's registries)
    can turn an answered command into an abort, whatever the input was."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a closed pipe: the exit code still says it
        pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
