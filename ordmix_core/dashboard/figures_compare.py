"""The Compare page's figures: each method's scores side by side, and the spam experiment's
curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figures import _LINES, _OTHER, _WINNER, _layout, _need
from .report import best_methods

METRIC_LABELS = {
    "mse": "MSE<br>(lower is better)",
    "correlation": "Correlation",
    "ndcg": "NDCG",
    "label_error": "Label error<br>(lower is better)",
    "calibration_error": "Calibration error<br>(lower is better)",
    "p_wrong_auroc": "AUROC of p_wrong for the<br>wrong labels (higher is better)",
    "log_loss": "Log loss of the gold level<br>(lower is better)",
}
#: subplots per row: six titles side by side overlap, and a method's name under each bar
#: needs the width
PER_ROW = 3
#: the figure's title at the top of the figure, and the room (px) above the top row of plots:
#: the title's line, then the subplot titles' lines (two at most, ``METRIC_LABELS``), so that
#: neither sits on the other
TITLE = {"y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": 12}}
TOP_MARGIN = 120


def _grid(metrics: list[str]) -> go.Figure:
    """Subplots for ``metrics``, ``PER_ROW`` a row, each titled by ``METRIC_LABELS``, the
    figure as tall as its rows need."""
    n = max(len(metrics), 1)
    rows, cols = -(-n // PER_ROW), min(n, PER_ROW)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[METRIC_LABELS[m] for m in metrics],
        vertical_spacing=0.3 if rows > 1 else 0.2,
    )
    return fig.update_layout(height=380 * rows)


def _cell(j: int) -> dict[str, int]:
    """The row and column of the ``j``-th subplot (0-based) of ``_grid``."""
    return {"row": j // PER_ROW + 1, "col": j % PER_ROW + 1}


def metric_bars(table: pd.DataFrame) -> go.Figure:
    """Each metric per method (``table``: method + metric columns), ``PER_ROW`` metrics a row.

    The best method of each metric (:func:`report.best_methods`) is drawn red, the rest grey;
    a method without a value (no level probabilities for a calibration) gets no bar and no
    number.
    """
    _need(table, ["method"], "the metric bars")
    metrics = [m for m in METRIC_LABELS if m in table.columns]
    best = best_methods(table)
    fig = _grid(metrics)
    names = table["method"].astype(str)
    for j, m in enumerate(metrics):
        vals = pd.to_numeric(table[m], errors="coerce").to_numpy(dtype=float)  # None: no value
        top = names.isin(best.get(m, [])).to_numpy()
        fig.add_trace(
            go.Bar(
                x=names,
                y=vals,
                name=m,
                text=[f"{v:.3f}" if np.isfinite(v) else "" for v in vals],
                textposition="outside",
                marker={"color": np.where(top, _WINNER, _OTHER).tolist()},
                hovertemplate="%{x}: %{y:.4f}<extra>" + m + "</extra>",
            ),
            **_cell(j),
        )
    fig.update_xaxes(tickangle=-45, automargin=True)
    return _titled(
        _layout(fig, "Methods compared on the gold items (best in red)", showlegend=False)
    )


def _titled(fig: go.Figure) -> go.Figure:
    """The grid's title at the top and the subplot titles below it (``TITLE``, ``TOP_MARGIN``)."""
    return fig.update_layout(title=TITLE, margin={"t": TOP_MARGIN})


def spam_curves(results: pd.DataFrame) -> go.Figure:
    """The spam experiment: each metric against the number of added spammers, one line per method.

    ``results``: long table with columns spam_level, method and metric columns.
    """
    _need(results, ["spam_level", "method"], "the spam curves")
    metrics = [m for m in METRIC_LABELS if m in results.columns]
    fig = _grid(metrics)
    # a metric a method has no value for (None: no level probabilities) is NaN, drawn as a gap
    results = results.assign(**{m: pd.to_numeric(results[m], errors="coerce") for m in metrics})
    for i, (method, grp) in enumerate(results.groupby("method", sort=False)):
        g = grp.groupby("spam_level", sort=True)[metrics].mean()
        for j, m in enumerate(metrics):
            fig.add_trace(
                go.Scatter(
                    x=g.index.to_numpy(),
                    y=g[m].to_numpy(dtype=float),
                    mode="lines+markers",
                    name=str(method),
                    legendgroup=str(method),
                    showlegend=j == 1,
                    line={"color": _LINES[i % len(_LINES)]},
                    hovertemplate=f"{method}<br>spam level %{{x}}<br>{m} %{{y:.4f}}<extra></extra>",
                ),
                **_cell(j),
            )
    levels = results["spam_level"].to_numpy(dtype=float)
    span = float(levels.max() - levels.min()) if levels.size else 0.0
    # whole numbers only: a level is a count of added random ratings per item
    fig.update_xaxes(
        title="random ratings added per item",
        tickmode="linear",
        tick0=0,
        dtick=max(1, int(np.ceil(span / 10))),
        tickformat="d",
    )
    return _titled(_layout(fig, "Spam experiment: quality as spammers are added"))
