"""The command line's and the Python API's reliability cases (docs/reliability.md, round two).

Each case runs in a fresh folder with relative paths, so its message is exact. Run this file
with Python to print the table for docs/reliability.md; ``test_doc_lists_every_case`` keeps
the two in step.
"""

import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from _cli_helpers import NOBODY, as_user, run_cli, shared_dir

from ordmix_core import InputError
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


def _data(d: Path) -> None:
    crowd = simulate_crowd(20, 4, 3, random_state=1)
    crowd.ratings.to_csv(d / "r.csv", index=False)
    crowd.ratings.drop(columns="query").to_csv(d / "noquery.csv", index=False)
    crowd.gold.to_csv(d / "g.csv")
    for f in ("r.csv", "noquery.csv", "g.csv"):
        os.chmod(d / f, 0o644)


@dataclass
class Case:
    what: str
    argv: list[str]
    message: str  # the exact stderr line (exit 2), or a note line (exit 0)
    setup: Callable[[Path], None] = lambda d: None
    exit: int = 2
    other_user: bool = False  # run as another user (needs root)


def _dir_with_input_and_notes(d: Path) -> None:
    (d / "data").mkdir()
    shutil.copy(d / "r.csv", d / "data" / "r.csv")
    (d / "data" / "notes.txt").write_text("mine")


def _foreign(d: Path) -> None:
    (d / "results").mkdir()
    (d / "results" / "notes.txt").write_text("mine")


def _earlier_output(d: Path) -> None:
    (d / "prev").mkdir()
    (d / "prev" / "summary.json").write_text('{"ordmix_version": "0.1.0"}')


def _read_only(d: Path) -> None:
    (d / "ro").mkdir()
    os.chmod(d / "ro", 0o755)  # root's, so read-only to the other user


def _sticky(d: Path) -> None:
    (d / "shared").mkdir()
    os.chmod(d / "shared", 0o1777)
    (d / "shared" / "out").mkdir()
    (d / "shared" / "out" / "summary.json").write_text('{"ordmix_version": "0.1.0"}')
    os.chmod(d / "shared" / "out", 0o777)


def _fifo(d: Path) -> None:
    os.mkfifo(d / "pipe.csv")


def _huge(d: Path) -> None:
    (d / "big.csv").write_text(
        "annotator,instance,rating\na,i1,1\nb,i1,2\na,i2,1e308\nb,i2,-1e308\n"
    )


def _gold_off_scale(d: Path) -> None:
    (d / "bad-gold.csv").write_text("instance,truth\nitem00000,2000\nitem00001,3\n")


def _gold_foreign(d: Path) -> None:
    (d / "other-gold.csv").write_text("instance,truth\nx1,2\nx2,3\n")


def _gold_extra(d: Path) -> None:
    text = (d / "g.csv").read_text()
    (d / "g2.csv").write_text(text + "never-rated,2\n")


def _table(d: Path) -> None:
    (d / "notes.csv").write_text("a,b\n1,2\n")


FIT = ["fit", "r.csv", "--out", "out"]
CMP = ["compare", "r.csv", "--gold", "g.csv", "--out", "t.csv"]
EXP = ["experiment", "spam", "r.csv", "--gold", "g.csv", "--out", "exp"]
E = "ordmix: error: "

