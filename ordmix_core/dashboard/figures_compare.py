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
    "mse": "MSE (lower is better)",
    "correlation": "Correlation",
    "ndcg": "NDCG",
    "label_error": "Label error (lower is better)",
    "calibration_error": "Calibration error (lower is better)",
    "log_loss": "Log loss of the gold level (lower is better)",
}


def metric_bars(table: pd.DataFrame) -> go.Figure:
    """MSE / correlation / NDCG per method side by side (``table``: method + metric columns).

    The best method of each metric (:func:`report.best_methods`) is drawn red, the rest grey.
    """
    _need(table, ["method"], "the metric bars")
    metrics = [m for m in METRIC_LABELS if m in table.columns]
    best = best_methods(table)
    fig = make_subplots(
        rows=1, cols=max(len(metrics), 1), subplot_titles=[METRIC_LABELS[m] for m in metrics]
    )
    names = table["method"].astype(str)
    for j, m in enumerate(metrics, 1):
        vals = table[m].to_numpy(dtype=float)
        top = names.isin(best.get(m, [])).to_numpy()
        fig.add_trace(
            go.Bar(
                x=names,
                y=vals,
                name=m,
                text=[f"{v:.3f}" for v in vals],
                textposition="outside",
                marker={"color": np.where(top, _WINNER, _OTHER).tolist()},
                hovertemplate="%{x}: %{y:.4f}<extra>" + m + "</extra>",
            ),
            row=1,
            col=j,
        )
    return _layout(fig, "Methods compared on the gold items (best in red)", showlegend=False)


def spam_curves(results: pd.DataFrame) -> go.Figure:
    """The spam experiment: each metric against the number of added spammers, one line per method.

    ``results``: long table with columns spam_level, method and metric columns.
    """
    _need(results, ["spam_level", "method"], "the spam curves")
    metrics = [m for m in METRIC_LABELS if m in results.columns]
    fig = make_subplots(
        rows=1, cols=max(len(metrics), 1), subplot_titles=[METRIC_LABELS[m] for m in metrics]
    )
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
                    line={"color": _LINES[i % len(_LINES)]},
                    hovertemplate=f"{method}<br>spam level %{{x}}<br>{m} %{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=j,
            )
    levels = results["spam_level"].to_numpy(dtype=float)
    span = float(levels.max() - levels.min()) if levels.size else 0.0
    # whole numbers only: a level is a count of added random ratings per item
    fig.update_xaxes(
        title="spam level (random ratings added per item)",
        tickmode="linear",
        tick0=0,
        dtick=max(1, int(np.ceil(span / 10))),
        tickformat="d",
    )
    return _layout(fig, "Spam experiment: quality as spammers are added")
