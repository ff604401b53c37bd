"""Items: posterior means with uncertainty, searchable table, distribution, per-query view."""

import streamlit as st

from ordmix_core import figures
from ordmix_core.figures import Z95
from pages._ui import csv_download, fit_caption, page_setup, require_fit, session

page_setup()
st.title("Items")
res = require_fit()
fit_caption(res)
ds = session().dataset
m = res.model

items = m.items_.copy()
items["lower_95"] = items["estimate"] - Z95 * items["sd"]
items["upper_95"] = items["estimate"] + Z95 * items["sd"]
gold = ds.gold if ds is not None and ds.name == res.dataset else None
if gold is not None:
    items["gold"] = gold.reindex(items.index)
table = items.reset_index()

c1, c2, c3 = st.columns([3, 2, 1])
query = c1.text_input(
    "Search", key="items_search", placeholder="part of an instance, query or category ID"
)
sort_by = c2.selectbox(
    "Sort by",
    ["estimate", "sd", "n_ratings", "instance"] + (["query"] if "query" in table else []),
    key="items_sort",
)
descending = c3.toggle("Descending", value=True, key="items_desc")

view = table
if query.strip():
    text_cols = [c for c in ("instance", "query", "category") if c in view.columns]
    hit = False
    for c in text_cols:
        hit = hit | view[c].astype(str).str.contains(query.strip(), case=False, regex=False)
    view = view[hit]
view = view.sort_values(sort_by, ascending=not descending, kind="stable")
st.write(f"{len(view):,} of {len(table):,} items")
st.dataframe(
    view,
    key="items_table",
    hide_index=True,
    column_config={
        "estimate": st.column_config.NumberColumn("estimate", format="%.3f"),
        "sd": st.column_config.NumberColumn("sd", format="%.3f"),
        "lower_95": st.column_config.NumberColumn("lower 95%", format="%.3f"),
        "upper_95": st.column_config.NumberColumn("upper 95%", format="%.3f"),
    },
)
csv_download(
    table,
    id_columns=[c for c in ("instance", "query", "category") if c in table.columns],
    file_name="items.csv",
    key="items_download",
)

st.plotly_chart(
    figures.estimate_distribution(items, list(m.scale_.values)), key="items_distribution"
)

if "query" in items.columns:
    st.subheader("Per query")
    queries = sorted(items["query"].astype(str).unique())
    q = st.selectbox("Query", queries, key="items_query")
    sub = items[items["query"].astype(str) == q]
    st.plotly_chart(
        figures.item_intervals(sub, None if gold is None else gold),
        key="items_query_plot",
    )
else:
    st.subheader("Intervals of the listed items")
    first = view.set_index("instance").head(60)
    st.caption("The first 60 items of the table above, with 95% intervals.")
    st.plotly_chart(figures.item_intervals(first, gold), key="items_intervals_plot")