CASES = [
    # ---------------------------------------------------------------- options
    Case(
        "`--restarts 0`",
        [*FIT, "--restarts", "0"],
        E + "argument --restarts: must be a whole number from 1 to 1,000 "
        "(or None: as the labels need), not 0 "
        "(see 'ordmix fit --help')",
    ),
    Case(
        "`--restarts 99999999999999999999`",
        [*FIT, "--restarts", "99999999999999999999"],
        E + "argument --restarts: must be a whole number from 1 to 1,000 "
        "(or None: as the labels need), not "
        "99999999999999999999 (see 'ordmix fit --help')",
    ),
    Case(
        "`--max-iter 0`",
        [*FIT, "--max-iter", "0"],
        E + "argument --max-iter: must be a whole number from 1 to 100,000, not 0 "
        "(see 'ordmix fit --help')",
    ),
    Case(
        "`--seed 1.5`",
        [*FIT, "--seed", "1.5"],
        E + "argument --seed: must be a whole number >= 0, not '1.5' (see 'ordmix fit --help')",
    ),
    Case(
        "`fit --seed -5`",
        [*FIT, "--seed", "-5"],
        E + "argument --seed: must be a whole number >= 0, not '-5' (see 'ordmix fit --help')",
    ),
    Case(
        "`compare --seed -5`",
        [*CMP, "--seed", "-5"],
        E + "argument --seed: must be a whole number >= 0, not '-5' (see 'ordmix compare --help')",
    ),
    Case(
        "unknown flag `--bogus`",
        [*FIT, "--bogus"],
        E + "unrecognized arguments: --bogus (see 'ordmix --help')",
    ),
    Case(
        "`--granularity bogus`",
        [*FIT, "--granularity", "bogus"],
        E + "argument --granularity: must be one of instance, query, global, not 'bogus' "
        "(see 'ordmix fit --help')",
    ),
    Case(
        "`--scale -2,-1,0,1,2` (a value starting with -)",
        [*FIT, "--scale", "-2,-1,0,1,2"],
        E + "argument --scale: expected a value, but '-2,-1,0,1,2' looks like an option; if it "
        "is the value, write --scale=-2,-1,0,1,2 (see 'ordmix fit --help')",
    ),
    Case(
        "`--tol nan`",
        [*FIT, "--tol", "nan"],
        E + "argument --tol: must be a number >= 0, not nan (see 'ordmix fit --help')",
    ),
    Case(
        "`--mu 1e308`",
        [*FIT, "--mu", "1e308"],
        E + "argument --mu: must be a number from -1e+150 to 1e+150 (or None: the mean of the "
        "scale), not 1e+308 (see 'ordmix fit --help')",
    ),
    Case(
        "`--mu 100` on ratings 1..5",
        [*FIT, "--mu", "100"],
        E + "mu must lie within the scale's outer thresholds 0.5 to 5.5 (the scale is "
        "1,2,3,4,5), not 100.0; leave it unset for the mean of the scale",
    ),
    Case(
        "`experiment --levels 1000000000000`",
        [*EXP, "--levels", "1000000000000"],
        E + "argument --levels: spam levels must be whole numbers from 0 to 100 (fake ratings "
        "per instance), like 0,1,2; not '1000000000000' (see 'ordmix experiment --help')",
    ),
    Case(
        "no command",
        [],
        E + "the following arguments are required: command (see 'ordmix --help')",
    ),
    # ---------------------------------------------------------------- output paths
    Case(
        "`fit data/r.csv --out data` (the input's folder, with notes.txt)",
        ["fit", "data/r.csv", "--out", "data"],
        E + "data: holds the ratings file data/r.csv; ordmix never overwrites its input: "
        "choose another output folder",
        _dir_with_input_and_notes,
    ),
    Case(
        "`--out results` holding someone's notes.txt",
        ["fit", "r.csv", "--out", "results"],
        E + "results: holds files ordmix did not write (notes.txt); ordmix replaces its "
        "output folder as a whole and never deletes other files: choose a new folder, or an "
        "earlier ordmix output",
        _foreign,
    ),
    Case(
        "`--out r.csv` (the input itself)",
        ["fit", "r.csv", "--out", "r.csv"],
        E + "r.csv: is the ratings file itself; ordmix never overwrites its input: choose "
        "another output folder",
    ),
    Case(
        "`--out .`",
        ["fit", "r.csv", "--out", "."],
        E + ".: is the current folder (or holds it); ordmix replaces its output folder as a "
        "whole, so give a new folder, e.g. --out results",
    ),
    Case(
        "`--out ''`",
        ["fit", "r.csv", "--out", ""],
        E + "--out is empty; give a folder or file name, e.g. --out results",
    ),
    Case(
        "`--out prev/sub` inside an earlier output",
        ["fit", "r.csv", "--out", "prev/sub"],
        E + "prev/sub: is inside the earlier ordmix output prev, which a run into it would "
        "replace as a whole; choose a folder outside it",
        _earlier_output,
    ),
    Case(
        "`compare --out r.csv` (the ratings)",
        ["compare", "r.csv", "--gold", "g.csv", "--out", "r.csv"],
        E + "r.csv: is the ratings file itself; ordmix never overwrites its input: choose "
        "another output file name",
    ),
    Case(
        "`compare --out g.csv` (the gold)",
        ["compare", "r.csv", "--gold", "g.csv", "--out", "g.csv"],
        E + "g.csv: is the gold file itself; ordmix never overwrites its input: choose another "
        "output file name",
    ),
    Case(
        "`compare --out results` (a folder)",
        ["compare", "r.csv", "--gold", "g.csv", "--out", "results"],
        E + "results: is a folder; give a file name for the table, e.g. --out results/compare.csv",
        _foreign,
    ),
    Case(
        "`compare --out notes.csv` (someone's file)",
        ["compare", "r.csv", "--gold", "g.csv", "--out", "notes.csv"],
        E + "notes.csv: exists and is not a table ordmix compare wrote; ordmix never overwrites "
        "other files: choose another file name for --out",
        _table,
    ),
    Case(
        "`next r.csv --out r.csv` (the input itself)",
        ["next", "r.csv", "--out", "r.csv"],
        E + "r.csv: is the ratings file itself; ordmix never overwrites its input: choose "
        "another output file name",
    ),
    Case(
        "`next r.csv --out n.csv --review notes.csv` (someone's file)",
        ["next", "r.csv", "--out", "n.csv", "--review", "notes.csv"],
        E + "notes.csv: exists and is not a review list ordmix next --review wrote; ordmix "
        "never overwrites other files: choose another file name for --review",
        _table,
    ),
    Case(
        "`--out ro/out`, `ro` read-only",
        ["fit", "r.csv", "--out", "ro/out"],
        E + "ro/out: cannot be written: ro is not writable (Permission denied); choose another "
        "output",
        _read_only,
        other_user=True,
    ),
    Case(
        "`--out ro/missing/out` (missing parent in a read-only folder)",
        ["fit", "r.csv", "--out", "ro/missing/out"],
        E + "ro/missing/out: cannot be written: ro is not writable (Permission denied); choose "
        "another output",
        _read_only,
        other_user=True,
    ),
    Case(
        "`compare --out ro/t.csv`, `ro` read-only",
        ["compare", "r.csv", "--gold", "g.csv", "--out", "ro/t.csv"],
        E + "ro/t.csv: cannot be written: ro is not writable (Permission denied); choose "
        "another output",
        _read_only,
        other_user=True,
    ),
    Case(
        "`--out shared/out`, another user's, in a sticky folder",
        ["fit", "r.csv", "--out", "shared/out"],
        E + "shared/out: belongs to another user in shared, where only owners may rename or "
        "delete (sticky bit); choose another output",
        _sticky,
        other_user=True,
    ),
    # ---------------------------------------------------------------- inputs and engines
    Case(
        "a named pipe as input",
        ["fit", "pipe.csv", "--out", "out"],
        E + "pipe.csv: is a named pipe (FIFO), not a regular file; ordmix reads files only: "
        "save the data to a file first",
        _fifo,
    ),
    Case(
        "ratings `1e308` and `-1e308`",
        ["fit", "big.csv", "--out", "out"],
        E + "the rating scale must span at most 1e+150, not -1e+308,1,2,1e+308; values that "
        "large are usually codes or typos, not ratings; give the scale with --scale / scale=",
        _huge,
    ),
    Case(
        "`--engine dask --scheduler tcp://127.0.0.1:1`",
        [*FIT, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1"],
        E + "--scheduler tcp://127.0.0.1:1: cannot connect (Connection refused, waited at most "
        "5 s); check the address and that the scheduler is running",
    ),
    Case(
        "`--scheduler` without `--engine dask`",
        [*FIT, "--scheduler", "tcp://127.0.0.1:8786"],
        E + "--scheduler needs --engine dask",
    ),
    # ---------------------------------------------------------------- compare
    Case(
        "`compare --methods odm-query` without a query column",
        ["compare", "noquery.csv", "--gold", "g.csv", "--out", "t.csv", "--methods", "odm-query"],
        E + "method odm-query needs a 'query' column in the ratings; drop it, add a query "
        "column, or choose granularity instance or global",
    ),
    Case(
        "`compare --granularity instance --methods odm-global`",
        [*CMP, "--granularity", "instance", "--methods", "odm-global"],
        E + "method odm-global fits at granularity global, but granularity instance was asked "
        "for; drop one of the two",
    ),
    Case(
        "gold truth `2000` on a 1..5 scale",
        ["compare", "r.csv", "--gold", "bad-gold.csv", "--out", "t.csv"],
        E + "gold: instance 'item00000' has truth 2000, outside the rating scale 1,2,3,4,5 (1 "
        "such item(s)); fix the gold file or give the scale with --scale",
        _gold_off_scale,
    ),
    Case(
        "gold for other instances only",
        ["compare", "r.csv", "--gold", "other-gold.csv", "--out", "t.csv"],
        E + "no gold item has ratings; check that the gold file's instance IDs are the ones in "
        "the ratings (IDs are compared as strings)",
        _gold_foreign,
    ),
    Case(
        "`compare` by default on ratings without a query column (exit 0)",
        ["compare", "noquery.csv", "--gold", "g.csv", "--out", "t.csv", "--restarts", "1"],
        "ordmix: note: odm-paper-query skipped: the ratings have no query column",
        exit=0,
    ),
    Case(
        "gold items without ratings (exit 0)",
        ["compare", "r.csv", "--gold", "g2.csv", "--out", "t.csv", "--methods", "mean"],
        "ordmix: note: 1 of 21 gold item(s) have no ratings and are not scored "
        "(e.g. 'never-rated')",
        _gold_extra,
        exit=0,
    ),
]

#: Python API: ``OrdinalMixture(**kw).fit(ratings)`` raises InputError with this message
API_CASES = [
    ({"tol": None}, "tol must be a number >= 0, not None"),
    (
        {"phi": "a"},
        "phi must be a positive number up to 1e+06 (or None: the model's, paper 10, extended 2), "
        "not 'a'",
    ),
    (
        {"random_state": -1},
        "random_state must be a whole number >= 0 or a numpy Generator (or None: a fresh random "
        "seed), not -1",
    ),
    (
        {"random_state": "abc"},
        "random_state must be a whole number >= 0 or a numpy Generator (or None: a fresh random "
        "seed), not 'abc'",
    ),
    (
        {"n_jobs": "two"},
        "n_jobs must be a whole number >= 1 (or None: the cores, when the crowd is small "
        "enough), not 'two'",
    ),
    ({"prune_start": -3}, "prune_start must be a whole number from 1 to 100,000, not -3"),
    ({"prune_start": 0}, "prune_start must be a whole number from 1 to 100,000, not 0"),
    (
        {"mu": float("nan")},
        "mu must be a number from -1e+150 to 1e+150 (or None: the mean of the scale), not nan",
    ),
    (
        {"mu": 1e308},
        "mu must be a number from -1e+150 to 1e+150 (or None: the mean of the scale), not 1e+308",
    ),
    (
        {"mu": 100.0, "scale": [1, 2, 3, 4, 5]},
        "mu must lie within the scale's outer thresholds 0.5 to 5.5 (the scale is 1,2,3,4,5), "
        "not 100.0; leave it unset for the mean of the scale",
    ),
    (
        {"n_restarts": 99999999999999999999},
        "n_restarts must be a whole number from 1 to 1,000 "
        "(or None: as the labels need), not 99999999999999999999",
    ),
    ({"max_iter": 10**9}, "max_iter must be a whole number from 1 to 100,000, not 1000000000"),
]


def _id(c: Case) -> str:
    return re.sub(r"[^\w.-]+", "-", c.what).strip("-")[:60]


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_cli_case(case: Case):
    if case.other_user and os.geteuid() != 0:
        pytest.skip("needs root to run as another user")
    if "dask" in case.argv:
        pytest.importorskip("distributed")
    with shared_dir() as d:
        _data(d)
        case.setup(d)
        before = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
        if case.other_user:
            rc, err = as_user(NOBODY, case.argv, d)
        else:
            rc, err, _ = run_cli(case.argv, d)
        assert rc == case.exit, err
        if case.exit == 2:
            assert err == [case.message]
            assert sorted(str(p.relative_to(d)) for p in d.rglob("*")) == before
        else:
            assert case.message in err


@pytest.mark.parametrize(("kw", "message"), API_CASES, ids=[str(k) for k, _ in API_CASES])
def test_api_case(kw, message):
    ratings = simulate_crowd(20, 4, 3, random_state=1).ratings
    with pytest.raises(InputError) as err:
        OrdinalMixture(**kw).fit(ratings)
    assert str(err.value) == message


def table() -> str:
    rows = ["| case | exit | message |", "|---|---|---|"]
    for c in CASES:
        rows.append(f"| {c.what} | {c.exit} | `{c.message}` |")
    rows += ["", "| Python API: `OrdinalMixture(...).fit(ratings)` | message (InputError) |"]
    rows.append("|---|---|")
    for kw, message in API_CASES:
        args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
        rows.append(f"| `{args}` | `{message}` |")
    return "\n".join(rows)


def test_doc_lists_every_case():
    doc = DOC.read_text()
    for line in table().splitlines():
        if line.startswith("| ") and "---" not in line:
            assert line in doc, f"docs/reliability.md lacks the row: {line}"


if __name__ == "__main__":  # pragma: no cover - prints the table for docs/reliability.md
    sys.stdout.write(table() + "\n")


@pytest.mark.slow
def test_a_refused_parquet_exits_2_with_one_line_every_time(tmp_path):
    """A Parquet file whose ratings are lists: one error line and exit 2 in 20 runs of 20, the
    process never aborting at its exit (pyarrow's thread pool, the interpreter's teardown)."""
    import subprocess

    import pyarrow as pa
    import pyarrow.parquet as pq

    ratings = pa.array([[1, 2], [3], [1]] * 1000, type=pa.list_(pa.int64()))
    ids = [f"a{i % 7}" for i in range(3000)], [f"i{i % 500}" for i in range(3000)]
    table = pa.table({"annotator": ids[0], "instance": ids[1], "rating": ratings})
    pq.write_table(table, tmp_path / "nested.parquet", row_group_size=100)
    argv = [sys.executable, "-c", "from ordmix_core.cli.main import run; run()", "fit"]
    argv += [str(tmp_path / "nested.parquet"), "--out", str(tmp_path / "out")]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(20)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, err
        assert err.splitlines() == [
            f"ordmix: error: {tmp_path / 'nested.parquet'}: column 'rating' holds "
            "list<element: int64> values, which are not plain text or numbers; store IDs and "
            "ratings as text or numbers"
        ]
    assert not (tmp_path / "out").exists()
