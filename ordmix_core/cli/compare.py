"""ordmix compare and ordmix experiment spam|ablation (the paper's Table 1, Figs 2-3)."""

from __future__ import annotations

import argparse
import json
import sys

from .._version import __version__
from ..errors import InputError
from ..estimators import option_frontends, options

_GRANULARITY_HELP = (
    "run the model at this granularity only: of the model's rows (odm-global, odm-query, "
    "odm-instance) keep the one at this granularity; the ablation variants fit at it "
    "(default: every row of Table 1, the variants at global; odm-query is skipped, with a "
    "note, when the ratings have no query column)"
)


def _methods_help() -> str:
    from ..evaluation.compare import METHODS, TABLE1

    return (
        f"comma-separated method names, from: {', '.join(METHODS)} "
        f"(default: Table 1: {', '.join(TABLE1)})"
    )


def add_subcommands(sub) -> None:
    from ..evaluation.experiments import MAX_SPAM_LEVEL

    cmp = sub.add_parser(
        "compare",
        help="every method side by side on gold (Table 1)",
        description="Fit every method on the same ratings and score each on the gold items "
        "(MSE, Pearson correlation, NDCG of the estimates; label error, calibration error and "
        "log loss of the labels and level probabilities); write the table as CSV and print it.",
    )
    _add_files(
        cmp, "TABLE.csv", "the table to write: a new file or an earlier ordmix compare table"
    )
    cmp.add_argument("--methods", help=_methods_help())
    cmp.add_argument("--quiet", action="store_true", help="no progress on stderr")
    option_frontends.add_fit_options(cmp, "compare", _overrides())
    cmp.set_defaults(func=cmd_compare)

    exp = sub.add_parser(
        "experiment",
        help="the paper's spam (Fig. 2) and ablation (Fig. 3) runs",
        description="Add fake uniform ratings to the crowd at each spam level, fit the methods "
        "and score them on gold: results.csv, one plotly figure per metric and summary.json.",
    )
    exp.add_argument("kind", choices=["spam", "ablation"])
    _add_files(
        exp,
        "DIR",
        "output folder: new, empty, or an earlier ordmix experiment output (replaced as a "
        "whole, only when the run succeeds)",
    )
    exp.add_argument(
        "--methods",
        help=_methods_help().replace(
            "(default: Table 1:",
            "(default: for ablation the four odm-ordinal/real variants; for spam Table 1:",
        ),
    )
    exp.add_argument(
        "--levels",
        default="0,1,2,3,4,5,6,7,8,9",
        type=_levels,
        help=f"fake ratings per instance, whole numbers 0 to {MAX_SPAM_LEVEL} "
        "(default: 0,1,2,3,4,5,6,7,8,9)",
    )
    exp.add_argument("--quiet", action="store_true", help="no progress on stderr")
    option_frontends.add_fit_options(exp, "experiment", _overrides())
    exp.set_defaults(func=cmd_experiment)


def _add_files(p: argparse.ArgumentParser, out_metavar: str, out_help: str) -> None:
    """The ratings, the gold and the output of a comparison command."""
    p.add_argument("ratings", help="CSV, TSV or Parquet: annotator, instance, rating[, query]")
    p.add_argument("--gold", required=True, help="CSV, TSV or Parquet: instance, truth")
    p.add_argument("--out", required=True, metavar=out_metavar, help=out_help)


def _overrides() -> dict:
    return {"granularity": {"default": None, "help": _GRANULARITY_HELP}}


