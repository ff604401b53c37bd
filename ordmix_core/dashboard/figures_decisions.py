"""Plotly figures of the decisions (``decisions.py``): flags with their evidence, level odds.

Pure functions from the decision frames to figures; no streamlit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..results.decisions import ANNOTATOR_FLAGS
from ..results.explanations import level_text

FLAG_COLORS = {
    "unreliable": "#d62728",
    "ok": "#2ca02c",
    "undetermined": "#9aa5b1",
    "confident": "#2ca02c",
    "uncertain": "#ff7f0e",
}
_TEMPLATE = "plotly_white"


def _need(df: pd.DataFrame, cols: list[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {', '.join(missing)}")


def annotator_evidence(annotators: pd.DataFrame) -> go.Figure:
    """P(unreliable) against the number of ratings (log axis), one marker per annotator.

    ``annotators``: ``annotators_`` joined with ``reliability.annotator_flags`` (index annotator;
    columns n_ratings, reliability, flag, p_unreliable, reliability_lower, reliability_upper,
    flag_confidence). The band between the two confidence lines is "undetermined": few
    ratings keep an annotator there whatever their point estimate. Hover shows the evidence.
    """
    need = ["n_ratings", "reliability", "flag", "p_unreliable", "reliability_lower",
            "reliability_upper", "flag_confidence"]  # fmt: skip
    _need(annotators, need, "the evidence plot")
    a = annotators
    conf = float(a["flag_confidence"].iloc[0]) if len(a) else 0.9
    fig = go.Figure()
    fig.add_hrect(y0=1 - conf, y1=conf, fillcolor="#9aa5b1", opacity=0.12, line_width=0)
    for flag in ANNOTATOR_FLAGS:
        sub = a[a["flag"] == flag]
        if sub.empty:
            continue
        custom = np.column_stack(
            [
                sub.index.astype(str),
                sub["reliability_lower"].to_numpy(float),
                sub["reliability_upper"].to_numpy(float),
                sub["reliability"].to_numpy(float),
            ]
        )
        fig.add_trace(
            go.Scatter(
                x=sub["n_ratings"],
                y=sub["p_unreliable"],
                mode="markers",
                name=f"{flag} ({len(sub):,})",
                marker={"color": FLAG_COLORS[flag], "size": 7, "opacity": 0.7},
                customdata=custom,
                hovertemplate="%{customdata[0]}<br>%{x} ratings<br>P(unreliable) %{y:.3f}"
                "<br>reliability %{customdata[1]:.2f} to %{customdata[2]:.2f}"
                "<br>fit's point estimate %{customdata[3]:.3g}<extra></extra>",
            )
        )
    for y in (conf, 1 - conf):
        fig.add_hline(y=y, line_dash="dot", line_color="#555")
    fig.update_layout(
        title="Annotator flags and their evidence",
        template=_TEMPLATE,
        xaxis={"title": "ratings given (log scale)", "type": "log"},
        yaxis={"title": "P(reliability below the threshold)", "range": [-0.03, 1.03]},
        legend={"title": "flag"},
        margin={"t": 60, "l": 60, "r": 20},
    )
    return fig


def item_level_probabilities(items: pd.DataFrame, max_items: int = 40) -> go.Figure:
    """Stacked bars of each item's level probabilities (the first ``max_items`` rows).

    ``items``: index instance; the ``p_level_<v>`` columns of ``decisions.item_decisions``
    and its ``flag``. One horizontal bar per item, one segment per level, so a confident
    label is one long segment and an undetermined item is split across the scale.
    """
    cols = [c for c in items.columns if c.startswith("p_level_")]
    if not cols:
        raise ValueError("the level plot needs the p_level_<value> columns")
    _need(items, ["flag"], "the level plot")
    sub = items.head(max_items).iloc[::-1]  # first row on top
    names = [f"{i} ({f})" for i, f in zip(sub.index.astype(str), sub["flag"], strict=True)]
    fig = go.Figure()
    colors = _level_colors(len(cols))
    for col, color in zip(cols, colors, strict=True):
        fig.add_trace(
            go.Bar(
                x=sub[col],
                y=names,
                orientation="h",
                name=col.removeprefix("p_level_"),
                marker_color=color,
                hovertemplate="%{y}<br>P(level " + col.removeprefix("p_level_") + ") %{x:.3f}"
                "<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Probability of each level",
        template=_TEMPLATE,
        xaxis={"title": "probability", "range": [0, 1]},
        legend={"title": "level", "traceorder": "normal"},
        height=max(300, 22 * len(sub) + 120),
        margin={"t": 60, "l": 60, "r": 20},
    )
    return fig


def _level_colors(k: int) -> list[str]:
    """k colours from low (blue) to high (red) levels."""
    import plotly.colors as pc

    if k == 1:
        return ["#1f77b4"]
    return pc.sample_colorscale("RdYlBu_r", [i / (k - 1) for i in range(k)])


def _shares(ratings: pd.Series | np.ndarray, levels: list) -> tuple[np.ndarray, int]:
    """Share of ``ratings`` at each level (values, or a named scale's names), and their
    number."""
    numbers = all(isinstance(v, (int, float, np.integer, np.floating)) for v in levels)
    r = np.asarray(ratings, dtype=float if numbers else object)
    counts = np.array([(r == v).sum() for v in levels], dtype=float)
    return counts / max(r.size, 1), int(r.size)


def _grouped_levels(bars: list[tuple[str, np.ndarray, list[str], str]], levels, title: str):
    fig = go.Figure()
    names = [level_text(v) for v in levels]
    for name, y, text, color in bars:
        fig.add_trace(
            go.Bar(
                x=names,
                y=y,
                name=name,
                text=text,
                textposition="outside",
                marker_color=color,
                hovertemplate="level %{x}<br>" + name + " %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        title=title,
        template=_TEMPLATE,
        xaxis={"title": "level", "type": "category"},
        yaxis={"title": "share", "range": [0, 1.12]},
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 60, "l": 60, "r": 20},
    )
    return fig


def rating_histogram(
    own: pd.Series | np.ndarray, crowd: pd.Series | np.ndarray, levels: list[float], who: str
) -> go.Figure:
    """One annotator's ratings against the crowd's: the share of each level, side by side.

    ``own``: the annotator's ratings; ``crowd``: all ratings (or the other annotators');
    ``levels``: the scale's values; ``who``: the annotator's name, for the legend. A spammer
    who answers one level shows as one tall bar where the crowd spreads over the scale.
    """
    mine, n_own = _shares(own, levels)
    theirs, n_crowd = _shares(crowd, levels)
    counts = [str(int(round(s * n_own))) for s in mine]
    return _grouped_levels(
        [
            (f"{who} ({n_own:,} ratings)", mine, counts, FLAG_COLORS["unreliable"]),
            (f"the crowd ({n_crowd:,} ratings)", theirs, [""] * len(levels), "#9aa5b1"),
        ],
        levels,
        f"Ratings of {who} against the crowd's",
    )


def item_ratings_and_levels(
    ratings: pd.Series | np.ndarray, level_probabilities: np.ndarray, levels: list[float], item: str
) -> go.Figure:
    """One item's ratings (share of each level, counts on the bars) next to the probability
    of each level the fit gives it, so the label can be read off its evidence."""
    shares, n = _shares(ratings, levels)
    p = np.asarray(level_probabilities, dtype=float)
    if p.size != len(levels):
        raise ValueError("one level probability per level is needed")
    counts = [str(int(round(s * n))) for s in shares]
    return _grouped_levels(
        [
            (f"its ratings ({n:,})", shares, counts, "#1f77b4"),
            ("P(level) from the fit", p, [f"{x:.2f}" for x in p], "#ff7f0e"),
        ],
        levels,
        f"Item {item}: its ratings and its level probabilities",
    )


def level_chart_items(items: pd.DataFrame, n: int = 40) -> pd.DataFrame:
    """The ``n`` items worth drawing in the level chart: the least certain first (``p_wrong``
    descending, then instance), so the chart does not open on rows that are all one level
    with probability 1. ``items``: index instance, ``p_wrong`` and ``p_level_<v>`` columns."""
    _need(items, ["p_wrong"], "the level chart's items")
    order = items.assign(_i=items.index.astype(str)).sort_values(
        ["p_wrong", "_i"], ascending=[False, True], kind="stable"
    )
    return order.drop(columns="_i").head(n)
