"""Data: pick a demo set or upload ratings, map the columns, confirm the scale, check the report.

A new data set is taken with a rerun, so the sidebar (drawn before this page) shows it and
no old fit at once. The mapping widgets are keyed on the upload, so they never carry one
file's choices over to the next. Leaving the page and coming back keeps every choice: the
source, the uploaded files (``kept_file``) and their mapping and scale (``kept``).
"""

import pandas as pd
import streamlit as st

from ordmix_core.dashboard.report import (
    Dataset,
    guess_column,
    make_dataset,
    rescale,
    validation_report,
)
from ordmix_core.data.scale import fmt_scale
from ordmix_core.errors import InputError
from ordmix_core.io import ACCEPTED, MAX_UPLOAD_MB
from pages._ui import (
    DEFAULT_DEMO,
    DEMOS,
    kept,
    kept_file,
    load_demo,
    page_setup,
    read_upload,
    read_upload_gold,
    session,
    show_error,
)

NONE = "(none)"


def use(ds: Dataset, message: str) -> None:
    """Make ``ds`` the data set and rerun: the sidebar is drawn before this page."""
    state = session()
    state.dataset = ds
    state.set("data_flash", message)
    st.rerun()


page_setup()
st.title("Data")
s = session()
current = s.dataset
keep_msg = (
    f"The previous data set (**{current.name}**) is still loaded." if current is not None else None
)

source = kept(
    st.radio,
    "Ratings from",
    key="data_source",
    default="Demo data set",
    options=["Demo data set", "Upload a file"],
    horizontal=True,
)

if source == "Demo data set":
    label = kept(st.selectbox, "Demo data set", key="data_demo", default=DEFAULT_DEMO,
                 options=list(DEMOS))  # fmt: skip
    if st.button("Load demo", key="data_load_demo", type="primary"):
        try:
            ds = load_demo(label)
        except InputError as err:
            show_error(err, keep_msg)
        else:
            use(ds, f"Loaded {label}.")
else:
    st.caption(
        f"CSV, TSV or Parquet ({ACCEPTED}), up to {MAX_UPLOAD_MB} MB. One row per rating; "
        "columns for the annotator, the rated instance, the rating and optionally the query."
    )
    up = st.file_uploader(
        "Ratings file",
        type=["csv", "tsv", "tab", "txt", "parquet", "pq"],
        key="data_upload",
    )
    gold_up = st.file_uploader(
        "Gold file (optional): columns instance, truth",
        type=["csv", "tsv", "tab", "txt", "parquet", "pq"],
        key="data_gold_upload",
    )
    upload = kept_file(up, "data_kept_upload")
    gold_file = kept_file(gold_up, "data_kept_gold")
    for held, now, what, forget in (
        (upload, up, "ratings", "data_forget_upload"),
        (gold_file, gold_up, "gold", "data_forget_gold"),
    ):
        if held is not None and now is None:  # uploaded before the page was left
            c1, c2 = st.columns([4, 1])
            c1.caption(
                f"The {what} file **{held[0]}**, uploaded earlier, is kept: upload another "
                "to replace it."
            )
            if c2.button(f"Forget {held[0]}", key=forget):
                session().set(forget.replace("forget", "kept"), None)
                st.rerun()
    if upload is not None:
        up_name, content, upload_id = upload  # a new upload gets fresh mapping widgets
        try:
            table = read_upload(content, up_name)
        except InputError as err:
            show_error(err, keep_msg)
            st.stop()
        cols = [str(c) for c in table.columns]
        st.write(f"**{up_name}**: {len(table):,} rows, columns {', '.join(cols)}")
        st.dataframe(table.head(5), key="data_preview", hide_index=True)
        c1, c2, c3, c4 = st.columns(4)
        mapping = {}
        for col, (canon, optional) in zip(
            (c1, c2, c3, c4),
            (("annotator", False), ("instance", False), ("rating", False), ("query", True)),
            strict=True,
        ):
            options = ([NONE] if optional else []) + cols
            guess = guess_column(cols, canon)
            mapping[canon] = kept(
                col.selectbox,
                f"{canon} column" + (" (optional)" if optional else ""),
                options=options,
                default=guess if guess in options else (NONE if optional else None),
                key=f"data_map_{canon}:{upload_id}",
                help=f"Which column holds the {canon}"
                + (" (needed for query granularity)" if canon == "query" else ""),
            )
        scale_text = kept(
            st.text_input,
            "Rating scale (comma-separated levels, lowest first; empty = the distinct ratings "
            "seen)",
            key=f"data_scale_upload:{upload_id}",
            default="",
            help="The ordered levels v_1 < ... < v_K, e.g. 1,2,3,4,5, or their names lowest "
            "first when the ratings are names, e.g. G,P,R,X or low,medium,high. Give it when "
            "some level is never used in the file.",
        )
        if st.button("Use this data", key="data_use_upload", type="primary"):
            try:
                missing = [c for c in ("annotator", "instance", "rating") if not mapping[c]]
                if missing:
                    raise InputError(f"choose the {', '.join(missing)} column(s)", source=up_name)
                chosen = [mapping[c] for c in ("annotator", "instance", "rating")]
                if mapping["query"] != NONE:
                    chosen.append(mapping["query"])
                if len(set(chosen)) != len(chosen):
                    raise InputError(
                        "the same column is mapped twice; each role needs its own column",
                        source=up_name,
                    )
                renamed = pd.DataFrame(
                    {
                        canon: table[mapping[canon]]
                        for canon in ("annotator", "instance", "rating", "query")
                        if mapping[canon] != NONE
                    }
                )
                scale = scale_text.strip() or None
                gold = (
                    read_upload_gold(gold_file[1], gold_file[0], scale)
                    if gold_file is not None
                    else None
                )
                ds = make_dataset(up_name, renamed, gold, scale)
            except InputError as err:
                show_error(err, keep_msg)
            else:
                use(ds, f"Loaded {up_name}.")

