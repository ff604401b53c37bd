"""Readers refuse bad files with a precise InputError; writers never leave half an output.

``python tests/io/test_io.py`` prints the Markdown table of cases and messages that
docs/reliability.md records.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ordmix_core.data.crowd import prepare
from ordmix_core.errors import InputError
from ordmix_core.io import (
    FORMULA_PREFIXES,
    MAX_CELL_CHARS,
    MAX_UPLOAD_MB,
    csv_safe,
    csv_unescape,
    read_crowd,
    read_gold,
    read_ratings,
    read_table,
    to_csv_bytes,
    write_csv,
    write_csv_chunks,
)
from ordmix_core.results.output_paths import atomic_output_dir

HDR = b"annotator,instance,rating\n"


def _parquet_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


_GOOD_PARQUET = _parquet_bytes(
    pd.DataFrame({"annotator": ["w1", "w2"], "instance": ["t1", "t1"], "rating": [1, 2]})
)

#: (what, file name, content, scale, substrings the message must contain)
MALFORMED: list[tuple[str, str, bytes, str | None, list[str]]] = [
    ("empty file (0 bytes)", "empty.csv", b"", None, ["0 bytes"]),
    ("only blank lines", "blank.csv", b"\n\n  \n", None, ["no header row"]),
    ("header only", "header.csv", HDR, None, ["header but no data rows"]),
    ("blank first line", "top.csv", b"\n" + HDR + b"w1,t1,3\n", None, ["row 1 is blank"]),
    (
        "NUL byte (binary)",
        "nul.csv",
        HDR + b"w1,t\x001,3\n",
        None,
        ["NUL byte at byte offset 30", "line 2"],
    ),
    (
        "Latin-1 text (not UTF-8)",
        "latin1.csv",
        HDR + b"w1,caf\xe9,3\n",
        None,
        ["not UTF-8", "0xE9", "byte offset 32", "line 2"],
    ),
    ("UTF-16 text", "utf16.csv", "annotator,instance,rating\n".encode("utf-16"), None, ["UTF-16"]),
    ("Parquet named .csv", "ratings.csv", _GOOD_PARQUET, None, ["Parquet", ".parquet"]),
    (
        "CSV text named .parquet",
        "ratings.parquet",
        HDR + b"w1,t1,3\n",
        None,
        ["not a Parquet file", "rename it to .csv"],
    ),
    (
        "truncated Parquet",
        "cut.parquet",
        _GOOD_PARQUET[: len(_GOOD_PARQUET) // 2],
        None,
        ["could not be read as Parquet"],
    ),
    (
        "xlsx named .csv",
        "sheet.csv",
        b"PK\x03\x04\x14\x00\x06\x00[Content_Types].xml xl/workbook.xml",
        None,
        ["Excel workbook", "save the sheet as CSV"],
    ),
    ("zip named .csv", "archive.csv", b"PK\x03\x04\x14\x00data.csv", None, ["zip archive"]),
    ("gzip named .csv", "ratings.csv", gzip.compress(HDR), None, ["gzip", "decompress"]),
    ("pickle named .csv", "model.csv", b"\x80\x04K\x01.", None, ["pickle", "never loaded"]),
    ("unknown extension .xlsx", "ratings.xlsx", HDR, None, ["'.xlsx'", ".csv, .tsv", ".parquet"]),
    ("unknown extension .json", "ratings.json", b"{}", None, ["'.json'", "accepted"]),
    ("pickle extension", "model.pkl", b"\x80\x04K\x01.", None, ["'.pkl'", "never loaded"]),
    (
        "unterminated quote",
        "quote.csv",
        HDR + b'w1,t1,3\nw2,"t2,4\nw3,t3,5\n',
        None,
        ["row 3", "never closed"],
    ),
    (
        "stray quote after quoted value",
        "stray.csv",
        HDR + b'w1,"t1"x,3\n',
        None,
        ["row 2", "broken quoting"],
    ),
    (
        "row with too few fields",
        "short.csv",
        HDR + b"w1,t1,3\nw2,t2,4\nw3,5\n",
        None,
        ["row 4", "2 field(s)", "header has 3"],
    ),
    (
        "row with too many fields (unquoted comma)",
        "long.csv",
        HDR + b"w1,t1,3\nw2,t,2,4\n",
        None,
        ["row 3", "4 field(s)", "quote values"],
    ),
    (
        "too many fields in the first row",
        "first.csv",
        HDR + b"w1,t1,3,9\nw2,t2,4\n",
        None,
        ["row 2", "4 field(s)"],
    ),
    (
        "blank line between rows",
        "gap.csv",
        HDR + b"w1,t1,3\n\nw2,t2,4\n",
        None,
        ["row 3", "blank"],
    ),
    (
        "duplicate column names",
        "dup.csv",
        b"annotator,instance,rating,rating\nw1,t1,3,4\n",
        None,
        ["'rating'", "columns 3 and 4"],
    ),
    (
        "space-delimited",
        "space.csv",
        b"annotator instance rating\nw1 t1 3\n",
        None,
        ["only one column", "delimiter ' ' (space)"],
    ),
    (
        "required column missing",
        "missing.csv",
        b"annotator,rating\nw1,3\n",
        None,
        ["instance", "missing"],
    ),
    (
        "empty ID cell",
        "emptycell.csv",
        HDR + b"w1,t1,3\n,t2,4\n",
        None,
        ["row 3", "'annotator'"],
    ),
    ("empty rating cell", "norating.csv", HDR + b"w1,t1,\n", None, ["row 2", "empty rating cell"]),
    ("text rating", "text.csv", HDR + b"w1,t1,3\nw1,t2,good\n", None, ["row 3", "'good'"]),
    (
        "rating off the given scale",
        "off.csv",
        HDR + b"w1,t1,3\nw1,t2,7\n",
        "1,2,3,4,5",
        ["row 3", "7 is not on the scale 1,2,3,4,5", "--scale"],
    ),
    (
        "fractional rating on an integer scale",
        "frac.csv",
        HDR + b"w1,t1,3\nw1,t2,3.5\n",
        "1,2,3,4,5",
        ["row 3", "3.5 is not on the scale"],
    ),
    (
        "named rating off the given scale",
        "levels.csv",
        HDR + b"w1,t1,low\nw1,t2,Medium\n",
        "low,medium,high",
        ["row 3", "'Medium' is not one of the scale's levels low, medium, high", "--scale"],
    ),
]


def _dup_rating_parquet() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.Table.from_arrays(
        [pa.array(["w1"]), pa.array(["t1"]), pa.array([3]), pa.array([4])],
        names=["annotator", "instance", "rating", "rating"],
    )
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


_LIKERT = b"".join(b"w%d,t%d,%d\n" % (i, i // 2, i % 5 + 1) for i in range(9))
_LONG = "x" * 1_100_000  # past MAX_CELL_CHARS (a 200,000-character ID is read)

#: bad inputs with clear messages, no silent garbage, reader side: (what, file name, content,
#: substrings of the message). Raised by ``read_ratings`` or, for what needs every rating
#: (an inferred scale, queries), by ``prepare`` on its result (``ordmix fit`` runs both).
ROUND_TWO: list[tuple[str, str, bytes, list[str]]] = [
    (
        "one rating 55 among 1..5 (scale inferred)",
        "typo.csv",
        HDR + _LIKERT + b"w9,t9,55\n",
        ["row 11", "rating 55 lies far outside the other ratings (1 to 5", "--scale"],
    ),
    (
        "a 'no answer' code 99 among 1..5 (scale inferred)",
        "code.csv",
        HDR + _LIKERT + b"w9,t9,99\nw9,t8,99\n",
        ["row 11", "rating 99 (also on row 12) lies far outside", "--scale"],
    ),
    (
        "99999999999999999999 among 1..5 (scale inferred)",
        "huge.csv",
        HDR + _LIKERT + b"w9,t9,99999999999999999999\n",
        ["row 11", "rating 1e+20 lies far outside", "--scale"],
    ),
    (
        "1e308 and -1e308 among 1..5 (scale inferred)",
        "inf.csv",
        HDR + _LIKERT + b"w9,t9,1e308\nw9,t8,-1e308\n",
        ["row 11", "ratings -1e+308 (row 12), 1e+308 (row 11) lie far outside"],
    ),
    (
        "a 1,100,000-character ID",
        "long.csv",
        HDR + b"w1," + _LONG.encode() + b",3\n",
        ["row 2", "'instance' is 1,100,000 characters long", "longer than 1,048,576"],
    ),
    (
        "a 1,100,000-character quoted ID",
        "longq.csv",
        HDR + b'w1,"' + _LONG.encode() + b'",3\n',
        ["row 2", "'instance' is 1,100,000 characters long", "longer than 1,048,576"],
    ),
    (
        "UTF-32 text with its byte-order mark",
        "utf32.csv",
        (HDR + b"w1,t1,3\n").decode().encode("utf-32"),
        ["the file is UTF-32 encoded text", "save it as UTF-8"],
    ),
    (
        "UTF-16LE text without a byte-order mark",
        "utf16le.csv",
        (HDR + b"w1,t1,3\n").decode().encode("utf-16-le"),
        ["UTF-16 encoded text (little-endian, without a byte-order mark)", "save it as UTF-8"],
    ),
    (
        "UTF-16BE text without a byte-order mark",
        "utf16be.csv",
        (HDR + b"w1,t1,3\n").decode().encode("utf-16-be"),
        ["UTF-16 encoded text (big-endian, without a byte-order mark)"],
    ),
    (
        "zero-width space in a header name",
        "zw.csv",
        "\u200bannotator,instance,rating\nw1,t1,3\n".encode(),
        ["found: '\\u200bannotator', instance, rating", "U+200B (ZERO WIDTH SPACE)"],
    ),
    (
        "Parquet file with two rating columns",
        "dup.parquet",
        _dup_rating_parquet(),
        ["column name 'rating' appears more than once (columns 3 and 4)"],
    ),
    (
        "an instance in two queries",
        "queries.csv",
        b"annotator,instance,rating,query\nw1,t1,1,q1\nw2,t2,2,q1\nw3,t1,3,q2\n",
        ["row 4", "instance 't1' has query 'q2' here but 'q1' earlier"],
    ),
]


def _message(content: bytes, name: str, scale: str | None) -> str:
    with pytest.raises(InputError) as err:
        read_ratings(content, name=name, scale=scale)
    return str(err.value)


@pytest.mark.parametrize("what,name,content,scale,expect", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_upload_is_refused_precisely(what, name, content, scale, expect):
    msg = _message(content, name, scale)
    assert msg.startswith(f"{name}: "), msg
    for part in expect:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert "\n" not in msg  # the CLI prints it on one line


def _round_two_message(content: bytes, name: str) -> str:
    with pytest.raises(InputError) as err:
        prepare(read_ratings(content, name=name))
    return str(err.value)


@pytest.mark.parametrize("what,name,content,expect", ROUND_TWO, ids=[c[0] for c in ROUND_TWO])
def test_round_two_cases_get_a_precise_message(what, name, content, expect):
    msg = _round_two_message(content, name)
    assert msg.startswith(f"{name}: "), msg
    for part in expect:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert "\n" not in msg


def test_long_values_only_past_the_limit_and_unclosed_quotes_still_named():
    ok = "y" * MAX_CELL_CHARS
    for row in (b"w1," + ok.encode() + b",3\n", b'w1,"' + ok.encode() + b'",3\n'):
        assert read_table(HDR + row, name="r.csv")["instance"].tolist() == [ok]
    tail = b"".join(b"w%d,t%d,3\n" % (i, i) for i in range(100_000))  # > the limit after it
    with pytest.raises(InputError, match=r"row 3 .*never closed"):
        read_ratings(HDR + b'w1,t1,3\nw2,"t2,4\n' + tail, name="q.csv")


@pytest.mark.parametrize(
    "bad", [b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe9"], ids=str
)
@pytest.mark.parametrize("quoted", [False, True], ids=["fast", "precise"])
def test_invalid_utf8_is_refused_on_both_paths(bad, quoted):
    q = b'"' if quoted else b""
    content = HDR + b"w1,t1,3\n" + q + b"w" + bad + q + b",t2,4\n"
    offset = len(HDR) + 8 + len(q) + 1
    with pytest.raises(InputError) as err:
        read_table(content, name="u.csv")
    assert f"is not UTF-8 text: byte 0x{bad[0]:02X} at byte offset {offset} (line 3)" in str(
        err.value
    )


def test_read_table_is_text_and_read_ratings_is_coded():
    content = HDR.replace(b"\n", b",query\n") + b"w2,t1,3,q\nw1,t2,4,q\nw2,t2,5,q\n"
    table = read_table(content, name="r.csv")
    assert all(str(t) == "str" for t in table.dtypes)
    df = read_ratings(content, name="r.csv")
    assert df.attrs["source"] == "r.csv" and df["rating"].dtype == float
    for c, cats in (("annotator", ["w1", "w2"]), ("instance", ["t1", "t2"]), ("query", ["q"])):
        assert isinstance(df[c].dtype, pd.CategoricalDtype)
        assert list(df[c].cat.categories) == cats  # sorted distinct IDs, each stored once
    assert df["annotator"].tolist() == ["w2", "w1", "w2"]


def test_named_levels_are_read_once_and_fit_again_unchanged():
    """``read_ratings`` with a scale of names gives the levels' values and remembers the
    names, so a fit with the same scale takes the frame as it is; ``read_crowd`` agrees."""
    from ordmix_core import OrdinalMixture

    content = HDR + b"w1,t1,low\nw2,t1,high\nw1,t2, medium\nw2,t2,medium\nw3,t2,high\n"
    df = read_ratings(content, name="n.csv", scale="low,medium,high")
    assert df["rating"].tolist() == [1.0, 3.0, 2.0, 2.0, 3.0]
    assert df.attrs["levels"] == ("low", "medium", "high")
    data = prepare(df, "low,medium,high")
    assert data.level.tolist() == [0, 2, 1, 1, 2] and data.scale.names == ("low", "medium", "high")
    crowd = read_crowd(content, name="n.csv", scale="low,medium,high")
    assert crowd.level.tolist() == data.level.tolist() and crowd.scale.same_as(data.scale)
    m = OrdinalMixture(scale="low,medium,high", n_restarts=1, random_state=0).fit(df)
    assert m.probas_.columns.tolist() == ["low", "medium", "high"]
    assert set(m.labels_) <= {"low", "medium", "high"}
    with pytest.raises(InputError, match="rating 'low' is not a number"):
        read_ratings(content, name="n.csv")  # no order given: refused, naming the names


def test_read_crowd_is_prepare_of_read_ratings():
    content = HDR.replace(b"\n", b",query\n") + b"w2,t1,3,q\nw1,t2,4,q\nw2,t2,5,r\n"
    with pytest.raises(InputError, match=r"^c\.csv: row 4 .*instance 't2' has query 'r'"):
        read_crowd(content, name="c.csv", granularity="query")
    content = content.replace(b",r\n", b",q\n")
    data = read_crowd(content, name="c.csv", scale="1,2,3,4,5", granularity="query")
    ref = prepare(read_ratings(content, name="c.csv"), "1,2,3,4,5", "query")
    for f in ("ann", "inst", "level", "cat_of_inst", "annotators", "instances", "categories"):
        assert getattr(data, f).tolist() == getattr(ref, f).tolist()
    assert data.scale.k == 5


# --------------------------------------------------------------------------- both text paths

_CELL = st.text(
    alphabet=st.sampled_from(list('ab ,;"\n\r\t=-é工😀\x85\u3000') + ["0", "7"]), max_size=6
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(_CELL, _CELL, _CELL), min_size=1, max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_any_table_written_by_pythons_csv_reads_back_exactly(rows, newline):
    """Quoted or not, every table a CSV writer produces is read cell for cell (the fast path
    when no cell needs quotes, the precise one otherwise)."""
    if all(c == "" for c in rows[-1]):  # a last row of empty cells is written as a bare ",,"
        rows = [*rows, ("x", "y", "z")]
    if any("\r" in c or "\n" in c for r in rows for c in r):
        newline = "\r\n"  # the writer quotes only the line terminator's characters
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=newline)
    w.writerow(["annotator", "instance", "rating"])
    w.writerows(rows)
    table = read_table(buf.getvalue().encode(), name="r.csv")
    assert [tuple(r) for r in table.itertuples(index=False)] == [tuple(r) for r in rows]


_GARBAGE = st.lists(
    st.sampled_from(list('ab0 ,"\n\r=é') + ["w1,t1,3\n", ",,\n", '""', '"\n']), max_size=60
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_GARBAGE)
def test_accepted_garbage_is_what_strict_csv_reads(body):
    """Whatever the reader accepts is exactly what Python's strict csv module reads from the
    same text: header and rows, cell for cell (trailing blank lines dropped)."""
    text = "annotator,instance,rating\n" + body
    try:
        table = read_table(text.encode(), name="g.csv")
    except InputError:
        return
    ref = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    while ref and ref[-1] == []:
        ref.pop()
    assert [list(table.columns)] + [list(r) for r in table.itertuples(index=False)] == ref


@pytest.mark.parametrize("what,name,content,scale,expect", MALFORMED[:12], ids=str)
def test_malformed_file_on_disk_names_its_path(tmp_path, what, name, content, scale, expect):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_ratings(path, scale=scale)
    assert str(err.value).startswith(f"{path}: ")
    for part in expect:
        assert part in str(err.value)


def test_missing_path_and_folder(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_ratings(tmp_path / "nope.csv")
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(InputError, match="folder"):
        read_ratings(tmp_path / "dir.csv")


def test_not_a_source():
    with pytest.raises(InputError, match="expected a file path"):
        read_table(12345)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- valid inputs


def test_ids_are_strings_with_leading_zeros(tmp_path):
    p = tmp_path / "r.csv"
    p.write_bytes(HDR + b"007,0042,3\n7,42,4\n1e3,NaN,5\n")
    df = read_ratings(p)
    assert list(df["annotator"]) == ["007", "7", "1e3"]
    assert list(df["instance"]) == ["0042", "42", "NaN"]
    assert df["rating"].tolist() == [3.0, 4.0, 5.0]


def test_empty_cells_are_empty_strings():
    df = read_table(b"a,b,c\n1,,3\n,NA,\n", name="x.csv")
    assert df.to_dict("list") == {"a": ["1", ""], "b": ["", "NA"], "c": ["3", ""]}


def test_unicode_and_very_long_ids_round_trip():
    long_id = "x" * 10_000
    df = pd.DataFrame(
        {
            "annotator": ["ü-ñ-工人", "😀", long_id],
            "instance": ["文档,1", 'say "hi"\nthen', "t"],
            "rating": [1, 2, 3],
        }
    )
    out = read_ratings(df.to_csv(index=False).encode("utf-8"), name="u.csv")
    assert list(out["annotator"]) == list(df["annotator"])
    assert list(out["instance"]) == list(df["instance"])


def test_crowdkit_column_names_and_repeated_pairs_kept():
    content = b"worker,task,label\nw1,t1,1\nw1,t1,2\nw2,t1,2\n"
    df = read_ratings(content, name="ck.tsv")  # comma content under .tsv: sniffed
    assert list(df.columns) == ["annotator", "instance", "rating"]
    assert len(df) == 3  # the repeated (w1, t1) pair stays two ratings


def test_parquet_round_trip(tmp_path):
    df = pd.DataFrame(
        {
            "annotator": ["007", "w2", "w3"],
            "instance": ["t1", "t1", "t2"],
            "rating": [1.0, 2.0, 3.0],
            "query": ["q1", "q1", "q2"],
        }
    )
    p = tmp_path / "r.parquet"
    df.to_parquet(p, index=False)
    out = read_ratings(p)
    assert out.attrs["source"] == str(p)
    ids = {"annotator": str, "instance": str, "query": str}  # IDs come back coded (Categorical)
    pd.testing.assert_frame_equal(out.astype(ids), df, check_dtype=False)


def test_parquet_numbers_and_nulls_become_strings():
    raw = pd.DataFrame({"annotator": [1, 2], "instance": ["a", None], "rating": [3, 4]})
    df = read_table(_parquet_bytes(raw), name="x.pq")
    assert df.to_dict("list") == {
        "annotator": ["1", "2"],
        "instance": ["a", ""],
        "rating": ["3", "4"],
    }


def test_parquet_without_name_detected_from_content():
    assert len(read_ratings(_GOOD_PARQUET)) == 2


def test_header_only_parquet_refused():
    empty = _parquet_bytes(pd.DataFrame({"annotator": [], "instance": [], "rating": []}))
    with pytest.raises(InputError, match="no rows"):
        read_ratings(empty, name="e.parquet")


@pytest.mark.parametrize(
    "content",
    [
        b"\xef\xbb\xbfannotator,instance,rating\nw1,t1,3\n",  # UTF-8 BOM
        b"annotator;instance;rating\nw1;t1;3\n",  # semicolon
        b"annotator\tinstance\trating\nw1\tt1\t3\n",  # tab under .csv
        b"annotator|instance|rating\nw1|t1|3\n",  # pipe
        b"annotator,instance,rating\r\nw1,t1,3\r\n",  # CRLF
        b"annotator,instance,rating\rw1,t1,3\r",  # old-Mac CR
        b"annotator,instance,rating\nw1,t1,3\n\n\n",  # trailing blank lines
        b'"annotator","instance","rating"\n"w1","t1","3"',  # all quoted, no final newline
        b"sep=;\r\nannotator;instance;rating\r\nw1;t1;3\r\n",  # Excel's delimiter hint
    ],
    ids=["bom", "semicolon", "tab", "pipe", "crlf", "cr", "trailing-blank", "quoted", "sep="],
)
def test_dialects_are_read(content):
    df = read_ratings(content, name="r.csv")
    assert df.to_dict("list") == {"annotator": ["w1"], "instance": ["t1"], "rating": [3.0]}


def test_semicolon_with_decimal_commas_sniffed():
    df = read_table(b"annotator;instance;rating\nw1;t,1;3,5\nw2;t2;4\n", name="r.csv")
    assert list(df.columns) == ["annotator", "instance", "rating"]
    assert df["instance"].tolist() == ["t,1", "t2"]


def test_tsv_with_commas_in_ids():
    df = read_ratings(b"annotator\tinstance\trating\nw1\ta,b,c\t2\n", name="r.tsv")
    assert df["instance"].tolist() == ["a,b,c"]


def test_file_like_upload_uses_its_name():
    class Upload(io.BytesIO):
        name = "upload.tsv"

    buf = Upload(b"annotator\tinstance\trating\nw1\tt1\t3\n")
    buf.read()  # a consumed stream is rewound
    assert len(read_ratings(buf)) == 1
    with pytest.raises(InputError, match=r"^upload\.tsv: "):
        read_ratings(Upload(b""))


def test_scale_given_and_met():
    df = read_ratings(HDR + b"w1,t1,1\nw2,t1,5\n", name="r.csv", scale=[1, 2, 3, 4, 5])
    assert df["rating"].tolist() == [1.0, 5.0]


def test_max_upload_constant():
    assert MAX_UPLOAD_MB == 200


# --------------------------------------------------------------------------- gold


def test_gold_aliases_and_consistent_duplicates():
    g = read_gold(b"task,true_label,other\n007,3,x\nt2,1,y\n007,3,z\n", name="g.csv")
    assert g.name == "truth" and g.index.name == "instance"
    assert g.to_dict() == {"007": 3.0, "t2": 1.0}
    assert g.dtype == float


def test_gold_written_as_named_levels():
    g = read_gold(b"instance,truth\nt1,G\nt2, X\nt3,P\n", name="g.csv", scale="G,P,R,X")
    assert g.to_dict() == {"t1": 1.0, "t2": 4.0, "t3": 2.0}
    with pytest.raises(InputError) as err:
        read_gold(b"instance,truth\nt1,G\nt2,x\n", name="g.csv", scale="G,P,R,X")
    assert str(err.value) == (
        "g.csv: row 3 (counting the header as row 1): truth 'x' is not a level of the scale "
        "(1 such row(s)); true labels must be the scale's levels G, P, R, X"
    )


@pytest.mark.parametrize(
    "content,expect",
    [
        (b"instance,truth\nt1,3\nt1,4\n", ["row 3", "'t1'", "4", "3 earlier"]),
        (b"instance,truth\nt1,3\nt2,high\n", ["row 3", "'high'"]),
        (b"instance,truth\nt1,3\n,2\n", ["row 3", "empty 'instance'"]),
        (b"instance,score\nt1,3\n", ["truth missing"]),
        (b"instance,truth,gold\nt1,3,3\n", ["both mean 'truth'"]),
    ],
)
def test_gold_errors(content, expect):
    with pytest.raises(InputError) as err:
        read_gold(content, name="gold.csv")
    msg = str(err.value)
    assert msg.startswith("gold.csv: ")
    for part in expect:
        assert part in msg


# --------------------------------------------------------------------------- fuzzing


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.binary(max_size=400),
    st.sampled_from(["f.csv", "f.tsv", "f.txt", "f.parquet", None]),
)
def test_fuzz_random_bytes_only_input_error(data, name):
    try:
        df = read_ratings(data, name=name)
    except InputError:
        return
    _assert_sane(df)


def _assert_sane(df: pd.DataFrame, scale: str | None = None) -> None:
    """What any accepted input must look like: the columns, coded non-blank text IDs in
    sorted order, finite ratings (on the scale if one was given), the source remembered."""
    assert list(df.columns)[:3] == ["annotator", "instance", "rating"] and len(df) > 0
    assert set(df.columns) <= {"annotator", "instance", "rating", "query"}
    for c in set(df.columns) - {"rating"}:
        cats = list(df[c].cat.categories)
        assert all(isinstance(x, str) and x.strip() for x in cats)
        assert cats == sorted(set(cats)) and (df[c].cat.codes >= 0).all()
    r = df["rating"].to_numpy()
    assert r.dtype == float and np.isfinite(r).all()
    if scale is not None:
        assert set(r) <= {float(v) for v in scale.split(",")}
    assert df.attrs["source"]


_CSVISH = st.lists(
    st.sampled_from(list('ab01 .-=",;\t|\n\r\x00é😀') + ["annotator", "rating", "3", "\n"]),
    max_size=120,
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(
        ["annotator,instance,rating\n", "worker;task;label\n", "annotator\tinstance\trating\n", ""]
    ),
    _CSVISH,
    st.sampled_from(["f.csv", "f.tsv", None]),
    st.sampled_from([None, "1,2,3"]),
)
def test_fuzz_csvish_text_only_input_error(header, body, name, scale):
    try:
        df = read_ratings((header + body).encode("utf-8"), name=name, scale=scale)
    except InputError:
        return
    _assert_sane(df, scale)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(_GOOD_PARQUET) - 1), st.integers(0, 255)),
        min_size=1,
        max_size=6,
    )
)
def test_fuzz_damaged_parquet_only_input_error(flips):
    damaged = bytearray(_GOOD_PARQUET)
    for i, v in flips:
        damaged[i] = v
    try:
        df = read_ratings(bytes(damaged), name="d.parquet")
    except InputError:
        return
    _assert_sane(df)


# --------------------------------------------------------------------------- big input


@pytest.fixture(scope="module")
def million_rows(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    n = 1_000_000
    a = rng.integers(0, 5_000, n)
    i = rng.integers(0, 200_000, n)
    r = rng.integers(1, 6, n)
    lines = np.char.add(
        np.char.add(np.char.add(np.char.add("w", a.astype(str)), ",t"), i.astype(str)),
        np.char.add(",", r.astype(str)),
    )
    path = tmp_path_factory.mktemp("big") / "million.csv"
    path.write_text("annotator,instance,rating\n" + "\n".join(lines.tolist()) + "\n")
    return path


def test_million_rows_read_quickly(million_rows):
    t0 = time.perf_counter()
    df = read_ratings(million_rows)
    elapsed = time.perf_counter() - t0
    assert df.shape == (1_000_000, 3)
    assert df["rating"].between(1, 5).all()
    assert elapsed < 30, f"1M-row read took {elapsed:.1f} s"


def test_bad_row_deep_in_a_big_file_is_located(million_rows, tmp_path):
    content = bytearray(million_rows.read_bytes())
    cut = content.index(b"\n", len(content) // 2)
    row = content.count(b"\n", 0, cut) + 2  # the record after that newline
    content[cut + 1 : cut + 1] = b"oops\n"
    with pytest.raises(InputError, match=f"row {row} .*1 field"):
        read_ratings(bytes(content), name="big.csv")


# --------------------------------------------------------------------------- atomic output


def _make_output(path: Path, text: str) -> None:
    path.mkdir()
    (path / "estimates.csv").write_text(text)


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def test_atomic_output_creates_and_replaces(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out) as d:
        assert d.parent == tmp_path and d != out
        (d / "a.csv").write_text("first")
    assert (out / "a.csv").read_text() == "first"
    with atomic_output_dir(out) as d:
        (d / "b.csv").write_text("second")
    assert sorted(os.listdir(out)) == ["b.csv"]  # the old output is gone, not merged
    assert _siblings(out) == []


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_atomic_output_interrupted_keeps_old(tmp_path, exc):
    out = tmp_path / "out"
    _make_output(out, "old")
    with pytest.raises(type(exc)):
        with atomic_output_dir(out) as d:
            (d / "estimates.csv").write_text("half")
            raise exc
    assert (out / "estimates.csv").read_text() == "old"
    assert sorted(os.listdir(out)) == ["estimates.csv"]
    assert _siblings(out) == []


def test_atomic_output_interrupted_first_run_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        with atomic_output_dir(out):
            raise KeyboardInterrupt
    assert not out.exists() and _siblings(out) == []


def test_atomic_output_failed_swap_restores_old(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _make_output(out, "old")
    real = os.replace
    calls = []

    def flaky(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # interrupted between moving the old aside and the new in
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(KeyboardInterrupt):
        with atomic_output_dir(out) as d:
            (d / "estimates.csv").write_text("new")
    monkeypatch.setattr(os, "replace", real)
    assert (out / "estimates.csv").read_text() == "old"
    assert _siblings(out) == []


def test_atomic_output_refuses_a_file(tmp_path):
    f = tmp_path / "out"
    f.write_text("x")
    with pytest.raises(InputError, match="is a file"):
        with atomic_output_dir(f):
            pass
    assert f.read_text() == "x"


# --------------------------------------------------------------------------- csv safety


@pytest.mark.parametrize("prefix", FORMULA_PREFIXES)
def test_csv_safe_neutralises_each_prefix(prefix):
    df = pd.DataFrame({"instance": [prefix + "cmd|' /C calc'!A0", "ok"], "estimate": [1.0, 2.0]})
    out = csv_safe(df, ["instance"])
    assert out["instance"].tolist() == ["'" + prefix + "cmd|' /C calc'!A0", "ok"]
    assert df["instance"][0].startswith(prefix)  # input not modified


def test_csv_safe_leaves_normal_ids_and_numbers_alone():
    df = pd.DataFrame(
        {
            "annotator": ["w1", "007", "a=b", "x-1", "'quoted"],
            "estimate": [-1.5, 2.0, 3.0, -4.0, 5.0],
            "n": [-1, 2, 3, 4, 5],
        }
    )
    out = csv_safe(df)
    pd.testing.assert_frame_equal(out, df, check_dtype=False)
    assert out["estimate"].dtype == float and out["n"].dtype == df["n"].dtype


def test_csv_safe_index_and_labels():
    s = pd.Series([1.0, 2.0], index=pd.Index(["=1+1", "t2"], name="instance"), name="estimate")
    out = csv_safe(s)
    assert out.index.tolist() == ["'=1+1", "t2"] and out.index.name == "instance"
    wide = csv_safe(pd.DataFrame({"@SUM(A1)": [1], "ok": [2]}))
    assert list(wide.columns) == ["'@SUM(A1)", "ok"]


def test_csv_safe_never_merges_two_ids():
    """``=1+1`` and ``'=1+1`` are different instances: written differently, read back apart."""
    ids = ["=1+1", "'=1+1", "''=1+1", "'x", "x"]
    df = pd.DataFrame({"instance": ids, "e": range(5)})
    out = csv_safe(df, ["instance"])["instance"].tolist()
    assert out == ["'=1+1", "''=1+1", "'''=1+1", "'x", "x"]
    assert [csv_unescape(v) for v in out] == ids
    back = pd.read_csv(io.BytesIO(to_csv_bytes(df, ["instance"])), dtype=str)
    assert back["instance"].tolist() == out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=8), min_size=1, max_size=20))
