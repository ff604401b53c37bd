"""Data page: demo sets, uploads with column mapping and gold, scale edits, bad files."""

from __future__ import annotations

import io

import pandas as pd
from test_app_main import assert_clean, fit_current, load_simulated_demo, new_app, texts, ui

GOOD = (
    b"worker_id,doc,score,topic\n"
    b"a1,007,1,q1\n"
    b"a2,007,2,q1\n"
    b"a1,008,3,q1\n"
    b"a3,008,3,q1\n"
    b"a2,009,1,q2\n"
    b"a3,009,1,q2\n"
    b"a1,007,1,q1\n"
)


def upload(at, content: bytes, name: str = "ratings.csv", gold: tuple | None = None):
    at.radio(key="data_source").set_value("Upload a file").run()
    at.file_uploader(key="data_upload").upload(name, content, "text/csv")
    if gold is not None:
        at.file_uploader(key="data_gold_upload").upload(*gold, "text/csv")
    return at.run()


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def keyed(widgets, prefix: str):
    """The widget whose key is ``prefix:<upload id>`` (mapping widgets are keyed per upload)."""
    (w,) = [w for w in widgets if w.key.startswith(prefix + ":")]
    return w


def mapping(at) -> dict[str, str | None]:
    return {c: keyed(at.selectbox, f"data_map_{c}").value for c in MAPPED}


MAPPED = ("annotator", "instance", "rating", "query")


def test_pick_the_simulated_demo_shows_its_report():
    at = load_simulated_demo(new_app())
    assert any("Loaded Simulated crowd" in s for s in texts(at.success))
    m = metrics(at)
    assert (m["Ratings"], m["Annotators"], m["Instances"], m["Queries"], m["Gold items"]) == (
        "1,500",
        "30",
        "300",
        "10",
        "300",
    )
    assert "1,2,3,4,5" in " ".join(texts(at.markdown))


def test_upload_with_column_mapping_and_gold():
    at = new_app()
    gold = ("gold.csv", b"instance,truth\n007,1\n009,1\n")
    at = upload(at, GOOD, gold=gold)
    assert_clean(at)
    # names that are not aliases: mapped by hand
    keyed(at.selectbox, "data_map_annotator").set_value("worker_id")
    keyed(at.selectbox, "data_map_instance").set_value("doc")
    keyed(at.selectbox, "data_map_rating").set_value("score")
    keyed(at.selectbox, "data_map_query").set_value("topic")
    at.button(key="data_use_upload").click().run()
    assert_clean(at)
    assert not at.error, texts(at.error)
    m = metrics(at)
    assert (m["Ratings"], m["Annotators"], m["Instances"], m["Queries"]) == ("7", "3", "3", "2")
    assert m["Gold items"] == "2"
    report = " ".join(texts(at.markdown))
    assert "Repeated (annotator, instance) pairs: 1" in report
    assert "(1 exact duplicate rows)" in report
    ds = at.session_state["ordmix"]["dataset"]
    assert list(ds.ratings["instance"].unique()) == ["007", "008", "009"]  # leading zeros kept


def test_malformed_upload_shows_the_message_and_keeps_the_previous_data():
    at = new_app()
    bad = b'annotator,instance,rating\nw1,i1,3\nw2,i1,"4\nw3,i2,5\n'
    at = upload(at, bad, "broken.csv")
    assert_clean(at)
    assert any("broken quoting" in e or "row" in e for e in texts(at.error)), texts(at.error)
    assert any("previous data set" in e and "TREC" in e for e in texts(at.error))
    assert metrics(at) == {}  # st.stop() before the report of an unusable file
    at.radio(key="data_source").set_value("Demo data set").run()
    assert metrics(at)["Ratings"] == "91,783"


def test_excel_file_and_off_scale_rating_get_clear_errors():
    at = new_app()
    at = upload(at, b"PK\x03\x04" + b"\x00" * 40 + b"xl/workbook.xml", "ratings.csv")
    assert any("Excel" in e for e in texts(at.error)), texts(at.error)

    at = new_app()
    at = upload(at, b"annotator,instance,rating\nw1,i1,1\nw2,i1,7\n")
    keyed(at.text_input, "data_scale_upload").set_value("1,2,3")
    at.button(key="data_use_upload").click().run()
    assert_clean(at)
    assert any("not on the scale" in e for e in texts(at.error)), texts(at.error)
    assert metrics(at)["Ratings"] == "91,783"  # TREC still loaded


def test_a_new_upload_gets_its_own_column_mapping():
    """A valid file after one that could not be mapped is mapped from its own columns."""
    at = upload(new_app(), b"a,b,c\nw1,i1,3\nw2,i1,4\n", "unmapped.csv")
    assert mapping(at) == {"annotator": None, "instance": None, "rating": None, "query": "(none)"}
    at.button(key="data_use_upload").click().run()
    assert any("choose the annotator, instance, rating column(s)" in e for e in texts(at.error))
    at = upload(at, GOOD.replace(b"worker_id,doc,score,topic", b"worker,task,label,query"))
    assert_clean(at)
    assert mapping(at) == {"annotator": "worker", "instance": "task", "rating": "label",
                           "query": "query"}  # fmt: skip
    at.button(key="data_use_upload").click().run()
    assert not at.error, texts(at.error)
    assert metrics(at)["Ratings"] == "7"
    # a third file, the mapping chosen by hand for the second is not carried over either
    keyed(at.selectbox, "data_map_query").set_value("(none)").run()
    at = upload(at, b"annotator,item,rating\nw1,i1,3\nw2,i1,4\n", "third.csv")
    assert mapping(at) == {"annotator": "annotator", "instance": "item", "rating": "rating",
                           "query": "(none)"}  # fmt: skip


