"""Plotly figures for the dashboard and notebooks: pure functions from results to figures.

Every function takes plain pandas objects (the engine's ``items_``, ``annotators_``,
``trace_`` ... or the comparison tables) and returns a :class:`plotly.graph_objects.Figure`.
No streamlit here: ``fig.show()`` works the same in a notebook.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

#: z value of a two-sided 95% normal interval
Z95 = 1.959963984540054
METRIC_LABELS = {"mse": "MSE (lower is better)", "correlation": "Correlation", "ndcg": "NDCG"}
_WINNER = "#d62728"
_OTHER = "#9aa5b1"
_TEMPLATE = "plotly_white"


def _layout(fig: go.Figure, title: str, **kw: object) -> go.Figure:
    fig.update_layout(title=title, template=_TEMPLATE, margin={"t": 60, "l": 60, "r": 20}, **kw)
    return fig


def _need(df: pd.DataFrame, cols: list[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {', '.join(missing)}")


def annotator_scatter(
    annotators: pd.DataFrame, threshold: float | None = None, log_x: bool = True
) -> go.Figure:
    """Expertise (x) vs reliability (y) per annotator, coloured by spam share.

    ``annotators``: the engine's ``annotators_`` (index annotator; columns n_ratings,
    expertise, reliability, spam_share). Hover shows the annotator, counts and values;
    annotators with ``spam_share >= threshold`` are drawn as crosses.
    """
    _need(annotators, ["n_ratings", "expertise", "reliability", "spam_share"], "the scatter")
    a = annotators
    names = a.index.astype(str).to_numpy()
    n = a["n_ratings"].to_numpy(dtype=float)
    size = 6.0 + 14.0 * np.sqrt(n / max(float(n.max()), 1.0)) if len(n) else n
    flagged = (
        a["spam_share"].to_numpy() >= threshold if threshold is not None else np.zeros(len(a), bool)
    )
    custom = np.column_stack(
        [names, a["n_ratings"].to_numpy(), a["spam_share"].to_numpy(dtype=float)]
    )
    fig = go.Figure()
    for mask, label, symbol in (
        (~flagged, "annotator", "circle"),
        (flagged, "flagged as spammer", "x"),
    ):
        if not mask.any():
            continue
        fig.add_trace(
            go.Scatter(
                x=a["expertise"].to_numpy(dtype=float)[mask],
                y=a["reliability"].to_numpy(dtype=float)[mask],
                mode="markers",
                name=label,
                customdata=custom[mask],
                marker={
                    "size": size[mask],
                    "symbol": symbol,
                    "color": a["spam_share"].to_numpy(dtype=float)[mask],
                    "colorscale": "RdYlBu_r",
                    "cmin": 0.0,
                    "cmax": 1.0,
                    "colorbar": {"title": {"text": "spam share"}},
                    "line": {"width": 0.5, "color": "#333"},
                },
                hovertemplate=(
                    "<b>%{customdata[0]}</b><br>ratings: %{customdata[1]}<br>"
                    "expertise: %{x:.3g}<br>reliability: %{y:.3f}<br>"
                    "spam share: %{customdata[2]:.3f}<extra></extra>"
                ),
            )
        )
    fig.update_xaxes(title="expertise E[tau] (precision of honest ratings)")
    if log_x:
        fig.update_xaxes(type="log")
    fig.update_yaxes(title="reliability epsilon (P(rating is honest))", range=[-0.05, 1.05])
    return _layout(fig, "Annotators: expertise vs reliability", legend={"orientation": "h"})


def annotator_distributions(annotators: pd.DataFrame) -> go.Figure:
    """Histograms of log10 expertise and of spam share (the posterior spam probability)."""
    _need(annotators, ["expertise", "spam_share"], "the distributions")
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("log10 expertise", "spam share of an annotator's ratings")
    )
    expertise = annotators["expertise"].to_numpy(dtype=float)
    fig.add_trace(
        go.Histogram(x=np.log10(np.maximum(expertise, 1e-12)), name="log10 expertise", nbinsx=30),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Histogram(
            x=annotators["spam_share"].to_numpy(dtype=float),
            name="spam share",
            xbins={"start": 0.0, "end": 1.0, "size": 0.05},
        ),
        row=1,
        col=2,
    )
    fig.update_yaxes(title="annotators", row=1, col=1)
    return _layout(fig, "Distributions over annotators", showlegend=False)


def estimate_distribution(items: pd.DataFrame, scale: list[float] | None = None) -> go.Figure:
    """Histogram of the posterior means, with the scale levels as vertical lines."""
    _need(items, ["estimate"], "the distribution")
    fig = go.Figure(go.Histogram(x=items["estimate"].to_numpy(dtype=float), nbinsx=50))
    for v in scale or []:
        fig.add_vline(x=float(v), line_dash="dot", line_color="#888")
    fig.update_xaxes(title="estimate (posterior mean of z)")
    fig.update_yaxes(title="items")
    return _layout(fig, "Distribution of the estimates", showlegend=False)


def item_intervals(items: pd.DataFrame, gold: pd.Series | None = None) -> go.Figure:
    """Estimates of some items with 95% intervals (+-1.96 sd), sorted, with gold where known."""
    _need(items, ["estimate", "sd"], "the interval plot")
    it = items.sort_values("estimate")
    names = it.index.astype(str).to_numpy()
    fig = go.Figure(
        go.Scatter(
            x=names,
            y=it["estimate"].to_numpy(dtype=float),
            mode="markers",
            name="estimate +- 95%",
            error_y={"type": "data", "array": Z95 * it["sd"].to_numpy(dtype=float)},
            hovertemplate="%{x}<br>estimate %{y:.3f}<extra></extra>",
        )
    )
    if gold is not None:
        g = gold.reindex(it.index)
        fig.add_trace(
            go.Scatter(
                x=names,
                y=g.to_numpy(dtype=float),
                mode="markers",
                name="gold",
                marker={"symbol": "diamond-open", "size": 9, "color": _WINNER},
            )
        )
    fig.update_xaxes(title="item", showticklabels=len(it) <= 40)
    fig.update_yaxes(title="estimate")
    return _layout(fig, f"{len(it)} item(s) with 95% intervals")


def bound_traces(
    trace: pd.DataFrame, best_restart: int | None = None, restarts: pd.DataFrame | None = None
) -> go.Figure:
    """The lower bound per iteration for every restart; the chosen restart drawn thick and red.

    ``trace``: the engine's ``trace_`` (restart, stage, iteration, lower_bound). Warm-up
    (``nospam``) stages are dashed and precede the mixture on the x axis. ``restarts``: the
    engine's ``restarts_``; collapsed restarts get "(collapsed)" in the legend.
    """
    _need(trace, ["restart", "stage", "iteration", "lower_bound"], "the bound traces")
    fig = go.Figure()
    collapsed: set[int] = set()
    if restarts is not None and "collapsed" in restarts.columns:
        collapsed = {int(r) for r in restarts.index[restarts["collapsed"].to_numpy(bool)]}
    for r, grp in trace.groupby("restart", sort=True):
        r = int(r)
        win = best_restart is not None and r == best_restart
        grp = grp.reset_index(drop=True)
        step = np.arange(1, len(grp) + 1)  # warm-up then mixture, one x per iteration
        label = (
            f"restart {r}"
            + (" (chosen)" if win else "")
            + (" (collapsed)" if r in collapsed else "")
        )
        for stage, part in grp.groupby("stage", sort=False):
            idx = part.index.to_numpy()
            fig.add_trace(
                go.Scatter(
                    x=step[idx],
                    y=part["lower_bound"].to_numpy(dtype=float),
                    mode="lines",
                    name=label if stage != "nospam" else f"{label}: no-spam warm-up",
                    legendgroup=f"r{r}",
                    line={
                        "width": 3.5 if win else 1.3,
                        "color": _WINNER if win else None,
                        "dash": "dash" if stage == "nospam" else "solid",
                    },
                    opacity=1.0 if win or best_restart is None else 0.7,
                    hovertemplate=(
                        f"restart {r} ({stage})<br>step %{{x}}<br>bound %{{y:,.2f}}<extra></extra>"
                    ),
                )
            )
        if win and len(grp):
            fig.add_annotation(
                x=int(step[-1]),
                y=float(grp["lower_bound"].iloc[-1]),
                text=f"chosen: restart {r}",
                showarrow=True,
                arrowcolor=_WINNER,
                font={"color": _WINNER},
            )
    fig.update_xaxes(title="iteration (warm-up, then mixture)")
    fig.update_yaxes(title="variational lower bound F")
    return _layout(fig, "Lower bound per iteration, every restart")


def estimate_vs_truth(
    estimates: pd.Series | pd.DataFrame,
    truth: pd.Series,
    jitter: float = 0.08,
    random_state: int = 0,
) -> go.Figure:
    """Scatter of estimate (y) against the true value (x) on the items that have both.

    ``estimates``: a Series (one method) or a DataFrame instance x method (one trace per
    method, toggled in the legend). Discrete truth gets a little horizontal jitter.
    """
    est = estimates.to_frame("estimate") if isinstance(estimates, pd.Series) else estimates
    t = truth.copy()
    t.index = t.index.astype(str)
    est = est.copy()
    est.index = est.index.astype(str)
    common = est.index.intersection(t.index, sort=False)
    rng = np.random.default_rng(random_state)
    x = t.loc[common].to_numpy(dtype=float)
    xj = x + rng.uniform(-jitter, jitter, x.size) if jitter else x
    fig = go.Figure()
    for i, col in enumerate(est.columns):
        fig.add_trace(
            go.Scatter(
                x=xj,
                y=est.loc[common, col].to_numpy(dtype=float),
                mode="markers",
                name=str(col),
                text=np.asarray(common, dtype=str),
                marker={"size": 5, "opacity": 0.6},
                visible=True if i == 0 or len(est.columns) <= 3 else "legendonly",
                hovertemplate="%{text}<br>truth %{x:.2f}<br>estimate %{y:.3f}<extra>"
                + str(col)
                + "</extra>",
            )
        )
    if x.size:
        lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                name="estimate = truth",
                line={"dash": "dot", "color": "#555"},
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(title="truth" + (" (jittered)" if jitter else ""))
    fig.update_yaxes(title="estimate")
    return _layout(fig, f"Estimate vs truth ({len(common)} items)")


def metric_bars(table: pd.DataFrame) -> go.Figure:
    """MSE / correlation / NDCG per method side by side (``table``: method + metric columns)."""
    _need(table, ["method"], "the metric bars")
    metrics = [m for m in METRIC_LABELS if m in table.columns]
    fig = make_subplots(
        rows=1, cols=max(len(metrics), 1), subplot_titles=[METRIC_LABELS[m] for m in metrics]
    )
    for j, m in enumerate(metrics, 1):
        vals = table[m].to_numpy(dtype=float)
        fig.add_trace(
            go.Bar(
                x=table["method"].astype(str),
                y=vals,
                name=m,
                text=[f"{v:.3f}" for v in vals],
                textposition="outside",
                hovertemplate="%{x}: %{y:.4f}<extra>" + m + "</extra>",
            ),
            row=1,
            col=j,
        )
    return _layout(fig, "Methods compared on the gold items", showlegend=False)


def spam_curves(results: pd.DataFrame) -> go.Figure:
    """The spam experiment: each metric against the number of added spammers, one line per method.

    ``results``: long table with columns spam_level, method and metric columns.
    """
    _need(results, ["spam_level", "method"], "the spam curves")
    metrics = [m for m in METRIC_LABELS if m in results.columns]
    fig = make_subplots(
        rows=1, cols=max(len(metrics), 1), subplot_titles=[METRIC_LABELS[m] for m in metrics]
    )
    palette = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    ]  # fmt: skip
    for i, (method, grp) in enumerate(results.groupby("method", sort=False)):
        g = grp.groupby("spam_level", sort=True)[metrics].mean()
        for j, m in enumerate(metrics, 1):
            fig.add_trace(
                go.Scatter(
                    x=g.index.to_numpy(),
                    y=g[m].to_numpy(dtype=float),
                    mode="lines+markers",
                    name=str(method),
                    legendgroup=str(method),
                    showlegend=j == 1,
                    line={"color": palette[i % len(palette)]},
                    hovertemplate=f"{method}<br>spam level %{{x}}<br>{m} %{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=j,
            )
        fig.update_xaxes(title="spam level")
    return _layout(fig, "Spam experiment: quality as spammers are added")


def simulator_truth_vs_estimate(
    truth: pd.Series, estimates: pd.Series, sd: pd.Series | None = None
) -> go.Figure:
    """Simulated true z (x) vs the estimate (y), with 95% error bars when ``sd`` is given."""
    t = truth.astype(float)
    e = estimates.reindex(t.index).astype(float)
    err = None
    if sd is not None:
        err = {"type": "data", "array": Z95 * sd.reindex(t.index).to_numpy(dtype=float)}
    fig = go.Figure(
        go.Scatter(
            x=t.to_numpy(),
            y=e.to_numpy(),
            mode="markers",
            name="item",
            text=t.index.astype(str),
            error_y=err,
            marker={"size": 5, "opacity": 0.7},
            hovertemplate="%{text}<br>true z %{x:.3f}<br>estimate %{y:.3f}<extra></extra>",
        )
    )
    if len(t):
        lo, hi = float(t.min()), float(t.max())
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                name="estimate = truth",
                line={"dash": "dot", "color": "#555"},
                hoverinfo="skip",
            )
        )
    ok = e.notna().to_numpy()
    r = float(np.corrcoef(t.to_numpy()[ok], e.to_numpy()[ok])[0, 1]) if ok.sum() > 1 else np.nan
    fig.update_xaxes(title="true value z (simulated)")
    fig.update_yaxes(title="estimate")
    return _layout(fig, f"Truth vs estimate (correlation {r:.3f})")


def spammers_true_vs_estimated(
    spammers: pd.Series, spam_share: pd.Series, threshold: float = 0.5
) -> go.Figure:
    """Estimated spam share per annotator, split by whether the simulation made them a spammer."""
    share = spam_share.reindex(spammers.index).astype(float)
    truth = spammers.astype(bool)
    fig = go.Figure()
    for flag, label, color in ((False, "honest", "#1f77b4"), (True, "spammer", _WINNER)):
        s = share[truth == flag]
        fig.add_trace(
            go.Box(
                x=[f"true {label}"] * len(s),
                y=s.to_numpy(),
                name=f"true {label} ({len(s)})",
                boxpoints="all",
                jitter=0.5,
                pointpos=0,
                marker={"color": color},
                text=s.index.astype(str),
                hovertemplate="%{text}<br>spam share %{y:.3f}<extra></extra>",
            )
        )
    fig.add_hline(
        y=threshold, line_dash="dash", line_color="#333", annotation_text=f"flag at {threshold:g}"
    )
    fig.update_yaxes(title="estimated spam share", range=[-0.05, 1.05])
    return _layout(fig, "True vs estimated spammers")
