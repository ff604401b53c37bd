"""``ordmix next``: the items to send out for rating next, and the annotators to review.

``ordmix next SOURCE --out next.csv [--batch 50] [--review review.csv]``. SOURCE is either
a ratings file (fitted here, with the usual fit options) or a folder written by
``ordmix fit`` (read, not refitted: items.csv, categories.csv, annotators.csv,
summary.json). The batch ranks items by the expected fall of the chance that their label is
wrong from one more rating (``decisions.expected_gain``); ``--review`` lists the annotators
flagged unreliable with the evidence (``reliability.annotator_flags``).

Registered by ``cli.build_parser`` through ``add_subcommand``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ..errors import InputError
from ..estimators import option_frontends, options
from ..results import decision_columns, decisions, fit_folder

#: the tables of a fit folder ``ordmix next`` reads (besides summary.json)
FIT_TABLES = ("items", "categories", "annotators")


def add_subcommand(sub) -> argparse.ArgumentParser:
    """Add ``next`` to the ``ordmix`` subparsers (fit options from the options table)."""
    p = sub.add_parser(
        "next",
        help="the items to rate next (and annotators to review) from ratings or a fit folder",
        description="Write the items to send out for rating next (ranked by how much one more "
        "rating is expected to lower the chance that their label is wrong) and, with --review, "
        "the annotators flagged unreliable with the evidence. SOURCE is a ratings file, fitted "
        "here with the fit options below, or a folder written by ordmix fit (read, not refitted).",
    )
    p.add_argument(
        "source", help="ratings file (CSV, TSV, Parquet) to fit, or a folder from ordmix fit"
    )
    p.add_argument("--out", required=True, help="CSV of the batch to write")
    p.add_argument(
        "--batch", type=_positive_int, default=50, help="items in the batch (default 50)"
    )
    p.add_argument(
        "--by",
        choices=["expected_gain", "p_wrong"],
        default="expected_gain",
        help="rank by the expected fall of p_wrong from one more rating (default) or by p_wrong",
    )
    p.add_argument("--review", help="also write the annotators to review (flagged unreliable)")
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help=f"reliability an annotator is judged against (default {decisions.THRESHOLD:g}; "
        "ratings only: a fit folder's flags were set when it was written)",
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=None,
        help=f"posterior probability a flag needs (default {decisions.CONFIDENCE:g})",
    )
    option_frontends.add_fit_options(p, "fit")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_next)
    return p


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def cmd_next(args: argparse.Namespace) -> int:
    from ..io import write_csv
    from ..results.output_paths import check_input_file, check_output_file

    source = check_input_file(args.source, allow_dir=True)
    inputs = {("fit" if source.is_dir() else "ratings"): args.source}
    out = check_output_file(args.out, inputs, table="next", option="--out")
    review_out = None
    if args.review:
        review_out = check_output_file(args.review, inputs, table="review", option="--review")
        if review_out.resolve() == out.resolve():
            raise InputError("--out and --review name the same file; give two file names")
    decisions.check_flag_settings(**_flag_settings(args))  # before a fit, not after
    if source.is_dir():
        items, annotators = _from_fitfolder_name(source, args, review_out is not None)
    else:
        items, annotators = _from_ratings(args, review_out is not None)
    batch = decisions.next_batch(items, args.batch, by=args.by)
    review = decisions.annotators_to_review(annotators) if review_out is not None else None

    for path in (out, review_out):
        if path is not None and not path.parent.exists():
            path.parent.mkdir(parents=True)
    write_csv(batch, out, id_columns=list(decision_columns.NEXT_IDS))
    if review is not None:
        write_csv(review, review_out, id_columns=list(decision_columns.REVIEW_IDS))
    if not args.quiet:
        n_und = int((items["flag"] == "undetermined").sum())
        print(
            f"wrote {out}: {len(batch)} of {len(items):,} items ({n_und:,} undetermined); one "
            f"rating each is expected to correct {batch['expected_gain'].sum():.1f} labels",
            file=sys.stderr,
        )
        if review is not None:
            counts = annotators["flag"].value_counts()
            print(
                f"wrote {review_out}: {len(review)} annotators flagged unreliable of "
                f"{len(annotators):,} ({int(counts.get('ok', 0)):,} ok, "
                f"{int(counts.get('undetermined', 0)):,} undetermined)",
                file=sys.stderr,
            )
    return 0


def _flag_settings(args: argparse.Namespace) -> dict:
    out = {}
    if args.threshold is not None:
        out["threshold"] = args.threshold
    if args.confidence is not None:
        out["confidence"] = args.confidence
    return out


def _from_ratings(
    args: argparse.Namespace, review: bool
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Fit the ratings; items (and, for a review, annotators) with their decision columns."""
    from ..estimators.ordinal_mixture import OrdinalMixture
    from ..io import read_ratings
    from .common import Progress, collect_warnings, print_warnings

    model = OrdinalMixture(**option_frontends.to_estimator_kwargs(args))
    options.validate_params(model)
    ratings = read_ratings(args.source, scale=args.scale)
    with collect_warnings() as caught:
        progress = Progress(model.planned_restarts(), args.quiet)
        try:
            model.fit(ratings, callback=progress)
        finally:
            progress.close()
    print_warnings(caught)
    # the decision columns the fit's files and the dashboard's downloads take (``decide``)
    dec = decision_columns.decide(model, **_flag_settings(args))
    items = model.items_.join(dec.items)
    return items, (model.annotators_.join(dec.annotators) if review else None)


