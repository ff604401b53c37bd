"""Where the read-only shared data lives (beside the repo, in CI too); tests skip without it."""

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TREC = SHARED / "data" / "trec-rf10"
ADULT = SHARED / "data" / "adult-content2"


def need_trec() -> Path:
    if not (TREC / "ratings.csv").exists():
        pytest.skip(f"TREC RF10 not found at {TREC} (the shared data folder beside the repo)")
    return TREC


def need_adult() -> Path:
    """AdultContent2 (4 levels G < P < R < X written 1..4, with gold)."""
    if not (ADULT / "ratings.csv").exists():
        pytest.skip(f"AdultContent2 not found at {ADULT} (the shared data folder beside the repo)")
    return ADULT
