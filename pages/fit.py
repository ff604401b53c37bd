"""Fit: the basic settings, the priors under "Advanced", Run with live progress, Stop.

:func:`fit_params` is the one place where this page's widget values become the estimator's
settings.
"""

import time
from typing import Any

import streamlit as st

from ordmix_core.data import fmt_scale
from ordmix_core.errors import InputError
from ordmix_core.fitjob import FitParams, fit_summary
from pages._ui import fit_caption, kept, page_setup, require_dataset, session, show_error

DEFAULTS = FitParams()


def fit_params(values: dict[str, Any]) -> FitParams:
    """The widget values (by setting name) as the estimator's settings; InputError if unusable."""
    mu_text = str(values["mu"]).strip()
    try:
        mu = float(mu_text) if mu_text else None
    except ValueError:
        raise InputError(
            f"mu {mu_text!r} is not a number; leave it empty for the mean of the scale"
        ) from None
    return FitParams(
        granularity=values["granularity"],
        ordinal=bool(values["ordinal"]),
        spam=bool(values["spam"]),
        model=values["model"],
        use_gold=bool(values["use_gold"]),
        updates="exact" if values["exact"] else "paper",
        n_restarts=int(values["n_restarts"]),
        max_iter=int(values["max_iter"]),
        tol=float(values["tol"]),
        phi=float(values["phi"]),
        eta=float(values["eta"]),
        lam=float(values["lam"]),
        mu=mu,
        random_state=int(values["seed"]),
    )


page_setup()
st.title("Fit the ordinal-discrete-mixture")
s = session()
ds = require_dataset()
st.caption(
    f"Data: **{ds.name}** - {ds.n_ratings:,} ratings on the scale {fmt_scale(ds.scale.values)}."
)

grans = ["query", "instance", "global"] if ds.has_query else ["instance", "global"]
values: dict[str, Any] = {}

with st.container(border=True):
    c1, c2, c3, c4 = st.columns(4)
    values["granularity"] = kept(
        c1.selectbox,
        "Granularity of difficulty",
        key="fit_granularity",
        default=grans[0],
        options=grans,
        help="Which items share one difficulty: each instance, each query (the paper's "
        "choice for TREC) or one for all.",
    )
    values["n_restarts"] = kept(
        c2.number_input,
        "Restarts",
        key="fit_restarts",
        default=DEFAULTS.n_restarts,
        min_value=1,
        max_value=100,
        step=1,
        help="Independent starts; the one with the highest lower bound that did not collapse "
        "wins. Paper: 10.",
    )
    values["max_iter"] = kept(
        c3.number_input,
        "Max iterations",
        key="fit_max_iter",
        default=DEFAULTS.max_iter,
        min_value=1,
        max_value=100_000,
        step=50,
        help="Cap on sweeps per restart (and per warm-up). Default 1000.",
    )
    values["tol"] = kept(
        c4.number_input,
        "Tolerance",
        key="fit_tol",
        default=DEFAULTS.tol,
        min_value=0.0,
        step=0.01,
        format="%.4f",
        help="Stop a restart when the lower bound changes by less than this. Paper: 0.1.",
    )
    c1, c2, c3, _ = st.columns(4)
    values["ordinal"] = kept(
        c1.toggle,
        "Ordinal likelihood",
        key="fit_ordinal",
        default=DEFAULTS.ordinal,
        help="On: ratings are thresholded latent values (the paper's model). Off: the "
        "real-valued variant, rating = latent value.",
    )
    values["spam"] = kept(
        c2.toggle,
        "Spam component",
        key="fit_spam",
        default=DEFAULTS.spam,
        help="On: each rating is honest or spam (uniform over the levels); off: no spam model.",
    )
    values["seed"] = kept(
        c3.number_input,
        "Seed",
        key="fit_seed",
        default=DEFAULTS.random_state,
        min_value=0,
        step=1,
        help="Random seed of the restarts' starting points: same seed, same result.",
    )
    c1, c2, _, _ = st.columns(4)
    values["model"] = kept(
        c1.selectbox,
        "Model",
        key="fit_model",
        default=DEFAULTS.model,
        options=["extended", "paper"],
        help="extended (default): lenient and strict raters get a bias, and spammers' "
        "favourite answers are learned (after a stage with uniform spam). paper: the "
        "published model of Lakshminarayanan & Teh.",
    )
    values["use_gold"] = kept(
        c2.toggle,
        "Use gold in the fit",
        key="fit_use_gold",
        default=False,
        disabled=ds.gold is None,
        help="On: the data set's gold items are known in the fit (their value is the gold "
        "one, and their raters are judged against it). Scores on those items then say "
        "nothing; use them to anchor a fit, not to evaluate it.",
    )

