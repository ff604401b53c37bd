"""Fit: the model's settings (paper defaults), Run with live progress, Stop."""

import time

import streamlit as st

from app import FitParams, fit_caption, kept, page_setup, require_dataset, session
from ordmix_core.data import fmt_scale

DEFAULTS = FitParams()

page_setup()
st.title("Fit the ordinal-discrete-mixture")
s = session()
ds = require_dataset()
st.caption(
    f"Data: **{ds.name}** - {len(ds.ratings):,} ratings on the scale {fmt_scale(ds.scale.values)}."
)

grans = ["query", "instance", "global"] if ds.has_query else ["instance", "global"]

with st.container(border=True):
    c1, c2, c3, c4 = st.columns(4)
    granularity = kept(
        c1.selectbox,
        "Granularity of difficulty",
        key="fit_granularity",
        default=grans[0],
        options=grans,
        help="Which items share a difficulty delta: each instance, each query (the paper's "
        "choice for TREC) or one for all.",
    )
    n_restarts = kept(
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
    max_iter = kept(
        c3.number_input,
        "Max iterations",
        key="fit_max_iter",
        default=DEFAULTS.max_iter,
        min_value=1,
        max_value=100_000,
        step=50,
        help="Cap on sweeps per restart (and per warm-up). Default 1000.",
    )
    tol = kept(
        c4.number_input,
        "Tolerance",
        key="fit_tol",
        default=DEFAULTS.tol,
        min_value=0.0,
        step=0.01,
        format="%.4f",
        help="Stop a restart when the lower bound changes by less than this. Paper: 0.1.",
    )
    c1, c2, c3, c4 = st.columns(4)
    phi = kept(
        c1.number_input,
        "phi",
        key="fit_phi",
        default=DEFAULTS.phi,
        min_value=1e-6,
        step=1.0,
        help="Shape of the Gamma(phi, eta) prior on the inverse difficulty delta (prior mean "
        "phi/eta); fixed, for identifiability. Paper: 10.",
    )
    eta = kept(
        c2.number_input,
        "eta",
        key="fit_eta",
        default=DEFAULTS.eta,
        min_value=1e-6,
        step=0.5,
        help="Rate of the Gamma(phi, eta) prior on the inverse difficulty delta (prior mean "
        "phi/eta). Paper: 5.",
    )
    lam = kept(
        c3.number_input,
        "lambda",
        key="fit_lam",
        default=DEFAULTS.lam,
        min_value=1e-6,
        step=0.05,
        format="%.3f",
        help="Precision of the N(mu, 1/lambda) prior on each item's true value. Paper: 0.1.",
    )
    mu_text = kept(
        c4.text_input,
        "mu",
        key="fit_mu",
        default="",
        help="Prior mean of the true values; empty = the mean of the scale (the paper's choice).",
    )
    c1, c2, c3, c4 = st.columns(4)
    ordinal = kept(
        c1.toggle,
        "Ordinal likelihood",
        key="fit_ordinal",
        default=DEFAULTS.ordinal,
        help="On: ratings are thresholded latent values (the paper's model). Off: the "
        "real-valued variant, rating = latent value.",
    )
    spam = kept(
        c2.toggle,
        "Spam component",
        key="fit_spam",
        default=DEFAULTS.spam,
        help="On: each rating is honest or spam (uniform over the levels); off: no spam model.",
    )
    exact = kept(
        c3.toggle,
        "Exact updates",
        key="fit_exact",
        default=DEFAULTS.updates == "exact",
        help="On: exact coordinate ascent (the bound never decreases). Off: the paper's literal "
        "update (eq. 4).",
    )
    seed = kept(
        c4.number_input,
        "Seed",
        key="fit_seed",
        default=DEFAULTS.seed,
        min_value=0,
        step=1,
        help="Random seed of the restarts' initialisations: same seed, same result.",
    )

mu = None
if mu_text.strip():
    try:
        mu = float(mu_text)
    except ValueError:
        st.error(f"mu {mu_text!r} is not a number; leave it empty for the mean of the scale.")
        st.stop()
params = FitParams(
    granularity=granularity,
    ordinal=ordinal,
    spam=spam,
    updates="exact" if exact else "paper",
    n_restarts=int(n_restarts),
    max_iter=int(max_iter),
    tol=float(tol),
    phi=float(phi),
    eta=float(eta),
    lam=float(lam),
    mu=mu,
    seed=int(seed),
)

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
    st.info(f"Selection: {m.selection_reason_}.")
    st.caption(f"Settings: {res.params}")
    cols = st.columns(3)
    cols[0].page_link("pages/items.py", label="Items", icon=":material/format_list_numbered:")
    cols[1].page_link("pages/annotators.py", label="Annotators", icon=":material/groups:")
    cols[2].page_link("pages/convergence.py", label="Convergence", icon=":material/show_chart:")
