"""Compare: every method's MSE / correlation / NDCG on the gold items, and the spam experiment."""

import importlib.util

import pandas as pd
import streamlit as st

from app import csv_download, kept, page_setup, require_dataset, session, show_error
from ordmix_core import figures
from ordmix_core.errors import InputError

page_setup()
st.title("Compare methods")
ds = require_dataset()
s = session()
if ds.gold is None:
    st.info(
        "Comparing needs known true labels: load a data set with a gold file on the Data page "
        "(both demo sets have one)."
    )
    st.stop()

missing = [
    mod
    for mod in ("ordmix_core.compare", "ordmix_core.experiments")
    if importlib.util.find_spec(mod) is None
]
if "ordmix_core.compare" in missing:
    st.warning(
        "The comparison is not available in this version of ordmix (ordmix_core.compare is "
        "missing)."
    )
    st.stop()

from ordmix_core.compare import compare_methods  # noqa: E402


@st.cache_data(show_spinner="Fitting every method ...", max_entries=4)
def run_comparison(
    ratings: pd.DataFrame, gold: pd.Series, n_restarts: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return compare_methods(ratings, gold, n_restarts=n_restarts, random_state=seed)


@st.cache_data(show_spinner="Running the spam experiment (every method at every level) ...")
def run_spam_experiment(
    ratings: pd.DataFrame, gold: pd.Series, levels: tuple[int, ...], n_restarts: int, seed: int
) -> pd.DataFrame:
    from ordmix_core.experiments import spam_experiment

    return spam_experiment(ratings, gold, levels=levels, n_restarts=n_restarts, random_state=seed)


st.caption(
    f"Data: **{ds.name}**, {int(ds.gold.index.isin(ds.ratings['instance']).sum()):,} rated gold "
    "items. Every method is scored the same way (MSE, Pearson correlation, NDCG by query)."
)
c1, c2 = st.columns(2)
n_restarts = kept(
    c1.number_input,
    "Restarts of the ordinal-discrete-mixture",
    key="cmp_restarts",
    default=10,
    min_value=1,
    max_value=100,
    step=1,
    help="Paper: 10. Fewer is faster.",
)
seed = kept(c2.number_input, "Seed", key="cmp_seed", default=0, min_value=0, step=1)

tab_cmp, tab_spam = st.tabs(["Methods side by side", "Spam experiment"])
with tab_cmp:
    if st.button("Compare methods", key="cmp_run", type="primary"):
        try:
            s.set("cmp_result", run_comparison(ds.ratings, ds.gold, int(n_restarts), int(seed)))
            s.set("cmp_dataset", ds.name)
        except InputError as err:
            show_error(err)
    result = s.get("cmp_result")
    if result is not None and s.get("cmp_dataset") == ds.name:
        table, estimates = result
        st.dataframe(table, key="cmp_table", hide_index=True)
        st.plotly_chart(figures.metric_bars(table), key="cmp_bars")
        st.plotly_chart(figures.estimate_vs_truth(estimates, ds.gold), key="cmp_scatter")
        csv_download(table, id_columns=["method"], file_name="comparison.csv", key="cmp_download")

with tab_spam:
    if "ordmix_core.experiments" in missing:
        st.warning("The spam experiment is not available (ordmix_core.experiments is missing).")
    else:
        max_level = kept(
            st.slider,
            "Spam levels 0 .. n",
            key="cmp_spam_levels",
            default=9,
            min_value=1,
            max_value=20,
            help="Each level adds more simulated spammers to the real ratings (the paper's "
            "spam experiment uses 0 .. 9).",
        )
        if st.button("Run spam experiment", key="cmp_spam_run", type="primary"):
            try:
                spam_result = run_spam_experiment(
                    ds.ratings,
                    ds.gold,
                    tuple(range(int(max_level) + 1)),
                    int(n_restarts),
                    int(seed),
                )
                s.set("cmp_spam", spam_result)
                s.set("cmp_spam_dataset", ds.name)
            except InputError as err:
                show_error(err)
        spam = s.get("cmp_spam")
        if spam is not None and s.get("cmp_spam_dataset") == ds.name:
            st.plotly_chart(figures.spam_curves(spam), key="cmp_spam_plot")
            st.dataframe(spam, key="cmp_spam_table", hide_index=True)