def _levels(text: str) -> list[int]:
    from ..evaluation.experiments import check_levels

    try:
        return check_levels(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _progress(*parts, quiet: bool = False) -> None:
    if not quiet:
        print("ordmix:", *parts, file=sys.stderr, flush=True)


def _prepare(args: argparse.Namespace, out_is_dir: bool):
    """The checks before any compute: options, methods, inputs, output. Returns
    ``(model_params, ratings, gold, scale, seed)`` with the files read."""
    from ..data.scale import as_scale
    from ..estimators.ordinal_mixture import OrdinalMixture
    from ..evaluation.compare import FIXED_BY_METHOD, parse_methods
    from ..io import read_gold, read_ratings
    from ..results.output_paths import check_input_file, check_output_dir, check_output_file

    names = [o.name for o in option_frontends.options_for("compare") if o.name != "granularity"]
    kw = option_frontends.to_estimator_kwargs(args, names=names)  # --granularity: a choice of rows
    options.validate_params(OrdinalMixture(**kw))
    if args.methods is not None:
        parse_methods(args.methods, [])
    inputs = {"ratings": args.ratings, "gold": args.gold}
    for path in inputs.values():
        check_input_file(path)
    (check_output_dir if out_is_dir else check_output_file)(args.out, inputs)
    ratings = read_ratings(args.ratings, scale=args.scale)
    gold = read_gold(args.gold, scale=args.scale)
    scale = as_scale(args.scale, ratings["rating"].to_numpy())
    options.validate_params(OrdinalMixture(**kw), scale)
    params = {k: v for k, v in kw.items() if k not in FIXED_BY_METHOD}
    return params, ratings, gold, scale, kw["random_state"]


def cmd_compare(args: argparse.Namespace) -> int:
    from ..data.crowd import prepare
    from ..evaluation.compare import compare_methods
    from ..io import write_csv
    from ..results.agreement import crowd_agreement, words
    from ..results.output_paths import check_output_file
    from .common import collect_warnings, print_warnings

    with collect_warnings() as caught:
        params, ratings, gold, scale, seed = _prepare(args, out_is_dir=False)
        data = prepare(ratings, scale, "instance")  # once: the methods and the agreement
        del ratings
        table, _ = compare_methods(
            data,
            gold,
            args.methods,
            random_state=seed,
            scale=scale,
            granularity=args.granularity,
            params=params,
            callback=lambda name, i, n: _progress(f"[{i + 1}/{n}] {name}", quiet=args.quiet),
        )
        out = check_output_file(args.out, {"ratings": args.ratings, "gold": args.gold})
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(
                f"cannot create its folder ({e.strerror or e})", source=args.out
            ) from None
        write_csv(table, out, id_columns=[])
    print_warnings(caught)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    _progress(words(crowd_agreement(data).as_dict()), quiet=args.quiet)  # the data's context
    _progress(
        f"wrote {args.out} ({len(table)} methods, {int(table['n_gold'].max())} gold items)",
        quiet=args.quiet,
    )
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from ..dashboard import figures_compare
    from ..evaluation.compare import ABLATION, TABLE1
    from ..evaluation.experiments import spam_experiment
    from ..io import write_csv
    from ..results.output_paths import listing, safe_output_dir
    from .common import collect_warnings, folder_name, print_warnings

    with collect_warnings() as caught:
        params, ratings, gold, scale, seed = _prepare(args, out_is_dir=True)
        res = spam_experiment(
            ratings,
            gold,
            args.levels,
            args.methods,
            random_state=seed,
            scale=scale,
            granularity=args.granularity,
            params=params,
            callback=lambda level, name: _progress(f"spam level {level}: {name}", quiet=args.quiet),
            default=ABLATION if args.kind == "ablation" else TABLE1,
        )
        inputs = {"ratings": args.ratings, "gold": args.gold}
        with safe_output_dir(args.out, inputs) as tmp:
            write_csv(res, tmp / "results.csv", id_columns=[])
            for metric in ("mse", "correlation", "ndcg"):
                fig = figures_compare.spam_curves(res[["spam_level", "method", metric]])
                fig.write_html(tmp / f"{metric}.html", include_plotlyjs="cdn")
            summary = {
                "ordmix_version": __version__,
                "command": f"experiment {args.kind}",
                "settings": {k: v for k, v in vars(args).items() if k != "func"},
                "methods": sorted(set(res["method"]), key=list(res["method"]).index),
                "levels": args.levels,
            }
            (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
            files = listing(tmp)
    print_warnings(caught)
    print(res.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    _progress(f"wrote {folder_name(args.out)}{', '.join(files)}", quiet=args.quiet)
    return 0
