"""Annotators: expertise vs reliability, distributions, spammer list with a threshold."""

import streamlit as st

from ordmix_core import figures
from ordmix_core.fitjob import SPAM_SHARE_THRESHOLD, annotator_flags
from pages._ui import csv_download, fit_caption, page_setup, require_fit

page_setup()
st.title("Annotators")
res = require_fit()
fit_caption(res)
threshold = st.slider(
    "Flag an annotator as a spammer when this share of their ratings is spam (or more)",
    min_value=0.0,
    max_value=1.0,
    value=SPAM_SHARE_THRESHOLD,
    step=0.05,
    key="ann_threshold",
    help="Spam share: the posterior probability, averaged over the annotator's ratings, that a "
    "rating came from the spam component rather than from the truth.",
)
if not res.params.spam:
    st.info("This fit has no spam component, so no annotator can be flagged; refit with it on.")
ann = res.model.annotators_.assign(flag=annotator_flags(res.model.annotators_, threshold))

st.plotly_chart(figures.annotator_scatter(ann), key="ann_scatter")
st.caption(
    "Expertise is on a log scale, as in the histogram below. Annotators that share one spot "
    "(often many with only a few ratings, whose estimates stay at the prior) are spread into a "
    "disc that grows with their number; hover shows each one's own values."
)
st.plotly_chart(figures.annotator_distributions(ann), key="ann_distributions")

flagged = ann[ann["flag"] != "ok"].sort_values("spam_share", ascending=False)
share = flagged["n_ratings"].sum() / max(ann["n_ratings"].sum(), 1)
st.subheader(f"Flagged: {len(flagged):,} of {len(ann):,} annotators")
st.caption(f"They gave {share:.1%} of all ratings.")
st.dataframe(
    flagged.reset_index(),
    key="ann_flagged_table",
    hide_index=True,
    column_config={
        "expertise": st.column_config.NumberColumn(format="%.3g"),
        "expertise_sd": st.column_config.NumberColumn(format="%.3g"),
        "reliability": st.column_config.NumberColumn(format="%.3f"),
        "spam_share": st.column_config.NumberColumn(format="%.3f"),
        "bias": st.column_config.NumberColumn(format="%+.2f"),
        "bias_sd": st.column_config.NumberColumn(format="%.2f"),
    },
)
st.caption(
    "Expertise: how precisely an annotator's honest ratings track the truth. Reliability: "
    "the share of their ratings the fit takes as honest rather than spam. Bias: how far "
    "above (+, lenient) or below (-, strict) the truth they rate, in units of the scale "
    "(0 under the paper's model, which has no bias)."
)
csv_download(
    flagged.reset_index(),
    id_columns=["annotator"],
    file_name="flagged-annotators.csv",
    key="ann_download",
)
with st.expander("All annotators"):
    st.dataframe(
        ann.reset_index().sort_values("spam_share", ascending=False),
        key="ann_all_table",
        hide_index=True,
    )