ds = s.dataset
if ds is None:
    st.info("No data loaded.")
    st.stop()

if s.get("data_flash"):
    st.success(s.get("data_flash"))
    s.set("data_flash", None)
st.header(f"Loaded: {ds.name}")
with st.expander("Rating scale", expanded=False):
    st.write(f"Current scale: **{fmt_scale(ds.scale)}** ({ds.scale.k} levels, lowest first).")
    new_scale = st.text_input(
        "Edit the scale (comma-separated levels, lowest first, must include every rating; "
        "reorder named levels here)",
        value=fmt_scale(ds.scale),
        key=f"data_scale_edit:{ds.name}:{fmt_scale(ds.scale)}",
    )
    if st.button("Apply scale", key="data_apply_scale"):
        try:
            rescaled = rescale(ds, new_scale)
        except InputError as err:
            show_error(err, "The scale was not changed.")
        else:
            use(rescaled, f"Scale set to {fmt_scale(rescaled.scale)}; refit.")

rep = validation_report(ds)
st.subheader("Validation report")
m = st.columns(5)
m[0].metric("Ratings", f"{rep['ratings']:,}")
m[1].metric("Annotators", f"{rep['annotators']:,}")
m[2].metric("Instances", f"{rep['instances']:,}")
m[3].metric("Queries", "-" if rep["queries"] is None else f"{rep['queries']:,}")
m[4].metric("Gold items", "-" if rep["gold"] is None else f"{rep['gold']['rated_gold_items']:,}")

per = pd.DataFrame(
    {"ratings per instance": rep["per_item"], "ratings per annotator": rep["per_annotator"]}
).rename(index={"50%": "median"})
c1, c2 = st.columns(2)
c1.dataframe(per.T.round(2), key="data_report_counts")
c2.dataframe(rep["level_counts"], key="data_report_levels")
st.markdown(
    f"- Scale: **{rep['scale']}**"
    + (
        f" (levels never used: {', '.join(map(str, unused))})"
        if (unused := rep["level_counts"].index[rep["level_counts"]["ratings"] == 0].tolist())
        else ""
    )
    + f"\n- Instances with a single rating: {rep['single_rating_items']:,}"
    + f"\n- Repeated (annotator, instance) pairs: {rep['duplicate_pairs']:,}"
    + f" ({rep['exact_duplicate_rows']:,} exact duplicate rows); they are kept as separate ratings"
)
if rep["gold"] is not None:
    g = rep["gold"]
    st.markdown(
        f"- Gold: {g['gold_items']:,} items, {g['rated_gold_items']:,} of them rated"
        + (f", {g['gold_not_rated']:,} not in the ratings" if g["gold_not_rated"] else "")
        + (f", {g['gold_off_scale']:,} with a truth off the scale" if g["gold_off_scale"] else "")
    )
if not ds.has_query:
    st.caption("No query column: the Fit page offers instance and global granularity only.")
