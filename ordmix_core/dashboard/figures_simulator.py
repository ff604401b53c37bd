"""The Simulator's figures: how one rating is made (the ordinal probit), the truth against the
model's estimate and the plain mean, the spammers simulated against those flagged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .figures import _WINNER, Z95, _identity_line, _layout


def simulator_truth_vs_estimate(
    truth: pd.Series,
    estimates: pd.Series,
    sd: pd.Series | None = None,
    span: tuple[float, float] | None = None,
    plain_mean: pd.Series | None = None,
) -> go.Figure:
    """Simulated true z (x) vs the estimate (y), with 95% error bars when ``sd`` is given.

    ``span``: the scale's range (its outer thresholds); the error bars are clipped to it, as
    the truth cannot leave it. ``plain_mean``: each item's plain average of ratings, drawn as
    a second set of markers for comparison.
    """
    t = truth.astype(float)
    e = estimates.reindex(t.index).astype(float)
    err = None
    if sd is not None:
        half = Z95 * sd.reindex(t.index).to_numpy(dtype=float)
        ev = e.to_numpy()
        lo, hi = ev - half, ev + half
        if span is not None:
            lo, hi = np.clip(lo, *span), np.clip(hi, *span)
        err = {"type": "data", "symmetric": False, "array": hi - ev, "arrayminus": ev - lo}
    fig = go.Figure(
        go.Scatter(
            x=t.to_numpy(),
            y=e.to_numpy(),
            mode="markers",
            name="the model's estimate",
            text=t.index.astype(str),
            error_y=err,
            marker={"size": 5, "opacity": 0.7},
            hovertemplate="%{text}<br>true z %{x:.3f}<br>estimate %{y:.3f}<extra></extra>",
        )
    )
    if plain_mean is not None:
        fig.add_trace(
            go.Scatter(
                x=t.to_numpy(),
                y=plain_mean.reindex(t.index).astype(float).to_numpy(),
                mode="markers",
                name="plain mean of its ratings",
                text=t.index.astype(str),
                marker={"size": 5, "opacity": 0.5, "symbol": "x", "color": "#7f7f7f"},
                hovertemplate="%{text}<br>true z %{x:.3f}<br>plain mean %{y:.3f}<extra></extra>",
            )
        )
    _identity_line(fig, t.to_numpy(dtype=float))
    ok = e.notna().to_numpy()
    r = float(np.corrcoef(t.to_numpy()[ok], e.to_numpy()[ok])[0, 1]) if ok.sum() > 1 else np.nan
    fig.update_xaxes(title="true value z (simulated)")
    fig.update_yaxes(title="estimate")
    return _layout(fig, f"Truth vs estimate (correlation {r:.3f})")


def ordinal_probit(
    z: float, sd: float, thresholds: np.ndarray | list[float], values: np.ndarray | list[float]
) -> go.Figure:
    """How one honest rating is drawn: a normal density around the true value ``z`` (noise
    ``sd``), cut by the scale's ``thresholds`` (K + 1 of them, outer ones the scale's ends);
    the area between two thresholds is the probability of that level (the outer levels take
    the tails beyond the scale's ends too). Returns the figure; the probabilities are in
    each level's trace name."""
    from scipy.special import ndtr

    b = np.asarray(thresholds, dtype=float)
    v = np.asarray(values, dtype=float)
    if b.size != v.size + 1 or sd <= 0:
        raise ValueError("K + 1 thresholds for K values and a positive sd are needed")
    cuts = np.concatenate([[-np.inf], b[1:-1], [np.inf]])
    p = np.diff(ndtr((cuts - z) / sd))
    lo, hi = min(b[0], z - 4 * sd), max(b[-1], z + 4 * sd)
    x = np.linspace(lo, hi, 600)
    dens = np.exp(-0.5 * ((x - z) / sd) ** 2) / (sd * np.sqrt(2 * np.pi))
    colors = _probit_colors(v.size)
    fig = go.Figure()
    for k in range(v.size):
        inside = (x >= cuts[k]) & (x <= cuts[k + 1])
        fig.add_trace(
            go.Scatter(
                x=x[inside],
                y=dens[inside],
                fill="tozeroy",
                mode="lines",
                line={"width": 0.5, "color": colors[k]},
                name=f"rating {v[k]:g}: {p[k]:.1%}",
                hovertemplate=f"rating {v[k]:g}: probability {p[k]:.3f}<extra></extra>",
            )
        )
    for t in b[1:-1]:
        fig.add_vline(x=t, line_dash="dash", line_color="#333")
    fig.add_vline(x=z, line_color="#d62728", annotation_text=f"true value {z:g}")
    fig.update_xaxes(title="the rater's noisy impression x = z + noise", range=[lo, hi])
    fig.update_yaxes(title="density")
    return _layout(fig, "One rating: the noise around the truth, cut by the thresholds")


def _probit_colors(k: int) -> list[str]:
    import plotly.colors as pc

    return (
        ["#1f77b4"] if k == 1 else pc.sample_colorscale("RdYlBu_r", [i / (k - 1) for i in range(k)])
    )


def spammers_true_vs_estimated(
    spammers: pd.Series,
    spam_share: pd.Series,
    threshold: float = 0.5,
    what: str = "estimated spam share",
) -> go.Figure:
    """An estimate per annotator (the spam share, or ``what`` else, e.g. P(unreliable)), split
    by whether the simulation made them a spammer; a dashed line at the flag's ``threshold``."""
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
                hovertemplate="%{text}<br>" + what + " %{y:.3f}<extra></extra>",
            )
        )
    fig.add_hline(
        y=threshold, line_dash="dash", line_color="#333", annotation_text=f"flag at {threshold:g}"
    )
    fig.update_yaxes(title=what, range=[-0.05, 1.05])
    return _layout(fig, "True vs estimated spammers")
