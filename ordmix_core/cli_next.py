"""``ordmix next``: the items to send out for rating next, and the annotators to review.

``ordmix next SOURCE --out next.csv [--batch 50] [--review review.csv]``. SOURCE is either
a ratings file (fitted here, with the usual fit options) or a folder written by
``ordmix fit`` (read, not refitted: items.csv, categories.csv, annotators.csv,
summary.json). The batch ranks items by the expected fall of the chance that their label is
wrong from one more rating (``decisions.expected_gain``); ``--review`` lists the annotators
flagged unreliable with the evidence (``decisions.annotator_flags``).

Registered by ``cli.build_parser`` through ``add_subcommand``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import decisions, options
from .errors import InputError

FIT_FILES = ("items.csv", "categories.csv", "annotators.csv", "summary.json")


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
    options.add_fit_options(p, "fit")
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


def _check_out(path: str, flag: str) -> Path:
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{flag} {path} is a folder; give a file name such as next.csv")
    return out


def cmd_next(args: argparse.Namespace) -> int:
    from .io import write_csv

    out = _check_out(args.out, "--out")
    review_out = _check_out(args.review, "--review") if args.review else None
    if review_out is not None and review_out.resolve() == out.resolve():
        raise InputError("--out and --review name the same file; give two file names")
    decisions.check_flag_settings(**_flag_settings(args))  # before a fit, not after
    source = Path(args.source)
    if source.is_dir():
        items, annotators = _from_fitfolder_name(source, args, review_out is not None)
    else:
        items, annotators = _from_ratings(args, review_out is not None)
    batch = decisions.next_batch(items, args.batch, by=args.by)
    review = decisions.annotators_to_review(annotators) if review_out is not None else None

    for path in (out, review_out):
        if path is not None and not path.parent.exists():
            path.parent.mkdir(parents=True)
    write_csv(batch, out, id_columns=["instance", "query"])
    if review is not None:
        write_csv(review, review_out, id_columns=["annotator"])
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
    from .cli_common import Progress, collect_warnings, print_warnings
    from .io import read_ratings
    from .model import OrdinalMixture

    model = OrdinalMixture(**options.to_estimator_kwargs(args))
    options.validate_params(model)
    ratings = read_ratings(args.source, scale=args.scale)
    with collect_warnings() as caught:
        progress = Progress(model.n_restarts, args.quiet)
        try:
            model.fit(ratings, callback=progress)
        finally:
            progress.close()
    print_warnings(caught)
    settings = _flag_settings(args)
    conf = {"confidence": settings["confidence"]} if "confidence" in settings else {}
    items = model.items_.join(decisions.item_decisions(model, **conf))
    if not review:
        return items, None
    annotators = model.annotators_.join(decisions.annotator_flags(model, **settings))
    return items, annotators


def _from_fitfolder_name(
    folder: Path, args: argparse.Namespace, review: bool
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Read an ``ordmix fit`` folder; items with decision columns, annotators as written."""
    missing = [f for f in FIT_FILES if not (folder / f).is_file()]
    if missing:
        raise InputError(
            f"is a folder but has no {', '.join(missing)}; give a folder written by ordmix fit, "
            "or a ratings file",
            source=str(folder),
        )
    if args.threshold is not None or (args.confidence is not None and review):
        raise InputError(
            "--threshold and --confidence set the annotator flags, which a fit folder already "
            "holds; run ordmix next on the ratings file to choose them",
            source=str(folder),
        )
    try:
        summary = json.loads((folder / "summary.json").read_text())
        hp = summary["hyperparameters"]
        for key in ("thresholds", "scale", "lambda", "alpha", "beta"):
            hp[key]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(
            f"summary.json is not one written by ordmix fit ({type(e).__name__}: {e}); refit",
            source=str(folder),
        ) from None
    items = _numeric(
        folder / "items.csv", ["instance", "category"], ["estimate", "sd", "n_ratings"]
    )
    items = items.set_index("instance")
    cats = _numeric(folder / "categories.csv", ["category"], ["difficulty"]).set_index("category")
    num = ["n_ratings", "spam_share"]
    if review:
        num += ["p_unreliable", "reliability", "reliability_lower", "reliability_upper",
                "expertise"]  # fmt: skip
    text = ["annotator", "flag"] if review else ["annotator"]
    ann = _numeric(folder / "annotators.csv", text, num).set_index("annotator")
    total = float(ann["n_ratings"].sum())
    truth_share = float((ann["n_ratings"] * (1.0 - ann["spam_share"])).sum() / max(total, 1.0))
    conf = {"confidence": args.confidence} if args.confidence is not None else {}
    dec = decisions.item_decisions_from_frames(items, cats, hp, truth_share, **conf)
    base = items[[c for c in ("query", "n_ratings") if c in items.columns]]
    items = base.join(dec)
    return items, (ann if review else None)


def _numeric(path: Path, text: list[str], numbers: list[str]) -> pd.DataFrame:
    """Read one file of a fit folder; ``numbers`` columns as floats, all columns required."""
    from .io import read_table

    out = read_table(path)
    for c in text + numbers:
        if c not in out.columns:
            hint = (
                " (written by an older ordmix fit without evidence flags; run ordmix next on "
                "the ratings file, or fit again, to get --review)"
                if c in ("p_unreliable", "reliability_lower", "reliability_upper", "flag")
                else "; give a folder written by ordmix fit"
            )
            raise InputError(f"no column {c!r}{hint}", source=str(path))
    for c in numbers:
        v = pd.to_numeric(out[c], errors="coerce")
        if v.isna().any():
            row = int(np.flatnonzero(v.isna().to_numpy())[0])
            raise InputError(
                f"row {row + 2} (counting the header as row 1): {c!r} is "
                f"{out[c].iloc[row]!r}, not a number; fit again",
                source=str(path),
            )
        out[c] = v
    return out
