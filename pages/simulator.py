"""Simulator (for teaching): draw a crowd with known truth, fit it, compare with the truth."""

import numpy as np
import pandas as pd
import streamlit as st

from ordmix_core import figures
from ordmix_core.data import Scale
from ordmix_core.model import OrdinalMixture
from ordmix_core.report import make_dataset
from ordmix_core.simulate import SimulatedCrowd, simulate_crowd
from pages._ui import kept, page_setup, session


@st.cache_data(show_spinner="Drawing the crowd ...", max_entries=8)
def simulate(
    n_items: int, n_annotators: int, per_item: int, spam: float, spread: float, seed: int
) -> SimulatedCrowd:
    return simulate_crowd(
        n_items=n_items,
        n_annotators=n_annotators,
        ratings_per_item=per_item,
        spammer_share=spam,
        difficulty_spread=spread,
        random_state=seed,
    )


@st.cache_data(show_spinner="Fitting the model ...", max_entries=8)
def fit_simulated(ratings: pd.DataFrame, n_restarts: int, seed: int) -> OrdinalMixture:
    return OrdinalMixture("query", n_restarts=n_restarts, random_state=seed).fit(ratings)


page_setup()
st.title("Simulator")
st.caption(
    "Draw a crowd from the model's own generative process: items with a true value z, honest "
    "annotators of varying expertise, spammers who rate uniformly at random, queries of "
    "varying difficulty. Then fit and see how much of the truth comes back."
)
s = session()
with st.container(border=True):
    c1, c2, c3 = st.columns(3)
    n_items = kept(
        c1.slider, "Items", key="sim_items", default=300, min_value=20, max_value=3000, step=10
    )
    n_ann = kept(
        c2.slider, "Annotators", key="sim_annotators", default=30, min_value=3, max_value=300
    )
    per_item = kept(
        c3.slider,
        "Ratings per item",
        key="sim_per_item",
        default=5,
        min_value=1,
        max_value=20,
        help="Distinct annotators per item (at most the number of annotators).",
    )
    c1, c2, c3 = st.columns(3)
    spam = kept(
        c1.slider,
        "Share of spammers",
        key="sim_spam",
        default=0.3,
        min_value=0.0,
        max_value=0.9,
        step=0.05,
    )
    spread = kept(
        c2.slider,
        "Difficulty spread",
        key="sim_spread",
        default=0.5,
        min_value=0.0,
        max_value=2.0,
        step=0.1,
        help="Standard deviation of log inverse difficulty across queries.",
    )
    seed = kept(c3.number_input, "Seed", key="sim_seed", default=0, min_value=0, step=1)
    restarts = kept(
        c1.number_input,
        "Restarts for the fit",
        key="sim_restarts",
        default=3,
        min_value=1,
        max_value=20,
        step=1,
    )

b1, b2, b3 = st.columns([1, 1, 3])
if b1.button("Generate crowd", key="sim_generate", type="primary"):
    crowd = simulate(n_items, n_ann, per_item, float(spam), float(spread), int(seed))
    s.set("sim_crowd", crowd)
    s.set("sim_fit", None)
crowd: SimulatedCrowd | None = s.get("sim_crowd")
if b2.button("Fit", key="sim_run_fit", disabled=crowd is None):
    s.set("sim_fit", fit_simulated(crowd.ratings, int(restarts), int(seed)))

if crowd is None:
    st.info("Set the sliders and press **Generate crowd**.")
    st.stop()

st.write(
    f"Crowd: {len(crowd.ratings):,} ratings of {crowd.truth.size:,} items by "
    f"{crowd.spammers.size} annotators ({int(crowd.spammers.sum())} spammers)."
)
if b3.button("Use this crowd on the other pages", key="sim_use"):
    s.dataset = make_dataset(
        "Simulated crowd (Simulator page)", crowd.ratings, crowd.gold, Scale(np.arange(1.0, 6.0))
    )
    st.success("Loaded as the data set: fit it on the Fit page.")

model: OrdinalMixture | None = s.get("sim_fit")
if model is None:
    st.info("Press **Fit** to estimate the truth and the spammers from the ratings alone.")
    st.stop()

threshold = st.slider(
    "Spam-share threshold for flagging",
    0.0,
    1.0,
    0.5,
    0.05,
    key="sim_threshold",
)
est = model.items_["estimate"]
flagged = model.annotators_["spam_share"].reindex(crowd.spammers.index) >= threshold
truth = crowd.spammers.astype(bool)
k = st.columns(4)
k[0].metric(
    "Correlation with true z",
    f"{np.corrcoef(crowd.truth, est.reindex(crowd.truth.index))[0, 1]:.3f}",
)
k[1].metric(
    "RMSE vs true z", f"{np.sqrt(np.mean((est.reindex(crowd.truth.index) - crowd.truth) ** 2)):.3f}"
)
k[2].metric("Spammers found", f"{int((flagged & truth).sum())} of {int(truth.sum())}")
k[3].metric("Honest flagged", f"{int((flagged & ~truth).sum())} of {int((~truth).sum())}")
c1, c2 = st.columns(2)
with c1:
    st.plotly_chart(
        figures.simulator_truth_vs_estimate(crowd.truth, est, model.items_["sd"]),
        key="sim_truth_plot",
    )
with c2:
    st.plotly_chart(
        figures.spammers_true_vs_estimated(
            crowd.spammers, model.annotators_["spam_share"], threshold
        ),
        key="sim_spammer_plot",
    )
st.dataframe(
    pd.crosstab(
        truth.map({True: "true spammer", False: "true honest"}),
        flagged.map({True: "flagged", False: "not flagged"}),
    ),
    key="sim_confusion",
)