with st.expander("Advanced: priors and update rule (the paper's values work for most data)"):
    c1, c2, c3, c4 = st.columns(4)
    values["phi"] = kept(
        c1.number_input,
        "phi",
        key="fit_phi",
        default=DEFAULTS.phi,
        min_value=1e-6,
        step=1.0,
        help="How strongly the model assumes items are of average difficulty: with eta, the "
        "prior guess of each category's difficulty (phi/eta = 2 by default); larger phi holds "
        "difficulties closer to that guess. Paper: 10.",
    )
    values["eta"] = kept(
        c2.number_input,
        "eta",
        key="fit_eta",
        default=DEFAULTS.eta,
        min_value=1e-6,
        step=0.5,
        help="The other half of the difficulty prior: the typical inverse difficulty is "
        "phi/eta, so a larger eta makes items look harder. Paper: 5.",
    )
    values["lam"] = kept(
        c3.number_input,
        "lambda",
        key="fit_lam",
        default=DEFAULTS.lam,
        min_value=1e-6,
        step=0.05,
        format="%.3f",
        help="How firmly an item's true value is pulled towards mu before any rating: the "
        "prior's spread is 1/sqrt(lambda) (3.16 levels at the paper's 0.1). Larger values "
        "pull estimates of sparsely rated items harder towards mu.",
    )
    values["mu"] = kept(
        c4.text_input,
        "mu",
        key="fit_mu",
        default="",
        help="Where an item's true value sits before any rating is seen; empty = the middle "
        "of the scale (the paper's choice).",
    )
    values["exact"] = kept(
        st.toggle,
        "Exact updates",
        key="fit_exact",
        default=DEFAULTS.updates == "exact",
        help="On: every step provably improves the fit (the lower bound never goes down). "
        "Off: the paper's literal update (its eq. 4), kept to reproduce the paper.",
    )

try:
    params = fit_params(values)
except InputError as err:
    show_error(err)
    st.stop()

job = s.job
running = job is not None and job.running
b1, b2, _ = st.columns([1, 1, 4])
if b1.button(
    "Run fit", key="fit_run", type="primary", disabled=running, icon=":material/play_arrow:"
):
    job = s.start_fit(params)
    running = True
if b2.button("Stop", key="fit_stop", disabled=not running, icon=":material/stop:"):
    s.request_stop()
st.caption(
    "Stop keeps the best restart found so far (the restart in progress counts with its bound "
    "at the moment of stopping; stopped during the no-spam warm-up, the warm-up's fit is kept) "
    "and replaces the previous result. A fit that fails leaves the previous result in place."
)

if running:
    bar = st.progress(job.fraction(), text=job.status())
    while not job.done.wait(0.25):
        bar.progress(job.fraction(), text=job.status())
    bar.progress(1.0, text=job.status())
    s.collect()
    time.sleep(0.05)
    st.rerun()

msg = s.last_message
res = s.fit
if msg:
    if res is not None and res.stopped and msg.startswith("Stopped after"):
        st.warning(msg)
    elif msg.startswith(("Stopped", "The fit failed")):
        st.error(msg)
    else:
        st.success(msg)

if res is not None:
    m = res.model
    st.subheader("Result")
    fit_caption(res)
    k = st.columns(4)
    k[0].metric("Chosen restart", m.best_restart_)
    k[1].metric("Converged", "yes" if m.converged_ else "no")
    k[2].metric("Iterations", m.n_iter_)
    k[3].metric("Seconds", f"{m.seconds_:.1f}")
    for w in m.warnings_:
        st.warning(w)
    st.info("\n".join(f"- {line}" for line in fit_summary(m)), icon=":material/summarize:")
    st.caption(f"Settings: {res.params.describe()}.")
    cols = st.columns(3)
    cols[0].page_link("pages/items.py", label="Items", icon=":material/format_list_numbered:")
    cols[1].page_link("pages/annotators.py", label="Annotators", icon=":material/groups:")
    cols[2].page_link("pages/convergence.py", label="Convergence", icon=":material/show_chart:")
