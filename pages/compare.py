"""Compare: every method's MSE / correlation / NDCG on the gold items, and the spam experiment."""

import pandas as pd
import streamlit as st

from ordmix_core.dashboard import figures, figures_compare
from ordmix_core.dashboard.report import METRICS, best_at, comparison_words, rated
from ordmix_core.errors import InputError
from ordmix_core.evaluation.compare import METHODS, TABLE1, compare_methods
from ordmix_core.evaluation.experiments import spam_experiment
from ordmix_core.results.agreement import words
from pages._ui import (
    csv_download,
    dataset_agreement,
    kept,
    page_setup,
    require_dataset,
    session,
    show_error,
)


@st.cache_data(show_spinner=False, max_entries=4)
def run_comparison(
    ratings: pd.DataFrame,
    gold: pd.Series,
    scale: tuple[float | str, ...],
    methods: tuple[str, ...],
    n_restarts: int | None,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``compare_methods`` with a progress bar (replayed, finished, on a cache hit)."""
    bar = st.progress(0.0, text="Starting ...")

    def progress(method: str, i: int, n: int) -> None:
        bar.progress(i / n, text=f"Fitting {method} ({i + 1} of {n}) ...")

    out = compare_methods(
        ratings,
        gold,
        list(methods),
        n_restarts=n_restarts,
        random_state=seed,
        scale=list(scale),
        callback=progress,
    )
    bar.progress(1.0, text=f"{len(methods)} method(s) fitted.")
    return out


@st.cache_data(show_spinner=False, max_entries=4)
def run_spam_experiment(
    ratings: pd.DataFrame,
    gold: pd.Series,
    scale: tuple[float | str, ...],
    methods: tuple[str, ...],
    levels: tuple[int, ...],
    n_restarts: int | None,
    seed: int,
) -> pd.DataFrame:
    """``spam_experiment`` with a progress bar over (level, method) fits."""
    bar = st.progress(0.0, text="Starting ...")
    total = len(levels) * len(methods)
    done = [0]

    def progress(level: int, method: str) -> None:
        bar.progress(min(done[0] / total, 1.0), text=f"Spam level {level}: fitting {method} ...")
        done[0] += 1

    out = spam_experiment(
        ratings,
        gold,
        levels=levels,
        methods=list(methods),
        n_restarts=n_restarts,
        random_state=seed,
        scale=list(scale),
        callback=progress,
    )
    bar.progress(1.0, text=f"{total} fit(s) done.")
    return out


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

n_gold = int(rated(ds.gold.index, ds.data.instances).sum())
st.caption(
    f"Data: **{ds.name}**, {n_gold:,} rated gold items; "
    f"{words(dataset_agreement(ds, ds.name, id(ds.data)).as_dict())}. Every method is scored "
    "the same way: MSE, Pearson correlation and NDCG of its estimates (per query when there "
    "is a query column), and the label error, the share of gold items whose label is not the "
    "gold level. "
    "A method's label is the one it ships: odm's is its `label` (the most probable level of "
    "its posterior), a method with level probabilities "
    "(majority, Dawid-Skene, GLAD) takes its most probable level, and one without (mean, "
    "median, continuous ML) its estimate rounded to the nearest level. odm is the default "
    "model, odm-paper-* the paper's."
)
available = [m for m in METHODS if not m.endswith("-query") or ds.has_query]
default = [m for m in TABLE1 if m in available]
methods = kept(
    st.multiselect,
    "Methods",
    key="cmp_methods",
    default=default,
    options=available,
    wrap=True,  # every chosen method stays visible (in a column the chips would scroll)
    help="odm-* are the ordinal-discrete-mixture at global / query / instance granularity "
    "and its ablation variants; the rest are the baselines.",
)
c2, c3, _ = st.columns([1, 1, 3])
n_restarts = kept(
    c2.number_input,
    "Restarts (odm)",
    key="cmp_restarts",
    default=None,
    min_value=1,
    max_value=100,
    step=1,
    placeholder="each model's",
    help="Restarts of every odm method; empty: each model's default (the data start alone "
    "when the label fit makes the labels, 10 when the continuous posterior does, as with "
    "the paper's model). Fewer is faster.",
)
n_restarts = None if n_restarts is None else int(n_restarts)
seed = kept(c3.number_input, "Seed", key="cmp_seed", default=0, min_value=0, step=1)
# the scale as the ratings write it: its names, for a scale of named levels
scale = ds.scale.names or tuple(float(v) for v in ds.scale.values)
if not methods:
    st.info("Choose at least one method.")
    st.stop()

tab_cmp, tab_spam = st.tabs(["Methods side by side", "Spam experiment"])
with tab_cmp:
    if st.button("Compare methods", key="cmp_run", type="primary"):
        try:
            result = run_comparison(
                ds.ratings, ds.gold, scale, tuple(methods), n_restarts, int(seed)
            )
            s.set("cmp_result", (ds.name, result))
        except InputError as err:
            show_error(err)
    saved = s.get("cmp_result")
    if saved is not None and saved[0] == ds.name:
        table, estimates = saved[1]
        st.markdown("\n".join(f"- {line}" for line in comparison_words(table)))
        st.dataframe(
            table.assign(best_at=best_at(table)),
            key="cmp_table",
            hide_index=True,
            column_config={c: st.column_config.NumberColumn(format="%.4f") for c in METRICS}
            | {
                "seconds": st.column_config.NumberColumn(format="%.1f"),
                "best_at": st.column_config.TextColumn(
                    "best at", help="The metrics at which this method is the best of those run"
                ),
            },
        )
        st.caption(
            "Calibration error and log loss score the level probabilities: *None* for a method "
            "that gives only an estimate, no level probabilities."
        )
        st.plotly_chart(figures_compare.metric_bars(table), key="cmp_bars")
        st.plotly_chart(figures.estimate_vs_truth(estimates, ds.gold), key="cmp_scatter")
        csv_download(table, id_columns=["method"], file_name="comparison.csv", key="cmp_download")

with tab_spam:
    st.caption(
        "The paper's robustness experiment: at spam level k every instance gets k extra uniform "
        "random ratings from fake annotators; each method is refitted and scored on the gold."
    )
    max_level = kept(
        st.slider,
        "Spam levels 0 .. k",
        key="cmp_spam_levels",
        default=9,
        min_value=1,
        max_value=20,
        help="The paper uses 0 .. 9. Each level is one full comparison, so this takes a while.",
    )
    if st.button("Run spam experiment", key="cmp_spam_run", type="primary"):
        try:
            spam = run_spam_experiment(
                ds.ratings,
                ds.gold,
                scale,
                tuple(methods),
                tuple(range(int(max_level) + 1)),
                n_restarts,
                int(seed),
            )
            s.set("cmp_spam", (ds.name, spam))
        except InputError as err:
            show_error(err)
    saved = s.get("cmp_spam")
    if saved is not None and saved[0] == ds.name:
        st.plotly_chart(figures_compare.spam_curves(saved[1]), key="cmp_spam_plot")
        st.dataframe(saved[1], key="cmp_spam_table", hide_index=True)
        csv_download(
            saved[1],
            id_columns=["method"],
            file_name="spam-experiment.csv",
            key="cmp_spam_download",
        )
