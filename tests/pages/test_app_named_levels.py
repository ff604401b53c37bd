"""Named levels on the dashboard: ratings written as names, their order typed on the Data
page, and the names on every page after (tables, charts, downloads)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from test_app_main import assert_clean, charts, fit_current, new_app, texts

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["none", "low", "medium", "high", "top"]  # the simulated demo's 1..5, named


def _named_demo() -> bytes:
    r = pd.read_csv(ROOT / "demo_data" / "simulated-ratings.csv", dtype=str)
    r["rating"] = r["rating"].map(dict(zip("12345", NAMES, strict=True)))
    return r.to_csv(index=False).encode()


def _load(at, scale: str):
    at.radio(key="data_source").set_value("Upload a file").run()
    at.file_uploader(key="data_upload").upload("named.csv", _named_demo(), "text/csv")
    at.run()
    (box,) = [w for w in at.text_input if w.key.startswith("data_scale_upload:")]
    box.set_value(scale)
    return at.button(key="data_use_upload").click().run()


def test_named_levels_are_refused_without_their_order_and_taken_with_it():
    at = _load(new_app(), "")
    assert any("give their order as the scale, lowest level first" in e for e in texts(at.error))
    at = _load(at, ",".join(NAMES))
    assert_clean(at)
    assert not at.error, texts(at.error)
    ds = at.session_state["ordmix"]["dataset"]
    assert ds.scale.names == tuple(NAMES) and ds.n_ratings == 1500
    counts = next(d.value for d in at.dataframe if "ratings" in d.value.columns)
    assert counts.index.tolist() == NAMES  # the report's level counts, by name
    # reordered on the Data page: the same ratings, the levels in the new order
    at.text_input(key=f"data_scale_edit:named.csv:{','.join(NAMES)}").set_value(
        ",".join(NAMES[::-1])
    )
    at.button(key="data_apply_scale").click().run()
    assert_clean(at)
    flipped = at.session_state["ordmix"]["dataset"]
    assert flipped.scale.names == tuple(NAMES[::-1])
    assert (flipped.data.values == 6 - ds.data.values).all()


def test_every_page_shows_the_names(csv_downloads):
    at = fit_current(_load(new_app(), ",".join(NAMES)), restarts=1)
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert set(table["label"]) <= set(NAMES)
    assert [c for c in table if c.startswith("p_level_")] == [f"p_level_{n}" for n in NAMES]
    assert set(table["lower_90"]) <= set(NAMES) and set(table["upper_90"]) <= set(NAMES)
    figs = charts(at)
    assert {t["name"] for t in figs["items_levels_plot"]["data"]} == set(NAMES)
    assert figs["items_distribution"]["layout"]["xaxis"]["ticktext"] == NAMES
    assert figs["items_query_plot"]["layout"]["yaxis"]["ticktext"] == NAMES  # with queries
    items_csv = pd.read_csv(io.BytesIO(csv_downloads[0]), dtype=str)
    assert set(items_csv["label"]) <= set(NAMES)
    at.switch_page("pages/annotators.py").run()
    assert_clean(at)
    bars = charts(at)["ann_why_histogram"]["data"]
    assert [str(x) for x in bars[0]["x"]] == NAMES
    why = next(d.value for d in at.dataframe if "agrees" in d.value.columns)
    assert set(why["rating"]) <= set(NAMES) and why["agrees"].any()
    for page in ("pages/convergence.py", "pages/fit.py", "pages/compare.py"):
        at.switch_page(page).run()
        assert_clean(at)
