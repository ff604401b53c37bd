"""docs/outputs.md documents every column ``ordmix fit`` writes, and nothing it does not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from _cli_helpers import run_cli

from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.results.outputs import FILES

DOC = Path(__file__).resolve().parents[2] / "docs" / "outputs.md"


def documented(section: str) -> set[str]:
    """The column names in the first cell of each row of the ``## <section>`` table."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in body.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


@pytest.fixture(scope="module")
def fit_folder(tmp_path_factory) -> Path:
    """A fit with every optional column: a query column and gold."""
    d = tmp_path_factory.mktemp("outputs-doc")
    crowd = simulate_crowd(n_items=60, n_annotators=8, ratings_per_item=3, random_state=4)
    crowd.ratings.to_csv(d / "r.csv", index=False)
    crowd.gold.iloc[:10].to_csv(d / "gold.csv")
    argv = ["fit", d / "r.csv", "--gold", d / "gold.csv", "--granularity", "query"]
    rc, err, _ = run_cli([*argv, "--out", d / "o", "--restarts", "2", "--quiet"])
    assert rc == 0, err
    return d / "o"


@pytest.mark.parametrize("table", ["items", "annotators", "categories", "trace", "restarts"])
def test_every_written_column_has_a_row_and_every_row_a_column(fit_folder, table) -> None:
    written = list(pd.read_csv(fit_folder / f"{table}.csv", nrows=1).columns)
    doc = documented(f"{table}.csv")
    generic = {c for c in written if re.fullmatch(r"p_level_.+", c)}
    assert generic and "p_level_<v>" in doc if table == "items" else not generic
    missing = [c for c in written if c not in doc and c not in generic]
    assert not missing, f"docs/outputs.md lacks a row for {table}.csv's {missing}"
    stale = doc - set(written) - {"p_level_<v>"}
    assert not stale, f"docs/outputs.md documents {stale}, which {table}.csv does not have"


def test_every_file_and_summary_key_is_documented(fit_folder) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert all(f"## {name}" in text for name in FILES)
    summary = json.loads((fit_folder / "summary.json").read_text())
    body = text.split("## summary.json", 1)[1]
    missing = [k for k in summary if f"`{k}`" not in body]
    assert not missing, f"docs/outputs.md's summary.json section lacks {missing}"


def test_fit_help_points_to_the_data_dictionary() -> None:
    rc, _, out = run_cli(["fit", "--help"])
    assert rc == 0 and "docs/outputs.md" in " ".join(out.split())
