"""Plotly figures for the dashboard and notebooks: pure functions from results to figures.

Every function takes plain pandas objects (the engine's ``items_``, ``annotators_``,
``trace_`` ... or the comparison tables) and returns a :class:`plotly.graph_objects.Figure`.
No streamlit here: ``fig.show()`` works the same in a notebook.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

#: z value of a two-sided 95% normal interval
Z95 = 1.959963984540054
_WINNER = "#d62728"
#: one colour per method (plotly's default sequence)
_LINES = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
]  # fmt: skip
#: Dark24's reds and red-browns, which would pass for the chosen restart's red
_NEAR_WINNER = {"#FB0D0D", "#EB663B", "#862A16", "#AF0038"}
#: one colour per restart, 20 distinct (plotly's Dark24 without those): red is the chosen one's
_PALETTE = [c for c in qualitative.Dark24 if c not in _NEAR_WINNER]
_OTHER = "#9aa5b1"
#: how each stage of a restart's bound trace is drawn (the mixture, or the model without
#: spam: solid)
_STAGE_DASH = {"nospam": "dash", "uniform": "dot"}
_TEMPLATE = "plotly_white"


def _layout(fig: go.Figure, title: str, **kw: object) -> go.Figure:
    fig.update_layout(title=title, template=_TEMPLATE, margin={"t": 60, "l": 60, "r": 20}, **kw)
    return fig


def _identity_line(fig: go.Figure, truth: np.ndarray) -> None:
    """The dotted ``estimate = truth`` diagonal over the range of ``truth`` (if any)."""
    if not truth.size:
        return
    lo, hi = float(np.nanmin(truth)), float(np.nanmax(truth))
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


def _need(df: pd.DataFrame, cols: list[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {', '.join(missing)}")


#: how each annotator flag is drawn: legend name and marker symbol (others: the flag itself)
FLAG_STYLE = {
    "ok": ("annotator", "circle"),
    "spammer": ("flagged as spammer", "x"),
    "unreliable": ("unreliable", "x"),
    "undetermined": ("undetermined: too few ratings, or near the threshold", "circle-open"),
}


def spread_overlaps(
    x: np.ndarray, y: np.ndarray, x_span: float, y_span: float, grid: float = 0.02
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spread points that share one spot into a small disc whose area grows with their number.

    Points in the same cell of a ``grid`` (as a share of each axis' span) are laid out on a
    sunflower spiral around their mean, radius ``0.004 * sqrt(n)`` of the span (at most 0.06);
    deterministic, so a rerun draws the same picture. Returns new x, new y and, per point, its
    cell and how many points shared it.
    """
    n = x.size
    if n == 0:
        return x.copy(), y.copy(), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    cx = np.floor((x - x.min()) / (grid * x_span)).astype(np.int64)
    cy = np.floor((y - y.min()) / (grid * y_span)).astype(np.int64)
    _, cell, counts = np.unique(cx * (cy.max() + 1) + cy, return_inverse=True, return_counts=True)
    cell = cell.reshape(-1)
    nx, ny, size = x.astype(float).copy(), y.astype(float).copy(), counts[cell]
    golden = np.pi * (3.0 - np.sqrt(5.0))
    for c in np.flatnonzero(counts > 1):
        idx = np.flatnonzero(cell == c)
        k = np.arange(idx.size)
        radius = min(0.004 * np.sqrt(idx.size), 0.06) * np.sqrt((k + 0.5) / idx.size)
        nx[idx] = x[idx].mean() + radius * x_span * np.cos(k * golden)
        ny[idx] = y[idx].mean() + radius * y_span * np.sin(k * golden)
    return nx, ny, cell, size


def _label_crowded_spots(
    fig: go.Figure,
    ex: np.ndarray,
    reliability: np.ndarray,
    cell: np.ndarray,
    shared: np.ndarray,
    x_span: float,
) -> None:
    """Say how many annotators sit on each crowded spot of ``annotator_scatter`` (the disc
    alone does not give the number); neighbouring crowded cells count as one spot."""
    spots: list[list[float]] = []  # x, y (axis units), count
    crowded = np.unique(cell[shared >= max(10, 0.05 * len(ex))])
    for c in sorted(crowded, key=lambda c: -int((cell == c).sum())):
        idx = np.flatnonzero(cell == c)
        sx, sy = float(ex[idx].mean()), float(reliability[idx].mean())
        near = [p for p in spots if abs(p[0] - sx) < 0.15 * x_span and abs(p[1] - sy) < 0.1]
        if near:
            near[0][2] += idx.size
        else:
            spots.append([sx, sy, idx.size])
    for sx, sy, count in spots:
        fig.add_annotation(
            x=sx,
            y=sy,
            text=f"{int(count):,} annotators here",
            showarrow=True,
            arrowcolor="#333",
            ax=0,
            ay=-45 if sy < 0.5 else 45,
            font={"color": "#333"},
            bgcolor="rgba(255,255,255,0.8)",
        )


