"""The README's front page: short, its two commands, and its Python snippet runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_front_page_is_short_and_has_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 6 * 1024
    assert "    pip install -e . && streamlit run app.py\n" in text
    assert '    pip install -e ".[test]" && python -m pytest\n' in text
    for doc in re.findall(r"`(docs/[\w./-]+)`", text):
        assert (ROOT / doc).exists(), doc


def test_python_snippet_runs_on_ratings_without_a_query_column(tmp_path) -> None:
    (snippet,) = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    demo = pd.read_csv(ROOT / "demo_data" / "simulated-ratings.csv", dtype=str)
    demo.drop(columns="query").to_csv(tmp_path / "ratings.csv", index=False)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {}
        exec(compile(snippet, "README.md", "exec"), scope)
    finally:
        os.chdir(old)
    model = scope["model"]
    again = pd.read_csv(tmp_path / "ratings.csv", dtype=str)
    assert scope["labels"].equals(model.fit_predict(again))  # the same seed, the same labels
    assert scope["proba"].shape == (demo["instance"].nunique(), model.scale_.k)
    assert len(scope["flagged"]) == demo["annotator"].nunique()
    assert set(scope["flagged"]["flag"]) <= {"unreliable", "ok", "undetermined"}
