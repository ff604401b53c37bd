"""Items: labels with their level probabilities and credible intervals, undetermined and
unstable items marked, the honeypots the crowd disputes (a fit with gold), and what to rate
next.

The decision columns are ``decisions.item_decisions`` (through the cached ``fit_decisions``);
the download writes the columns of ``ordmix fit``'s items.csv, the batch those of
``ordmix next``.
"""

import streamlit as st

from ordmix_core.dashboard import figures, figures_decisions
from ordmix_core.labels.policy import DEFAULT as LABEL_POLICY
from ordmix_core.results import decisions, explanations
from pages._ui import (
    fit_caption,
    fit_decisions,
    fit_table_download,
    next_download,
    page_setup,
    require_fit,
    review_download,
    session,
)

page_setup()
st.title("Items")
res = require_fit()
fit_caption(res)
ds = session().dataset
m = res.model
dec = fit_decisions(res, res.fit_id)
lo_col, hi_col = decisions.interval_columns()
levels = [c for c in dec.items.columns if c.startswith("p_level_")]

items = m.items_.join(dec.items)
gold = ds.gold if ds is not None and ds.name == res.dataset else None
if gold is not None:
    items["gold"] = gold.reindex(items.index)
    if m.scale_.names is not None:  # the gold level by its name, as the label is
        by_value = dict(zip(m.scale_.values, m.scale_.labels, strict=True))
        items["gold"] = items["gold"].map(by_value)
front = ["label", "flag", "p_wrong", *levels, lo_col, hi_col, "estimate", "sd", "n_ratings"]
table = items[front + [c for c in items.columns if c not in front]].reset_index()

n_und = int((items["flag"] == "undetermined").sum())
st.markdown(
    "Each item's **label** is its most probable level; its probabilities are those of a "
    "careful annotator's answer. **flag** says how far to trust it: *confident* (the label "
    f"is at least {dec.confidence:.0%} probable), *uncertain*, or *undetermined* ({n_und:,} "
    f"items here): its two most probable levels are within {LABEL_POLICY.tie:.0%} of each "
    "other. The "
    f"interval ({lo_col.removeprefix('lower_')}% credible) runs over the levels around the "
    "label that hold that much of the probability."
)

c1, c2, c3, c4 = st.columns([3, 2, 2, 1.4])
query = c1.text_input(
    "Search", key="items_search", placeholder="part of an instance, query or category ID"
)
show = c2.selectbox("Show", ["all", *decisions.ITEM_FLAGS], key="items_show")
sort_by = c3.selectbox(
    "Sort by",
    ["estimate", "p_wrong", "expected_gain", "sd", "n_ratings", "instance"]
    + (["estimate_spread"] if "estimate_spread" in table else [])
    + (["query"] if "query" in table else []),
    key="items_sort",
)
descending = c4.toggle("Descending", value=True, key="items_desc")

view = table
if show != "all":
    view = view[view["flag"] == show]
if query.strip():
    text_cols = [c for c in ("instance", "query", "category") if c in view.columns]
    hit = False
    for c in text_cols:
        hit = hit | view[c].astype(str).str.contains(query.strip(), case=False, regex=False)
    view = view[hit]
# what the continuous fit's near-tied answers disagree on, when the fit has the column
if "unstable" in view.columns and st.toggle(
    f"Unstable only ({int(table['unstable'].sum()):,}: the continuous fit's near-tied answers "
    "disagree on z_mean, see estimate_spread; the labels are the label fit's, which they do "
    "not change)",
    value=False,
    key="items_unstable",
):
    view = view[view["unstable"]]
if "crowd_estimate" in view.columns:
    disputed = decisions.disputed_gold(m.items_, m.scale_.step)
    if st.toggle(
        f"Disputed honeypots only ({int(disputed.sum()):,}: gold items whose own ratings put "
        "them more than a level from their gold, see crowd_estimate)",
        value=False,
        key="items_disputed",
    ):
        view = view[view["instance"].isin(disputed.index[disputed])]
view = view.sort_values(sort_by, ascending=not descending, kind="stable")
st.write(f"{len(view):,} of {len(table):,} items")
number = {c: st.column_config.NumberColumn(format="%.3f") for c in levels}
# the interval's ends are levels with the confusion labels (written as the label is), else
# values; a scale of named levels writes both as its names
named = m.scale_.names is not None
ends = "%g" if table[lo_col].dtype.kind in "iu" else "%.3f"


def level_column(title: str, fmt: str) -> object:
    """A column of levels: text for named levels, else numbers in ``fmt``."""
    if named:
        return st.column_config.TextColumn(title)
    return st.column_config.NumberColumn(title, format=fmt)


st.dataframe(
    view,
    key="items_table",
    hide_index=True,
    column_config={
        **number,
        "label": level_column("label", "%g"),
        "p_wrong": st.column_config.NumberColumn("P(label wrong)", format="%.3f"),
        "estimate": st.column_config.NumberColumn("estimate", format="%.3f"),
        "sd": st.column_config.NumberColumn("sd", format="%.3f"),
        lo_col: level_column(lo_col.replace("_", " ") + "%", ends),
        hi_col: level_column(hi_col.replace("_", " ") + "%", ends),
        "expected_gain": st.column_config.NumberColumn("expected gain", format="%.4f"),
    },
)
fit_table_download(res, "items", dec, key="items_download")
st.caption("items.csv as `ordmix fit` writes it: the model's columns, then the decision columns.")