def annotator_scatter(
    annotators: pd.DataFrame, threshold: float | None = None, log_x: bool = True
) -> go.Figure:
    """Expertise (x, log scale like the histogram) vs reliability (y), coloured by spam share.

    ``annotators``: the engine's ``annotators_`` (index annotator; columns n_ratings,
    expertise, reliability, spam_share), optionally with a ``flag`` column (one trace per
    flag, :data:`FLAG_STYLE`); without it, ``spam_share >= threshold`` is "flagged as
    spammer". Annotators that sit on one spot (often many with a handful of ratings at the
    prior) are spread into a disc sized by their number (:func:`spread_overlaps`); hover shows
    each annotator's own values.
    """
    _need(annotators, ["n_ratings", "expertise", "reliability", "spam_share"], "the scatter")
    a = annotators
    names = a.index.astype(str).to_numpy()
    n = a["n_ratings"].to_numpy(dtype=float)
    size = 6.0 + 14.0 * np.sqrt(n / max(float(n.max()), 1.0)) if len(n) else n
    if "flag" in a.columns:
        flag = a["flag"].astype(str).to_numpy()
    elif threshold is not None:
        flag = np.where(a["spam_share"].to_numpy() >= threshold, "spammer", "ok")
    else:
        flag = np.full(len(a), "ok")
    expertise = a["expertise"].to_numpy(dtype=float)
    reliability = a["reliability"].to_numpy(dtype=float)
    ex = np.log10(np.maximum(expertise, 1e-12)) if log_x else expertise
    x_span = max(float(np.ptp(ex)) if ex.size else 0.0, 1e-9)
    px, py, cell, shared = spread_overlaps(ex, reliability, x_span, 1.0)
    if log_x:
        px = 10.0**px
    custom = np.empty((len(a), 6), dtype=object)
    custom[:, 0] = names
    custom[:, 1] = a["n_ratings"].to_numpy()
    custom[:, 2] = a["spam_share"].to_numpy(dtype=float)
    custom[:, 3] = expertise
    custom[:, 4] = reliability
    custom[:, 5] = shared
    fig = go.Figure()
    order = [f for f in FLAG_STYLE if f in set(flag)] + sorted(set(flag) - set(FLAG_STYLE))
    for value in order:
        mask = flag == value
        label, symbol = FLAG_STYLE.get(value, (value, "diamond"))
        fig.add_trace(
            go.Scatter(
                x=px[mask],
                y=py[mask],
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
                    "expertise: %{customdata[3]:.3g}<br>reliability: %{customdata[4]:.3f}<br>"
                    "spam share: %{customdata[2]:.3f}<br>"
                    "annotators at this spot: %{customdata[5]}<extra></extra>"
                ),
            )
        )
    _label_crowded_spots(fig, ex, reliability, cell, shared, x_span)
    fig.update_xaxes(title="expertise E[tau] (precision of honest ratings)")
    if log_x:
        fig.update_xaxes(type="log")
    fig.update_yaxes(
        title="reliability (share of ratings giving the item's level)", range=[-0.1, 1.1]
    )
    return _layout(
        fig,
        "Annotators: expertise vs reliability",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
    )


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


def _named_axis(fig: go.Figure, axis: str, values: list[float], names: list[str] | None) -> None:
    """Ticks at the levels' values, labelled with their names (a scale of named levels)."""
    if names is not None:
        fig.update_layout({axis: {"tickmode": "array", "tickvals": list(values),
                                  "ticktext": list(names)}})  # fmt: skip


def estimate_distribution(
    items: pd.DataFrame, scale: list[float] | None = None, level_names: list[str] | None = None
) -> go.Figure:
    """Histogram of the posterior means, with the scale levels as vertical lines (ticked with
    their ``level_names``, for a scale of named levels: the means are on their positions).

    With a ``flag`` column (``decisions.item_decisions``) the bars are stacked by flag, so the
    undetermined items, which sit at the prior's mean, show as what they are.
    """
    _need(items, ["estimate"], "the distribution")
    x = items["estimate"].to_numpy(dtype=float)
    if "flag" in items.columns:
        fig = go.Figure()
        flags = items["flag"].astype(str).to_numpy()
        bins = {"start": float(x.min()), "end": float(x.max()) + 1e-9,
                "size": max(float(np.ptp(x)) / 50, 1e-6)} if x.size else None  # fmt: skip
        for flag in [f for f in ITEM_FLAG_NAMES if f in set(flags)]:
            fig.add_trace(go.Histogram(x=x[flags == flag], xbins=bins, name=ITEM_FLAG_NAMES[flag]))
        fig.update_layout(barmode="stack")
    else:
        fig = go.Figure(go.Histogram(x=x, nbinsx=50))
    for v in scale or []:
        fig.add_vline(x=float(v), line_dash="dot", line_color="#888")
    fig.update_xaxes(title="estimate (posterior mean of z)")
    fig.update_yaxes(title="items")
    _named_axis(fig, "xaxis", scale or [], level_names)
    return _layout(fig, "Distribution of the estimates", showlegend="flag" in items.columns)


