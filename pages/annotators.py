"""Annotators: evidence-aware flags (unreliable / ok / undetermined) with their evidence.

The flags are ``reliability.annotator_flags`` (through the cached ``fit_decisions``); the
threshold and the confidence are this page's widgets, and its downloads write the columns
``ordmix fit`` writes for the same settings.
"""

import numpy as np
import streamlit as st

from ordmix_core.dashboard import figures, figures_decisions
from ordmix_core.dashboard.fit_summary import no_spam_note
from ordmix_core.results import decisions, explanations
from ordmix_core.results.agreement import words
from pages._ui import (
    fit_caption,
    fit_decisions,
    fit_table_download,
    page_setup,
    require_fit,
    review_download,
    session,
)

#: one plain line per flag (the threshold t and confidence c filled in)
MEANING = {
    "unreliable": "Their ratings make a reliability below {t:g} at least {c:.0%} probable: "
    "they often contradict what the other ratings say about the same items. Review them.",
    "ok": "Their ratings make a reliability of {t:g} or more at least {c:.0%} probable: they "
    "agree with the other ratings of the same items.",
    "undetermined": "Too few ratings, ratings of items nobody else rated well, or a reliability "
    "near {t:g}, to judge either way at {c:.0%}: not a verdict. Collect more of their ratings "
    "first.",
}

page_setup()
st.title("Annotators")
res = require_fit()
fit_caption(res)
c1, c2 = st.columns(2)
threshold = c1.slider(
    "Reliability threshold",
    min_value=0.05,
    max_value=0.95,
    value=decisions.THRESHOLD,
    step=0.05,
    key="ann_threshold",
    help="An annotator's reliability is the share of their ratings that come from the truth "
    "rather than from spam; they are judged against this value.",
)
confidence = c2.slider(
    "Confidence a flag needs",
    min_value=0.55,
    max_value=0.99,
    value=decisions.CONFIDENCE,
    step=0.01,
    key="ann_confidence",
    help="An annotator is flagged unreliable (or ok) only when their ratings make that at "
    "least this probable; otherwise they are undetermined.",
)
if not res.model.spam_:
    st.info(no_spam_note(res.model))
dec = fit_decisions(res, res.fit_id, threshold, confidence)
if dec.annotators is None:
    st.warning(f"Annotator flags: {dec.no_flags}.")
    st.stop()
ann = res.model.annotators_.join(dec.annotators)
total = max(int(ann["n_ratings"].sum()), 1)

cols = st.columns(4)
for col, flag in zip(cols, decisions.ANNOTATOR_FLAGS, strict=False):
    group = ann[ann["flag"] == flag]
    col.metric(
        flag.capitalize(),
        f"{len(group):,}",
        help=f"{group['n_ratings'].sum() / total:.1%} of the ratings",
        border=True,
    )
    col.caption(MEANING[flag].format(t=threshold, c=confidence))
crowd = dec.agreement
if crowd is not None:  # how much the crowd agrees, beside the flags
    alpha = f"{crowd.alpha:.3f}" if np.isfinite(crowd.alpha) else "-"
    cols[3].metric(
        "Crowd agreement (alpha)",
        alpha,
        help="Krippendorff's alpha with the ordinal distance over the items rated at least "
        "twice: 1 is perfect agreement, 0 what chance gives. Each annotator's own, against "
        "the others, is the agreement column below.",
        border=True,
    )
    said = words(crowd.as_dict())
    cols[3].caption(said[:1].upper() + said[1:] + ".")

st.plotly_chart(figures_decisions.annotator_evidence(ann), key="ann_evidence")
st.caption(
    "Each marker is an annotator: how many ratings they gave (log scale) against the "
    "probability that their reliability is below the threshold, from their ratings alone. "
    "Above the upper dotted line: unreliable; below the lower one: ok; the band between is "
    "undetermined, where annotators with few ratings stay whatever their point estimate. Hover "
    "shows the credible interval of each one's reliability."
)

st.subheader("The groups, with the evidence")
evidence_cols = {
    "p_unreliable": st.column_config.NumberColumn("P(unreliable)", format="%.3f"),
    "reliability_lower": st.column_config.NumberColumn("reliability from", format="%.3f"),
    "reliability_upper": st.column_config.NumberColumn("reliability to", format="%.3f"),
    "reliability": st.column_config.TextColumn(
        "fit's reliability",
        help="The fit's point estimate, 3 decimals (<0.001: within a thousandth of 0).",
    ),
    "expertise": st.column_config.NumberColumn(
        format="%.3g",
        help="As annotators.csv has it. Where their spam_share is above "
        f"{1 - explanations.NO_EXPERTISE_BELOW:g} the fit takes (almost) all their ratings as "
        "spam, so their expertise is mostly its prior.",
    ),
    "agreement": st.column_config.NumberColumn(
        format="%.2f",
        help="Their agreement with the other annotators on the items they share: "
        "Krippendorff's alpha with the ordinal distance, their ratings against the others' "
        "(1: always agree, 0: as chance would, below 0: less). annotators.csv has it.",
    ),
    "spam_share": st.column_config.NumberColumn(format="%.3f"),
    "bias": st.column_config.NumberColumn(format="%+.2f"),
    "bias_sd": st.column_config.NumberColumn(format="%.2f"),
    "unstable": st.column_config.CheckboxColumn("unstable"),
    "still_moving": st.column_config.CheckboxColumn("still moving"),
}
shown = ["annotator", "n_ratings", "p_unreliable", "reliability_lower", "reliability_upper",
         "agreement", "reliability", "expertise", "bias", "spam_share", "unstable",
         "still_moving"]  # fmt: skip
