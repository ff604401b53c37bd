"""Items page: table with intervals, search and sort, distribution, per-query view, safe CSV."""

from __future__ import annotations

import io

import pandas as pd
from test_app_main import assert_clean, charts, demo_and_fit, fit_current, new_app, texts

import ordmix_core.io as oio


def test_items_table_plots_and_per_query_view():
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert len(table) == 300
    assert {"instance", "estimate", "sd", "lower_95", "upper_95", "query", "gold"} <= set(table)
    assert (table["lower_95"] < table["estimate"]).all()
    assert (table["estimate"] < table["upper_95"]).all()
    assert table["estimate"].is_monotonic_decreasing  # default sort: estimate, descending
    figs = charts(at)
    assert {"items_distribution", "items_query_plot"} <= set(figs)
    first_query = at.selectbox(key="items_query").value
    n_in_query = int((table["query"] == first_query).sum())
    assert len(figs["items_query_plot"]["data"][0]["x"]) == n_in_query
    assert "300 of 300 items" in texts(at.markdown)


def test_search_and_sort():
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    at.text_input(key="items_search").set_value("item0001").run()
    table = at.dataframe[0].value
    assert len(table) == 10 and table["instance"].str.contains("item0001").all()
    at.selectbox(key="items_sort").set_value("sd")
    at.toggle(key="items_desc").set_value(False).run()
    table = at.dataframe[0].value
    assert table["sd"].is_monotonic_increasing
    at.text_input(key="items_search").set_value("q003").run()  # matches the query column
    assert (at.dataframe[0].value["query"] == "q003").all()


def test_csv_download_goes_through_the_formula_safe_writer(monkeypatch):
    written: list[bytes] = []
    real = oio.to_csv_bytes

    def spy(df, id_columns=None):
        out = real(df, id_columns)
        written.append(out)
        return out

    monkeypatch.setattr(oio, "to_csv_bytes", spy)
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    csv = b"annotator,instance,rating\na,=1+1,1\nb,=1+1,2\na,@SUM(A1),2\nb,ok,3\n"
    at.file_uploader(key="data_upload").upload("r.csv", csv, "text/csv")
    at.run()
    at.button(key="data_use_upload").click().run()
    at = fit_current(at, restarts=1, fit_granularity="instance")
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    assert [d.label for d in at.get("download_button")] == ["Download items.csv"]
    assert written, "the Items page did not use io.to_csv_bytes"
    back = pd.read_csv(io.BytesIO(written[-1]), dtype=str)
    assert set(back["instance"]) == {"'=1+1", "'@SUM(A1)", "ok"}