#: legend names of the item flags (``decisions.ITEM_FLAGS``)
ITEM_FLAG_NAMES = {
    "confident": "confident",
    "uncertain": "uncertain",
    "undetermined": "undetermined (too little evidence, or a tie)",
}


def item_intervals(
    items: pd.DataFrame,
    gold: pd.Series | None = None,
    bounds: tuple[str, str] | None = None,
    level_names: list[str] | None = None,
) -> go.Figure:
    """Estimates of some items with intervals, sorted, with gold where known.

    ``bounds``: the names of two columns holding each item's credible interval (e.g.
    ``decisions.interval_columns()``: the levels around its label), drawn as a bar of their
    own beside the estimate, which need not lie inside it; without them, 95% intervals
    (+-1.96 sd) of the Gaussian q(z), which can reach beyond the scale. ``level_names``: a
    scale of named levels, lowest first: the bounds are names, drawn at their positions 1..K,
    and the axis is ticked with the names.
    """
    _need(items, ["estimate", "sd", *(bounds or ())], "the interval plot")
    it = items.sort_values("estimate")
    names = it.index.astype(str).to_numpy()
    est = it["estimate"].to_numpy(dtype=float)
    fig = go.Figure()
    if bounds is None:
        error = {"type": "data", "array": Z95 * it["sd"].to_numpy(dtype=float)}
        name = "estimate, 95% interval"
        label = "95% intervals"
    else:
        where = None if level_names is None else {n: i + 1.0 for i, n in enumerate(level_names)}
        lo, hi = (
            it[c].to_numpy(dtype=float) if where is None else it[c].map(where).to_numpy(float)
            for c in bounds
        )
        ends = np.column_stack([it[c].astype(str).to_numpy() for c in bounds])
        fig.add_trace(
            go.Bar(
                x=names,
                y=hi - lo,
                base=lo,
                name=f"label's {bounds[0].removeprefix('lower_')}% levels",
                marker_color="rgba(31, 119, 180, 0.25)",
                width=0.5,
                customdata=ends if level_names is not None else hi,
                hovertemplate="%{x}<br>levels %{customdata[0]} to %{customdata[1]}<extra></extra>"
                if level_names is not None
                else "%{x}<br>levels %{base:g} to %{customdata:g}<extra></extra>",
            )
        )
        error, name = None, "estimate"
        label = "the levels around their labels"
    fig.add_trace(
        go.Scatter(
            x=names,
            y=est,
            mode="markers",
            name=name,
            error_y=error,
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
    if level_names is not None:
        _named_axis(fig, "yaxis", [i + 1.0 for i in range(len(level_names))], level_names)
    return _layout(fig, f"{len(it)} item(s): estimates and {label}")


def bound_traces(
    trace: pd.DataFrame, best_restart: int | None = None, restarts: pd.DataFrame | None = None
) -> go.Figure:
    """The lower bound per iteration for every restart; the chosen restart drawn thick and red.

    ``trace``: the engine's ``trace_`` (restart, stage, iteration, lower_bound). One legend
    entry and one unbroken line per restart, its stages in order on the x axis: the warm-up
    (``nospam``) dashed, the mixture with the spam distribution held uniform (``uniform``)
    dotted, the mixture solid; each stage's segment starts at the previous stage's last point.
    ``restarts``: the engine's ``restarts_``; collapsed restarts get "(collapsed)" in the legend.
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
        color = _WINNER if win else _PALETTE[r % len(_PALETTE)]
        stages = grp["stage"].to_numpy()
        bound = grp["lower_bound"].to_numpy(dtype=float)
        starts = np.flatnonzero(np.r_[True, stages[1:] != stages[:-1]])  # each stage's first
        for i, (lo, hi) in enumerate(zip(starts, np.r_[starts[1:], len(grp)], strict=True)):
            stage = stages[lo]
            idx = np.arange(max(lo - 1, 0), hi)  # from the previous stage's last point on
            fig.add_trace(
                go.Scatter(
                    x=step[idx],
                    y=bound[idx],
                    customdata=stages[idx],
                    mode="lines",
                    name=label,
                    legendgroup=f"r{r}",
                    showlegend=i == 0,
                    line={
                        "width": 3.5 if win else 1.3,
                        "color": color,
                        "dash": _STAGE_DASH.get(stage, "solid"),
                    },
                    opacity=1.0 if win or best_restart is None else 0.7,
                    hovertemplate=(
                        f"restart {r} (%{{customdata}})<br>step %{{x}}<br>"
                        "bound %{y:,.2f}<extra></extra>"
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
    fig.update_xaxes(
        title="iteration (dashed: no-spam warm-up; dotted: uniform spam; solid: mixture)"
    )
    fig.update_yaxes(title="variational lower bound F")
    return _layout(fig, "Lower bound per iteration, every restart", legend={"title": "restart"})


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
    _identity_line(fig, x)
    fig.update_xaxes(title="truth" + (" (jittered)" if jitter else ""))
    fig.update_yaxes(title="estimate")
    return _layout(fig, f"Estimate vs truth ({len(common)} items)")