def test_csv_safe_property(ids):
    df = pd.DataFrame({"instance": ids, "x": range(len(ids))})
    once = csv_safe(df, ["instance"])
    assert not any(v.startswith(FORMULA_PREFIXES) for v in once["instance"])
    assert [v[1:] if v != o else v for v, o in zip(once["instance"], ids, strict=True)] == ids
    # injective: distinct IDs stay distinct, and each cell says which ID it stands for
    assert once["instance"].nunique() == len(set(ids))
    assert [csv_unescape(v) for v in once["instance"]] == ids


def test_write_csv_and_bytes(tmp_path):
    df = pd.DataFrame({"instance": ["=HYPERLINK(1)", "t2"], "estimate": [-1.0, 2.0]})
    p = write_csv(df, tmp_path / "e.csv", ["instance"])
    text = p.read_text()
    assert text == "instance,estimate\n'=HYPERLINK(1),-1.0\nt2,2.0\n"
    assert to_csv_bytes(df, ["instance"]) == text.encode()
    assert _siblings(p) == []
    s = pd.Series([0.5], index=pd.Index(["+x"], name="instance"), name="estimate")
    assert to_csv_bytes(s) == b"instance,estimate\n'+x,0.5\n"


# --------------------------------------------------------------------------- docs table


def _doc_table() -> str:
    rows = ["| input | file | message |", "|---|---|---|"]
    for what, name, content, scale, _ in MALFORMED:
        try:
            read_ratings(content, name=name, scale=scale)
            msg = "(accepted)"
        except InputError as e:
            msg = str(e)
        what = what + (f" (scale {scale})" if scale else "")
        msg = msg.replace("|", "\\|")
        rows.append(f"| {what} | `{name}` | `{msg}` |")
    return "\n".join(rows)