shown = [c for c in shown if c == "annotator" or c in ann.columns]
st.caption(
    "Reliability: the share of their ratings that give their item's level rather than spam, "
    "each rating judged against what the other ratings of its item say (the posterior the "
    "labels come from); the flag reads the same posterior. Expertise: how precisely an "
    "annotator's honest ratings track the truth. Bias: how far above (+, lenient) or below "
    "(-, strict) the truth they rate, in units of the scale (0 under the paper's model, which "
    "has no bias). Unstable: answers the data support about as well (near-tied restarts, or "
    "the still-moving annotators carried the way they were going) put the continuous fit's "
    "reliability (eps in annotators.csv) on both sides of 0.5. Still moving: that eps was "
    "still changing when the fit stopped, so a longer fit may change their expertise and spam "
    "share."
)
tabs = st.tabs(
    [f"{flag.capitalize()} ({(ann['flag'] == flag).sum():,})" for flag in decisions.ANNOTATOR_FLAGS]
)
shown_ann = explanations.annotators_for_people(ann)
for tab, flag in zip(tabs, decisions.ANNOTATOR_FLAGS, strict=True):
    # most certain and biggest first: the unreliable and undetermined by P(unreliable), the
    # ok by P(ok); then by the number of ratings
    group = shown_ann[shown_ann["flag"] == flag].sort_values(
        ["p_unreliable", "n_ratings"], ascending=[flag == "ok", False], kind="stable"
    )
    tab.caption(MEANING[flag].format(t=threshold, c=confidence))
    tab.dataframe(
        group.reset_index()[shown],
        key=f"ann_table_{flag}",
        hide_index=True,
        column_config=evidence_cols,
    )

st.subheader("Why an annotator is flagged")
ds = session().dataset
flagged = decisions.annotators_to_review(ann)["annotator"].astype(str).tolist()
if ds is None or ds.name != res.dataset:
    st.info("The ratings of this fit's data set are no longer loaded: load it again to see why.")
elif not flagged:
    st.info("No annotator is flagged unreliable with these settings.")
else:
    who = st.selectbox(
        "Flagged annotator",
        flagged,
        key="ann_why",
        help="The annotators flagged unreliable, most certain first.",
    )
    ratings = ds.ratings
    decided = res.model.items_.join(fit_decisions(res, res.fit_id).items)
    theirs = explanations.annotator_items(ratings, who, decided)
    row = ann.loc[ann.index.astype(str) == who].iloc[0]
    k = st.columns(5)
    k[0].metric("Ratings", f"{len(theirs):,}")
    k[1].metric(
        "Agreement with the consensus",
        f"{explanations.agreement(theirs):.0%}",
        help="The share of their ratings equal to the item's label.",
    )
    k[2].metric("P(unreliable)", explanations.probability_text(row["p_unreliable"]))
    k[3].metric(
        "Reliability",
        f"{row['reliability_lower']:.2f} to {row['reliability_upper']:.2f}",
        help=f"The {confidence:.0%} credible interval of their reliability from their ratings.",
    )
    k[4].metric(
        "Agreement with the others (alpha)",
        "-" if not np.isfinite(row["agreement"]) else f"{row['agreement']:.2f}",
        help="Krippendorff's ordinal alpha of their ratings against the other annotators' "
        "ratings of the same items (the agreement column).",
    )
    levels = list(res.model.scale_.labels)  # the ratings' levels, names for named levels
    st.plotly_chart(
        figures_decisions.rating_histogram(theirs["rating"], ratings["rating"], levels, who),
        key="ann_why_histogram",
    )
    st.dataframe(  # the whole width: every column readable, the estimate included
        theirs,
        key="ann_why_items",
        hide_index=True,
        column_config={"estimate": st.column_config.NumberColumn(format="%.2f")},
    )
    st.caption("The items they rated, their rating against the item's label; disagreements first.")

c1, c2 = st.columns(2)
with c1:
    review = review_download(res, dec, key="ann_review_download")
    st.caption(
        f"The {len(review):,} annotators flagged unreliable, most certain first: the file "
        "`ordmix next --review` writes for this fit at these settings (full numbers)."
    )
with c2:
    fit_table_download(res, "annotators", dec, key="ann_download")
    st.caption("Every annotator with the flag columns, as `ordmix fit` writes annotators.csv.")

with st.expander("Expertise against the fit's reliability, and their distributions"):
    st.plotly_chart(figures.annotator_scatter(ann), key="ann_scatter")
    st.caption(
        "The fit's own point estimates (expertise on a log scale; the reliability is the middle "
        "of the posterior the flags read, so an annotator with few ratings sits near 0.5, "
        "undetermined, however they rated). Annotators that share one spot are spread into a "
        "disc that grows with their number; hover shows each one's own values."
    )
    st.plotly_chart(figures.annotator_distributions(ann), key="ann_distributions")
