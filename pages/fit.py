"""Fit: the basic settings, the model's options under "Advanced", Run with live progress, Stop.

Every setting is an entry of the options table (``ordmix_core.estimators.options``: label,
help, valid values, default), shown by :func:`option_widget`; :func:`fit_params` is the one
place where this page's widget values become the estimator's settings
(``option_frontends.to_estimator_kwargs``). A setting the data set's scale refuses (``mu``
outside its outer thresholds) gets the engine's own message (``options.validate_params``) as
soon as it is entered, and Run is not offered.
"""

import time
from typing import Any

import streamlit as st

from ordmix_core.dashboard.fit_job import FIT_SETTINGS, FitParams, fit_page_options
from ordmix_core.dashboard.fit_summary import fit_summary, page_warnings
from ordmix_core.data.scale import fmt_scale
from ordmix_core.errors import InputError
from ordmix_core.estimators import option_frontends, option_kinds, options
from ordmix_core.results.decisions import truth_share
from pages._ui import (
    RESTART_HELP,
    fit_caption,
    fit_decisions,
    kept,
    page_setup,
    require_dataset,
    session,
    show_error,
)

DEFAULTS = FitParams()
#: the select's entry for an optional switch's None (a real option, so the select shows its
#: name rather than an empty "Choose an option")
AS_MODEL_SAYS = "as the model says"


def fit_params(values: dict[str, Any]) -> FitParams:
    """The widget values (by option name) as the estimator's settings, checked against the
    options table; InputError naming the setting if one is unusable. A text box left empty
    means the option's "none" (e.g. mu: the mean of the scale)."""
    out = dict(values)
    for o in fit_page_options():
        if o.widget == "text" and o.name in out:
            out[o.name] = _from_text(o, str(out[o.name]))
    fit_only = {k: bool(out.pop(k)) for k in FIT_SETTINGS if k in out}  # fit's, not the model's
    return FitParams(**option_frontends.to_estimator_kwargs(out), **fit_only)


def _from_text(o: option_kinds.Option, text: str) -> Any:
    text = text.strip()
    if not text and o.kind.none:
        return None
    if isinstance(o.kind, option_kinds.Real):
        try:
            float(text)
        except ValueError:
            empty = f"; leave it empty for {o.kind.none}" if o.kind.none else ""
            raise InputError(f"{o.label}: {text!r} is not a number{empty}") from None
    try:
        return o.kind.parse(text)
    except ValueError as e:
        raise InputError(f"{o.label} {e}") from None


def option_widget(o: option_kinds.Option, where: Any, choices: list | None = None) -> Any:
    """The option's widget (kind, label, help and default from the table), keyed ``fit_<name>``
    and remembered across pages; ``choices``: the values offered, if not all the table's."""
    key, default = f"fit_{o.name}", getattr(DEFAULTS, o.name)
    if o.widget == "select" and isinstance(o.kind, option_kinds.OptionalFlag):
        names = {AS_MODEL_SAYS: o.kind.none, True: "on", False: "off"}
        offered = [AS_MODEL_SAYS if c is None else c for c in o.kind.choices]
        if st.session_state.get(key, AS_MODEL_SAYS) is None:  # set to None by a caller
            st.session_state[key] = AS_MODEL_SAYS
        value = kept(
            where.selectbox, o.label, key=key,
            default=AS_MODEL_SAYS if default is None else default, options=offered,
            format_func=names.get, help=o.help,
        )  # fmt: skip
        return None if value == AS_MODEL_SAYS else value
    if o.widget == "select":
        offered = list(choices if choices is not None else o.kind.choices)
        default = default if default in offered else offered[0]
        return kept(
            where.selectbox, o.label, key=key, default=default, options=offered, help=o.help
        )
    if o.widget == "toggle":
        return kept(where.toggle, o.label, key=key, default=bool(default), help=o.help)
    if o.widget == "text":
        text = "" if default is None else str(default)
        return kept(where.text_input, o.label, key=key, default=text, help=o.help)
    if o.widget == "int":  # None (left empty): the option's "none"
        return kept(
            where.number_input, o.label, key=key, default=None if default is None else int(default),
            help=o.help, placeholder=o.kind.none, **o.widget_args,
        )  # fmt: skip
    return kept(
        where.number_input, o.label, key=key, default=float(default), help=o.help,
        **o.widget_args,
    )  # fmt: skip


page_setup()
st.title("Fit the ordinal-discrete-mixture")
s = session()
ds = require_dataset()
st.caption(f"Data: **{ds.name}** - {ds.n_ratings:,} ratings on the scale {fmt_scale(ds.scale)}.")

offered = {"granularity": [g for g in options.option("granularity").kind.choices
                           if g != "query" or ds.has_query]}  # fmt: skip
values: dict[str, Any] = {}
with st.container(border=True):
    basic = fit_page_options("basic")
    for o, col in zip(basic, st.columns(len(basic)), strict=True):
        values[o.name] = option_widget(o, col, offered.get(o.name))
    values["use_gold"] = kept(
        st.toggle,
        "Use gold in the fit",
        key="fit_use_gold",
        default=False,
        disabled=ds.gold is None,
        help="On: the data set's gold items are known in the fit (their value is the gold "
        "one, and their raters are judged against it). Scores on those items then say "
        "nothing; use them to anchor a fit, not to evaluate it.",
    )
with st.expander("Advanced: the model and its priors (the paper's values work for most data)"):
    advanced = fit_page_options("advanced")
    cols = st.columns(4)
    for i, o in enumerate(advanced):
        values[o.name] = option_widget(o, cols[i % 4], offered.get(o.name))

try:
    params = fit_params(values)
    options.validate_params(params, ds.scale)  # the engine's checks against the data's scale
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
stop_said = bool(msg) and res is not None and res.stopped and msg.startswith("Stopped after")
if msg:
    if stop_said:
        st.warning(msg)
    elif msg.startswith(("Stopped", "The fit failed")):
        st.error(msg)
    else:
        st.success(msg)

if res is not None:
    m = res.model
    st.subheader("Result")
    fit_caption(res)
    k = st.columns(5)
    k[0].metric("Chosen restart", m.best_restart_, help=RESTART_HELP)
    k[1].metric("Converged", "yes" if m.converged_ else "no")
    k[2].metric("Iterations", m.n_iter_)
    k[3].metric("Seconds", f"{m.seconds_:.1f}")
    k[4].metric(
        "Ratings taken as spam",
        f"{1.0 - truth_share(m):.1%}" if m.spam_ else "none (no spam component)",
        help="The mean over all ratings of the probability that a rating is spam (1 - omega).",
    )
    for w in page_warnings(m, stop_said):
        st.warning(w)
    dec = fit_decisions(res, res.fit_id)
    st.info("\n".join(f"- {line}" for line in fit_summary(m, dec)), icon=":material/summarize:")
    st.caption(f"Settings: {res.params.describe()}.")
    cols = st.columns(3)
    cols[0].page_link("pages/items.py", label="Items", icon=":material/format_list_numbered:")
    cols[1].page_link("pages/annotators.py", label="Annotators", icon=":material/groups:")
    cols[2].page_link("pages/convergence.py", label="Convergence", icon=":material/show_chart:")