first = view.set_index("instance").head(40)
chart_rows = st.radio(
    "Items in the level chart",
    ["least certain first", "first rows of the table"],
    key="items_levels_rows",
    horizontal=True,
    help="Least certain first: the 40 listed items most likely to have a wrong label, so the "
    "chart does not open on items whose labels are certain (one level, probability 1).",
)
charted = (
    figures_decisions.level_chart_items(view.set_index("instance"), 40)
    if chart_rows == "least certain first"
    else first
)
if len(charted):
    st.plotly_chart(figures_decisions.item_level_probabilities(charted), key="items_levels_plot")
    st.caption(
        f"{len(charted)} item{'' if len(charted) == 1 else 's'} of the table above ({chart_rows}): "
        "the probability of each level."
    )

# --------------------------------------------------------------------------- one item
st.subheader("One item: its ratings and why it got its label")
if ds is None or ds.name != res.dataset:
    st.info("The ratings of this fit's data set are no longer loaded: load it again to see them.")
elif len(view):
    pick = st.selectbox(
        "Item",
        view["instance"].astype(str).tolist(),
        key="items_detail",
        help="The items of the table above, in its order.",
    )
    row = items.loc[items.index.astype(str) == pick].iloc[0]
    flags = None if dec.annotators is None else dec.annotators["flag"]
    its = explanations.item_ratings(ds.ratings, pick, flags)
    st.markdown(f"**{pick}**: {explanations.label_sentence(row, len(its))}")
    c1, c2 = st.columns([3, 2])
    c1.plotly_chart(
        figures_decisions.item_ratings_and_levels(
            its["rating"], row[levels].to_numpy(float), list(m.scale_.labels), pick
        ),
        key="items_detail_plot",
    )
    c2.dataframe(its, key="items_detail_ratings", hide_index=True)
    c2.caption(
        "Its ratings: the annotator, the rating, and the annotator's flag (Annotators page); "
        "each annotator's answers weigh by how well they match the levels the others' ratings "
        "point to."
    )

names = None if m.scale_.names is None else list(m.scale_.names)
st.plotly_chart(
    figures.estimate_distribution(items, list(m.scale_.values), names), key="items_distribution"
)

if "query" in items.columns:
    st.subheader("Per query")
    queries = sorted(items["query"].astype(str).unique())
    q = st.selectbox("Query", queries, key="items_query")
    sub = items[items["query"].astype(str) == q]
    st.plotly_chart(
        figures.item_intervals(sub, gold, (lo_col, hi_col), names), key="items_query_plot"
    )
else:
    st.subheader("Intervals of the listed items")
    st.caption("The first 40 items of the table above, with their credible intervals.")
    st.plotly_chart(
        figures.item_intervals(first, gold, (lo_col, hi_col), names), key="items_intervals_plot"
    )

# --------------------------------------------------------------------------- what next
st.header("What to rate next")
st.markdown(
    "The items where one more rating is expected to fix the most labels: the expected fall of "
    "P(label wrong) from one rating of typical quality (*expected gain*). Send the batch to "
    "the annotation platform; refit when the ratings are in."
)
c1, c2 = st.columns(2)
batch_size = c1.number_input(
    "Items in the batch",
    min_value=1,
    max_value=max(len(items), 1),
    value=min(50, len(items)),
    step=10,
    key="items_batch_size",
)
rank_by = c2.selectbox(
    "Rank by",
    ["expected_gain", "p_wrong"],
    key="items_rank_by",
    help="expected_gain: how much one more rating is expected to lower P(label wrong); "
    "p_wrong: the chance that the label is wrong now.",
)
batch = next_download(res, dec, int(batch_size), rank_by, key="items_batch_download")
st.dataframe(batch, key="items_batch_table", hide_index=True)
st.caption(
    f"One rating each is expected to correct {batch['expected_gain'].sum():.1f} labels. "
    "next.csv is the file `ordmix next --out` writes for this fit."
)

und_items = explanations.undetermined_to_rate(items)
st.subheader(f"Undetermined items ({len(und_items):,}), most useful to rate first")
st.caption(
    "The items whose two most probable levels tie, by the expected gain of one more rating "
    "(descending), then fewest ratings."
)
st.dataframe(
    und_items,
    key="items_undetermined_table",
    hide_index=True,
    column_config={"expected_gain": st.column_config.NumberColumn(format="%.4f")},
)

st.subheader("Annotators to review")
if dec.annotators is None:
    st.info(f"Annotator flags: {dec.no_flags}.")
else:
    review = review_download(res, dec, key="items_review_download")
    st.caption(
        f"{len(review):,} annotators whose ratings make a reliability below "
        f"{dec.threshold:g} at least {dec.confidence:.0%} probable, most certain first, with "
        "the evidence (P(unreliable), the credible interval of their reliability). The "
        "Annotators page shows all the groups and lets you change the settings."
    )
    evidence = ["p_unreliable", "reliability_lower", "reliability_upper", "spam_share"]
    st.dataframe(  # rounded on the screen only: review.csv has the full numbers
        explanations.annotators_for_people(review),
        key="items_review_table",
        hide_index=True,
        column_config={c: st.column_config.NumberColumn(format="%.3f") for c in evidence}
        | {"expertise": st.column_config.NumberColumn(format="%.3g")},
    )
    st.caption(
        "review.csv is the file `ordmix next --review` writes for this fit (full numbers; the "
        "Annotators page downloads the same file at its settings)."
    )
