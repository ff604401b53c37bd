"""Convergence: the lower bound of every restart, the chosen one, and why it was chosen."""

import streamlit as st

from ordmix_core.dashboard import figures
from ordmix_core.dashboard.fit_summary import selection_explanation
from pages._ui import RESTART_HELP, fit_caption, page_setup, require_fit

page_setup()
st.title("Convergence")
res = require_fit()
fit_caption(res)
m = res.model

if m.collapsed_:
    st.error(
        "Collapse: every restart explains (almost) all ratings as spam, so the estimates are "
        "the prior mean. Try the warm start, another seed or the model without spam."
    )
elif m.restarts_["collapsed"].any():
    st.warning(
        f"{int(m.restarts_['collapsed'].sum())} restart(s) collapsed to the all-spam solution "
        "and were not chosen."
    )
for w in m.warnings_:
    st.warning(w)
if m.interrupted_:
    st.info("The fit was stopped: only the restarts run before the stop are shown.")
st.info(f"Selection: {selection_explanation(m)}.")

# restarts are numbered from 0, as in restarts.csv, trace.csv and summary.json
best = m.best_restart_
trace, restarts = m.trace_, m.restarts_
k = st.columns(4)
k[0].metric("Chosen restart", best, help=RESTART_HELP)
k[1].metric("Converged", "yes" if m.converged_ else "no")
k[2].metric("Iterations (chosen)", m.n_iter_)
k[3].metric("Lower bound (chosen)", f"{m.lower_bound_:,.2f}")

st.plotly_chart(figures.bound_traces(trace, best, restarts), key="conv_traces")
st.caption(
    "The lower bound is the score the fit climbs: a guaranteed floor under how well the model "
    "explains the ratings, so higher is better, and a restart has converged when it stops "
    "rising. One line per restart: its dashed start is the no-spam warm-up, its dotted part "
    "the mixture with the spam distribution held uniform, its solid end the mixture."
)
st.subheader("Restarts")
table = restarts.reset_index()
table.insert(1, "chosen", table["restart"] == best)
st.dataframe(
    table,
    key="conv_restarts",
    hide_index=True,
    column_config={
        "lower_bound": st.column_config.NumberColumn(format="%.3f"),
        "truth_share": st.column_config.NumberColumn(format="%.3f"),
    },
)
st.caption(
    "n_iter counts the mixture's sweeps; uniform_iter those of the stage with uniform spam "
    "before it; warmup_iter a restart's own no-spam warm-up and shared_iter the warm-up it "
    "branched from (shared by the restarts). The chosen restart's iterations above are "
    "uniform_iter + n_iter. pruned_at: the sweep of its stage after which the race dropped it "
    "(None: it ran to the end). truth_share is the share of ratings explained by the truth "
    "component."
)
