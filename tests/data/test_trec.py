"""TREC RF10 loader: the paper's counts on the real release, and the rules on tiny files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ordmix_core.data.trec import load_trec_rf10
from ordmix_core.errors import InputError

TREC = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "trec-rf10"
RAW = TREC / "raw" / "trec-rf10-data.txt"
HEADER = "topicID\tworkerID\tdocID\tgold\tlabel\n"


def write(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    p = tmp_path / "trec-rf10-data.txt"
    p.write_text(header + "".join(r + "\n" for r in rows))
    return p


@pytest.mark.skipif(not RAW.exists(), reason=f"shared TREC RF10 release not found at {RAW}")
def test_real_release_reproduces_paper_counts_and_shared_csvs():
    ratings, gold = load_trec_rf10(RAW)
    assert len(ratings) == 91_783
    assert ratings["annotator"].nunique() == 762
    assert ratings["query"].nunique() == 100
    assert ratings["instance"].nunique() == 20_026
    assert len(gold) == 3_275
    assert set(ratings["rating"]) == {1, 2, 3} and set(gold["truth"]) == {1, 2, 3}
    assert list(ratings.columns) == ["annotator", "instance", "rating", "query"]
    assert list(gold.columns) == ["instance", "truth"]
    shared_r = pd.read_csv(TREC / "ratings.csv", dtype=str)
    shared_g = pd.read_csv(TREC / "gold.csv", dtype=str)
    pd.testing.assert_frame_equal(ratings.astype(str), shared_r.astype(str))
    pd.testing.assert_frame_equal(gold.astype(str), shared_g.astype(str))


def test_processing_rules_on_a_tiny_release(tmp_path):
    p = write(
        tmp_path,
        [
            "007\tw1\tdocA\t2\t0",  # gold 2 -> 3, label 0 -> 1
            "007\tw2\tdocA\t2\t2",
            "007\tw1\tdocB\t-1\t1",  # no gold
            "007\tw3\tdocC\t-2\t1",  # broken link gold: not gold
            "008\tw1\tdocA\t0\t-2",  # label -2 dropped: instance 008:docA loses all ratings
            "008\tw2\tdocD\t1\t-2",  # dropped ...
            "008\tw3\tdocD\t1\t1",  # ... but docD keeps one rating and its gold
            "008\tw3\tdocD\t1\t1",  # a repeated judgment is kept
        ],
    )
    ratings, gold = load_trec_rf10(p)
    assert ratings.to_dict("list") == {
        "annotator": ["w1", "w2", "w1", "w3", "w3", "w3"],
        "instance": ["007:docA", "007:docA", "007:docB", "007:docC", "008:docD", "008:docD"],
        "rating": [1, 3, 2, 2, 2, 2],
        "query": ["007", "007", "007", "007", "008", "008"],
    }
    assert gold.to_dict("list") == {"instance": ["007:docA", "008:docD"], "truth": [3, 2]}
    assert ratings["query"].map(type).eq(str).all()  # leading zeros kept: IDs are strings


def test_blank_lines_and_crlf_are_tolerated(tmp_path):
    p = tmp_path / "crlf.txt"
    p.write_bytes(b"topicID\tworkerID\tdocID\tgold\tlabel\r\n1\tw\td\t1\t2\r\n\r\n")
    ratings, gold = load_trec_rf10(p)
    assert ratings["rating"].tolist() == [3] and gold["truth"].tolist() == [2]


@pytest.mark.parametrize(
    ("rows", "header", "match"),
    [
        (["1\tw1\tdocA\t-1\t3"], HEADER, r"row 2 .*label '3' is not one of"),
        (["1\tw1\tdocA\t-1\t1", "1\tw1\tdocB\tx\t1"], HEADER, r"row 3 .*gold 'x'"),
        (["1\tw1\tdocA\t-1"], HEADER, r"row 2 .*label '' .*too few"),
        (["1\t\tdocA\t-1\t1"], HEADER, r"row 2 .*empty workerID"),
        (["1\tw1\tdocA\t-1\t1\textra"], HEADER, r"row 2 .*more fields than the header"),
        (["1\tw1\tdocA\t-1\t1", "1\tw1\tdocB\t-1\t1\tx"], HEADER, r"cannot parse.*line 3"),
        (["1\tw1\tdocA\t2\t1", "1\tw2\tdocA\t0\t1"], HEADER, r"row 3 .*gold 0 here but 2 on row 2"),
        (["1,w1,docA,-1,1"], "topicID,workerID,docID,gold,label\n", r"header is"),
        ([], HEADER, r"no judgments"),
    ],
)
def test_malformed_files_name_file_row_and_fix(tmp_path, rows, header, match):
    p = write(tmp_path, rows, header)
    with pytest.raises(InputError, match=match) as err:
        load_trec_rf10(p)
    assert str(p) in str(err.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_trec_rf10(tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        load_trec_rf10(empty)
