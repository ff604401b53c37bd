"""Where the read-only shared data lives (beside the repo, in CI too); tests skip without it."""

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TREC = SHARED / "data" / "trec-rf10"
ADULT = SHARED / "data" / "adult-content2"


def need(name: str) -> Path:
    """The shared data set ``name``'s folder (``ratings.csv``, ``gold.csv``), or a skip."""
    folder = SHARED / "data" / name
    if not (folder / "ratings.csv").exists():
        pytest.skip(f"{name} not found at {folder} (the shared data folder beside the repo)")
    return folder


def need_trec() -> Path:
    return need(TREC.name)


def need_adult() -> Path:
    """AdultContent2 (4 levels G < P < R < X written 1..4, with gold)."""
    return need(ADULT.name)
