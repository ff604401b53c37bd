"""Simulator (for teaching): draw a crowd with known truth, fit it, compare with the truth.

How one rating is drawn (the ordinal probit), biased raters and favourite-answer spammers,
the model against the plain mean, and the spammers found with the Annotators page's rule
(``reliability.annotator_flags``). "Use this crowd on the other pages" keeps the fit made here.
"""

import numpy as np
import pandas as pd
import streamlit as st

from ordmix_core.dashboard import figures_simulator
from ordmix_core.dashboard.fit_job import FitParams, FitResult
from ordmix_core.dashboard.report import make_dataset
from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import SimulatedCrowd, simulate_crowd
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.results import decisions, reliability
from pages._ui import kept, page_setup, session

SCALE = Scale(np.arange(1.0, 6.0))
DATASET_NAME = "Simulated crowd (Simulator page)"


@st.cache_data(show_spinner="Drawing the crowd ...", max_entries=8)
def simulate(
    n_items: int,
    n_annotators: int,
    per_item: int,
    spam: float,
    spread: float,
    seed: int,
    bias_sd: float = 0.0,
    favourite_share: float = 0.0,
    favourite_weight: float = 0.7,
) -> SimulatedCrowd:
    return simulate_crowd(
        n_items=n_items,
        n_annotators=n_annotators,
        ratings_per_item=per_item,
        spammer_share=spam,
        difficulty_spread=spread,
        random_state=seed,
        bias_sd=bias_sd,
        favourite_share=favourite_share,
        favourite_weight=favourite_weight,
    )


@st.cache_data(show_spinner="Fitting the model ...", max_entries=8)
def fit_simulated(ratings: pd.DataFrame, n_restarts: int, seed: int) -> OrdinalMixture:
    return OrdinalMixture("query", n_restarts=n_restarts, random_state=seed).fit(ratings)


page_setup()
st.title("Simulator")
st.caption(
    "Draw a crowd from the model's own generative process: items with a true value z, honest "
    "annotators of varying expertise (and, if you like, a bias), spammers who rate at random "
    "or keep giving a favourite answer, queries of varying difficulty. Then fit and see how "
    "much of the truth comes back, and how much better than the plain mean of the ratings."
)
s = session()

with st.expander("How one honest rating is drawn", expanded=True):
    c1, c2 = st.columns(2)
    z_demo = kept(
        c1.slider, "True value of the item", key="sim_probit_z", default=3.3,
        min_value=0.5, max_value=5.5, step=0.1,
    )  # fmt: skip
    sd_demo = kept(
        c2.slider, "Noise of the rater (sd)", key="sim_probit_sd", default=0.6,
        min_value=0.1, max_value=2.0, step=0.1,
        help="1 / sqrt(expertise x inverse difficulty): an expert on an easy item has little.",
    )  # fmt: skip
    st.plotly_chart(
        figures_simulator.ordinal_probit(
            float(z_demo), float(sd_demo), SCALE.thresholds, SCALE.values
        ),
        key="sim_probit_plot",
    )
    st.caption(
        "The rater's impression is the item's true value plus Gaussian noise; the scale's "
        "thresholds (dashed) cut it into the levels, and the area of each part is the "
        "probability of that rating. A biased rater's curve is shifted; a spammer ignores it "
        "and answers from a fixed distribution of the levels (uniform, or mostly a favourite)."
    )

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
    c1, c2, c3 = st.columns(3)
    bias_sd = kept(
        c1.slider, "Bias of honest raters (spread)", key="sim_bias", default=0.0,
        min_value=0.0, max_value=1.5, step=0.1,
        help="Each honest rater adds a bias b ~ N(0, spread^2) (in levels) to the truth: "
        "lenient raters score high, strict ones low.",
    )  # fmt: skip
    fav_share = kept(
        c2.slider, "Spammers with a favourite answer", key="sim_favourite", default=0.0,
        min_value=0.0, max_value=1.0, step=0.1,
        help="The share of the spammers who keep giving one level (their favourite) instead "
        "of answering uniformly at random.",
    )  # fmt: skip
    fav_weight = kept(
        c3.slider, "How often they give it", key="sim_favourite_weight", default=0.7,
        min_value=0.1, max_value=1.0, step=0.1,
        help="The probability that a favourite-answer spammer's rating is their favourite.",
    )  # fmt: skip
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
    crowd = simulate(
        n_items, n_ann, per_item, float(spam), float(spread), int(seed),
        float(bias_sd), float(fav_share), float(fav_weight),
    )  # fmt: skip
    s.set("sim_crowd", crowd)
    s.set("sim_fit", None)