def test_sidebar_shows_the_new_data_and_no_old_fit_at_once():
    at = load_simulated_demo(new_app())
    at = fit_current(at, restarts=1)
    assert any(c.startswith("Fit: restart") for c in texts(at.sidebar.caption))
    at.switch_page("pages/data.py").run()
    at = upload(at, GOOD.replace(b"worker_id,doc,score,topic", b"worker,task,label,query"))
    at.button(key="data_use_upload").click().run()
    assert_clean(at)
    side = texts(at.sidebar.caption)
    assert any(c.startswith("Data: ratings.csv - 7 ratings") for c in side), side
    assert not any(c.startswith("Fit:") for c in side), side
    assert "No fit yet." in side
    assert any("Loaded ratings.csv" in m for m in texts(at.success))
    at.radio(key="data_source").set_value("Demo data set").run()
    assert at.selectbox(key="data_demo").value == ui().SIMULATED_DEMO  # remembered
    at.selectbox(key="data_demo").set_value(ui().DEFAULT_DEMO)
    at.button(key="data_load_demo").click().run()
    assert any(c.startswith("Data: TREC 2010") for c in texts(at.sidebar.caption))


def test_parquet_upload():
    df = pd.DataFrame(
        {"annotator": ["a", "b", "a"], "instance": ["x", "x", "y"], "rating": [1, 2, 2]}
    )
    buf = io.BytesIO()
    df.to_parquet(buf)
    at = upload(new_app(), buf.getvalue(), "r.parquet")
    at.button(key="data_use_upload").click().run()
    assert_clean(at)
    assert metrics(at)["Ratings"] == "3"
    assert metrics(at)["Queries"] == "-"


def test_scale_edit_adds_an_unused_level_and_refuses_a_wrong_one():
    at = load_simulated_demo(new_app())
    key = next(t.key for t in at.text_input if t.key.startswith("data_scale_edit"))
    at.text_input(key=key).set_value("1,2,3,4,5,6")
    at.button(key="data_apply_scale").click().run()
    assert_clean(at)
    assert "levels never used: 6" in " ".join(texts(at.markdown))
    key = next(t.key for t in at.text_input if t.key.startswith("data_scale_edit"))
    at.text_input(key=key).set_value("1,2,3")
    at.button(key="data_apply_scale").click().run()
    assert any("not on the scale" in e for e in texts(at.error))
    assert "1,2,3,4,5,6" in " ".join(texts(at.markdown))  # unchanged


def test_million_row_upload_is_handled():
    """A 1,000,000-row upload is read, validated and reported in reasonable time."""
    import time

    import numpy as np

    rng = np.random.default_rng(0)
    n = 1_000_000
    df = pd.DataFrame(
        {
            "annotator": np.char.add("w", rng.integers(0, 2000, n).astype(str)),
            "instance": np.char.add("i", rng.integers(0, 200_000, n).astype(str)),
            "rating": rng.integers(1, 6, n),
        }
    )
    content = df.to_csv(index=False).encode()
    at = new_app()
    at.default_timeout = 120
    t0 = time.perf_counter()
    at = upload(at, content, name="big.csv")
    at.button(key="data_use_upload").click().run()
    seconds = time.perf_counter() - t0
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert metrics(at)["Ratings"] == "1,000,000"
    assert seconds < 90, seconds


def test_going_back_to_data_keeps_the_upload_its_mapping_and_gold():
    """Data -> Fit -> Data: "Ratings from" stays on the upload, the uploaded ratings and gold
    files stay (streamlit's uploader forgets them), with the mapping chosen by hand, so the
    page never says "Loaded: ratings.csv" beside a demo it did not load."""
    at = upload(new_app(), GOOD, gold=("gold.csv", b"instance,truth\n007,1\n009,1\n"))
    for canon, col in (("annotator", "worker_id"), ("instance", "doc"), ("rating", "score"),
                       ("query", "topic")):  # fmt: skip
        keyed(at.selectbox, f"data_map_{canon}").set_value(col)
    at.button(key="data_use_upload").click().run()
    assert_clean(at)
    at = fit_current(at, restarts=1)
    at.switch_page("pages/data.py").run()
    assert_clean(at)
    assert at.radio(key="data_source").value == "Upload a file"
    assert any("Loaded: ratings.csv" in h for h in texts(at.header))
    assert any(w.startswith("**ratings.csv**: 7 rows") for w in texts(at.markdown))
    kept = " ".join(texts(at.caption))
    assert "**ratings.csv**, uploaded earlier, is kept" in kept
    assert "**gold.csv**, uploaded earlier, is kept" in kept
    assert mapping(at) == {"annotator": "worker_id", "instance": "doc", "rating": "score",
                           "query": "topic"}  # fmt: skip
    at.button(key="data_use_upload").click().run()  # the kept files load as before
    assert not at.error, texts(at.error)
    assert metrics(at)["Gold items"] == "2" and metrics(at)["Ratings"] == "7"
    at.button(key="data_forget_gold").click().run()
    assert "gold.csv" not in " ".join(texts(at.caption))
