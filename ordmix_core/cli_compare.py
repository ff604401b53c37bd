"""``ordmix compare`` and ``ordmix experiment spam|ablation`` (the paper's Table 1, Figs 2-3)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def add_subcommands(sub, add_model_options: Callable) -> None:
    cmp = sub.add_parser("compare", help="every method side by side on gold (Table 1)")
    cmp.add_argument("ratings", help="CSV, TSV or Parquet: annotator, instance, rating[, query]")
    cmp.add_argument("--gold", required=True, help="CSV/TSV/Parquet with instance, truth")
    cmp.add_argument("--out", required=True, help="the table to write (CSV)")
    cmp.add_argument("--methods", help="comma-separated method names (default: all of Table 1)")
    add_model_options(cmp, fit_only=False)
    cmp.set_defaults(func=cmd_compare)

    exp = sub.add_parser("experiment", help="the paper's spam (Fig. 2) and ablation (Fig. 3) runs")
    exp.add_argument("kind", choices=["spam", "ablation"])
    exp.add_argument("ratings")
    exp.add_argument("--gold", required=True)
    exp.add_argument("--out", required=True, help="output folder (replaced atomically)")
    exp.add_argument("--methods", help="comma-separated method names")
    exp.add_argument(
        "--levels", default="0,1,2,3,4,5,6,7,8,9", help="fake ratings per instance, e.g. 0,5"
    )
    add_model_options(exp, fit_only=False)
    exp.set_defaults(func=cmd_experiment)


def _progress(*parts) -> None:
    print("ordmix:", *parts, file=sys.stderr, flush=True)


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare_methods
    from .io import read_gold, read_ratings, write_csv

    ratings = read_ratings(args.ratings, scale=args.scale)
    gold = read_gold(args.gold)
    table, _ = compare_methods(
        ratings,
        gold,
        args.methods,
        n_restarts=args.restarts,
        random_state=args.seed,
        scale=args.scale,
        callback=lambda name, i, n: _progress(f"[{i + 1}/{n}] {name}"),
    )
    out = Path(args.out)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True)
    write_csv(table[["method", "mse", "correlation", "ndcg", "seconds"]], out, id_columns=[])
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from . import figures
    from .compare import ABLATION, parse_methods
    from .errors import InputError
    from .experiments import spam_experiment
    from .io import atomic_output_dir, read_gold, read_ratings, write_csv

    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--levels {args.levels!r} must be whole numbers like 0,1,2") from None
    if not levels or min(levels) < 0:
        raise InputError("--levels needs at least one whole number >= 0")
    default = ABLATION if args.kind == "ablation" else None
    methods = parse_methods(args.methods, default) if (args.methods or default) else None
    ratings = read_ratings(args.ratings, scale=args.scale)
    gold = read_gold(args.gold)
    res = spam_experiment(
        ratings,
        gold,
        levels,
        methods,
        n_restarts=args.restarts,
        random_state=args.seed,
        scale=args.scale,
        callback=lambda level, name: _progress(f"spam level {level}: {name}"),
    )
    with atomic_output_dir(args.out) as tmp:
        write_csv(res, tmp / "results.csv", id_columns=[])
        for metric in ("mse", "correlation", "ndcg"):
            fig = figures.spam_curves(res[["spam_level", "method", metric]])
            fig.write_html(tmp / f"{metric}.html", include_plotlyjs="cdn")
    print(res.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0