def _from_fitfolder_name(
    folder: Path, args: argparse.Namespace, review: bool
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Read an ``ordmix fit`` folder (``fitfolder``): items with their decision columns as
    written (the fit's own numbers: the batch is the bytes the dashboard writes for that fit;
    ``--confidence`` reads their flags again from their level probabilities), annotators with
    the flags as written."""
    fit_folder.check_folder(folder, FIT_TABLES, "ordmix next", ", or a ratings file")
    if args.threshold is not None or (args.confidence is not None and review):
        raise InputError(
            "--threshold and --confidence set the annotator flags, which a fit folder already "
            "holds; run ordmix next on the ratings file to choose them",
            source=str(folder),
        )
    hp = fit_folder.read_summary(folder, ("scale",))["hyperparameters"]
    values, names = hp["scale"], hp.get("levels")
    p_cols = decisions.level_columns(values, names)
    items = fit_folder.read_fit_table(
        folder, "items", ["instance", "category", *_WRITTEN], ["n_ratings", *p_cols]
    ).set_index("instance")
    if "query" in items.columns:  # an ID column: as the ratings have it
        items["query"] = fit_folder.unprotect(items["query"])
    fit_folder.parse_numbers(items, ["p_wrong", "expected_gain"], folder / "items.csv")
    if args.confidence is not None:
        items = decisions.reflagged(items, values, args.confidence, names)
    kept = [c for c in ("query", "n_ratings") if c in items.columns]
    return items[[*kept, *_WRITTEN]], (_annotators(folder) if review else None)


#: the decision columns of items.csv the batch is made from, as the fit wrote them
_WRITTEN = ("label", "p_wrong", "expected_gain", "flag")


def _annotators(folder: Path) -> pd.DataFrame:
    """annotators.csv of a fit folder, by annotator, with the review's columns."""
    num = ["n_ratings", "spam_share", "p_unreliable", "reliability", "reliability_lower",
           "reliability_upper", "expertise"]  # fmt: skip
    no_flags = (
        " (a folder from an ordmix fit without evidence flags: an older version, or the Dask "
        "engine, which keeps the per-rating results they need on its workers); run ordmix "
        "next on the ratings file to get --review"
    )
    hint = {c: no_flags for c in fit_folder.FLAG_COLUMNS}
    return fit_folder.read_fit_table(
        folder, "annotators", ["annotator", "flag"], num, hint
    ).set_index("annotator")