crowd: SimulatedCrowd | None = s.get("sim_crowd")
if b2.button("Fit", key="sim_run_fit", disabled=crowd is None):
    s.set("sim_fit", fit_simulated(crowd.ratings, int(restarts), int(seed)))

if crowd is None:
    st.info("Set the sliders and press **Generate crowd**.")
    st.stop()

favourites = 0 if crowd.favourite is None else int(crowd.favourite.notna().sum())
st.write(
    f"Crowd: {len(crowd.ratings):,} ratings of {crowd.truth.size:,} items by "
    f"{crowd.spammers.size} annotators ({int(crowd.spammers.sum())} spammers"
    + (f", {favourites} of them with a favourite answer" if favourites else "")
    + ")."
)
model: OrdinalMixture | None = s.get("sim_fit")
if b3.button("Use this crowd on the other pages", key="sim_use"):
    s.dataset = make_dataset(DATASET_NAME, crowd.ratings, crowd.gold, SCALE)
    if model is not None:  # the fit made here goes with it: the other pages show it
        params = FitParams(n_restarts=int(restarts), random_state=int(seed))
        s.fit = FitResult(model, params, DATASET_NAME)
        s.set(
            "sim_flash", "Loaded as the data set with this fit: see the Items and Annotators pages."
        )
    else:
        s.set("sim_flash", "Loaded as the data set: fit it on the Fit page.")
    st.rerun()  # the sidebar, drawn before this button, names the new data set and fit
if s.get("sim_flash"):
    st.success(s.get("sim_flash"))
    s.set("sim_flash", None)

if model is None:
    st.info("Press **Fit** to estimate the truth and the spammers from the ratings alone.")
    st.stop()

est = model.items_["estimate"]
truth_z = crowd.truth
plain = (
    crowd.ratings.assign(rating=crowd.ratings["rating"].astype(float))
    .groupby("instance")["rating"]
    .mean()
)
flags = reliability.annotator_flags(model)
flagged = (flags["flag"] == "unreliable").reindex(crowd.spammers.index, fill_value=False)
truth = crowd.spammers.astype(bool)


def rmse(x: pd.Series) -> float:
    return float(np.sqrt(np.mean((x.reindex(truth_z.index) - truth_z) ** 2)))


k = st.columns(5)
k[0].metric(
    "Correlation with true z",
    f"{np.corrcoef(truth_z, est.reindex(truth_z.index))[0, 1]:.3f}",
)
k[1].metric("RMSE vs true z", f"{rmse(est):.3f}", help="The model's estimate against the truth.")
k[2].metric(
    "RMSE of the plain mean",
    f"{rmse(plain):.3f}",
    delta=f"{rmse(est) - rmse(plain):+.3f} by the model",
    delta_color="inverse",
    help="Each item's plain average of its ratings against the truth: what the model beats "
    "by discounting spammers and biases.",
)
k[3].metric("Spammers found", f"{int((flagged & truth).sum())} of {int(truth.sum())}")
k[4].metric("Honest flagged", f"{int((flagged & ~truth).sum())} of {int((~truth).sum())}")
st.caption(
    "Spammers are found with the Annotators page's rule: flagged unreliable when their "
    f"ratings make a reliability below {decisions.THRESHOLD:g} at least "
    f"{decisions.CONFIDENCE:.0%} probable."
)
c1, c2 = st.columns(2)
with c1:
    st.plotly_chart(
        figures_simulator.simulator_truth_vs_estimate(
            truth_z,
            est,
            model.items_["sd"],
            span=(float(SCALE.thresholds[0]), float(SCALE.thresholds[-1])),
            plain_mean=plain,
        ),
        key="sim_truth_plot",
    )
    st.caption(
        "Each item's estimate (with its 95% interval, kept inside the scale) and the plain "
        "mean of its ratings (x), against the simulated truth: on the diagonal is right."
    )
with c2:
    st.plotly_chart(
        figures_simulator.spammers_true_vs_estimated(
            crowd.spammers, flags["p_unreliable"], decisions.CONFIDENCE, what="P(unreliable)"
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