def _round_two_table() -> str:
    rows = ["| input | file | message |", "|---|---|---|"]
    for what, name, content, _ in ROUND_TWO:
        try:
            prepare(read_ratings(content, name=name))
            msg = "(accepted)"
        except InputError as e:
            msg = str(e)
        msg = msg.replace("|", "\\|")
        rows.append(f"| {what} | `{name}` | `{msg}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(_doc_table())
    print()
    print(_round_two_table())


def test_write_csv_chunks_writes_the_bytes_of_the_whole_frame(tmp_path) -> None:
    """Frames written one after another (formula-like IDs among them) give the bytes of the
    frame they make together; nothing is left behind when a chunk fails."""
    rng = np.random.default_rng(0)
    n = 23
    df = pd.DataFrame(
        {
            "instance": [("=" if k % 5 == 0 else "i") + str(k) for k in range(n)],
            "estimate": rng.normal(size=n),
            "n_ratings": rng.integers(0, 9, n),
            "flag": rng.choice(["ok", "undetermined"], n),
        }
    )
    whole = to_csv_bytes(df, ["instance"])
    for cuts in ([], [1], [5, 6, 20], list(range(1, n))):
        bounds = [0, *cuts, n]
        parts = [
            df.iloc[a:b].reset_index(drop=True)
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        path = write_csv_chunks(parts, tmp_path / "t.csv", ["instance"])
        assert path.read_bytes() == whole, cuts
    with pytest.raises(ValueError, match="at least one frame"):
        write_csv_chunks([], tmp_path / "none.csv")

    def failing():
        yield df.iloc[:3]
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_csv_chunks(failing(), tmp_path / "half.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
