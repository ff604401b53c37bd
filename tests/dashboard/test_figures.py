"""figures: pure functions from results to plotly figures (no streamlit needed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from ordmix_core.dashboard import figures, figures_compare, figures_simulator
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.results import decisions


@pytest.fixture(scope="module")
def fitted():
    crowd = simulate_crowd(n_items=120, n_annotators=15, spammer_share=0.3, random_state=1)
    model = OrdinalMixture("query", n_restarts=3, random_state=0).fit(crowd.ratings)
    return crowd, model


def _arr(x):
    """Trace arrays: plain lists, or plotly's typed-array dicts (bdata) decoded."""
    if isinstance(x, dict) and "bdata" in x:
        import base64

        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
    return np.asarray(x)


def test_importing_figures_does_not_import_streamlit():
    code = "import sys, ordmix_core.dashboard.figures; sys.exit('streamlit' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_annotator_scatter_hover_and_flagged(fitted):
    crowd, m = fitted
    fig = figures.annotator_scatter(m.annotators_, threshold=0.5)
    assert isinstance(fig, go.Figure)
    flagged = m.annotators_.index[m.annotators_["spam_share"] >= 0.5]
    by_name = {t.name: t for t in fig.data}
    assert set(by_name["flagged as spammer"].customdata[:, 0]) == set(flagged)
    assert len(by_name["annotator"].customdata) + len(flagged) == len(m.annotators_)
    assert "customdata[0]" in by_name["annotator"].hovertemplate
    assert fig.layout.xaxis.type == "log"
    # without a threshold nobody is drawn as flagged
    assert [t.name for t in figures.annotator_scatter(m.annotators_).data] == ["annotator"]


def test_annotators_on_one_spot_are_spread_and_counted():
    rng = np.random.default_rng(0)
    n = 50
    ann = pd.DataFrame(
        {
            "n_ratings": np.r_[np.full(n, 3), rng.integers(20, 200, 5)],
            "expertise": np.r_[np.full(n, 1.78), [0.5, 1.0, 5.0, 20.0, 60.0]],
            "reliability": np.r_[np.full(n, 0.0), [1.0, 0.9, 0.8, 0.5, 0.2]],
            "spam_share": np.r_[np.full(n, 1.0), [0.0, 0.1, 0.2, 0.5, 0.8]],
        },
        index=[f"a{i:02d}" for i in range(n + 5)],
    )
    fig = figures.annotator_scatter(ann, threshold=0.5)
    x = np.concatenate([_arr(t.x) for t in fig.data]).astype(float)
    y = np.concatenate([_arr(t.y) for t in fig.data]).astype(float)
    custom = np.concatenate([t.customdata for t in fig.data])
    assert len({(a, b) for a, b in zip(x, y, strict=True)}) == n + 5  # no two on one spot
    pile = custom[:, 0] < f"a{n:02d}"
    # spread in a small disc around the shared spot, on the log axis (log10 of the span)
    span = np.log10(60.0) - np.log10(0.5)
    assert np.abs(np.log10(x[pile]) - np.log10(1.78)).max() <= 0.06 * span + 1e-9
    assert np.abs(y[pile]).max() <= 0.06 + 1e-9 and np.abs(y[pile]).max() > 0.01
    # the lone annotators stay where they are; hover shows everyone's own values
    assert np.allclose(np.sort(x[~pile]), [0.5, 1.0, 5.0, 20.0, 60.0])
    by_name = {row[0]: row for row in custom}
    assert by_name["a00"][3] == 1.78 and by_name["a00"][4] == 0.0 and by_name["a00"][5] == n
    assert "customdata[3]" in fig.data[0].hovertemplate
    assert [a.text for a in fig.layout.annotations] == [f"{n} annotators here"]
    assert fig.layout.xaxis.type == "log"


def test_annotator_scatter_draws_a_flag_column_when_given():
    ann = pd.DataFrame(
        {
            "n_ratings": [3, 50, 80, 4],
            "expertise": [1.0, 2.0, 3.0, 1.5],
            "reliability": [0.5, 0.9, 0.1, 0.6],
            "spam_share": [0.5, 0.1, 0.9, 0.4],
            "flag": ["undetermined", "ok", "unreliable", "undetermined"],
        },
        index=["a", "b", "c", "d"],
    )
    fig = figures.annotator_scatter(ann, threshold=0.0)  # the flag column wins
    names = {t.name: set(t.customdata[:, 0]) for t in fig.data}
    assert names == {
        "annotator": {"b"},
        "unreliable": {"c"},
        "undetermined: too few ratings, or near the threshold": {"a", "d"},
    }


def test_annotator_scatter_needs_the_columns():
    with pytest.raises(ValueError, match="spam_share"):
        figures.annotator_scatter(pd.DataFrame({"expertise": [1.0]}))


def test_distributions(fitted):
    _, m = fitted
    fig = figures.annotator_distributions(m.annotators_)
    assert [t.type for t in fig.data] == ["histogram", "histogram"]
    assert np.allclose(_arr(fig.data[1].x), m.annotators_["spam_share"])
    fig = figures.estimate_distribution(m.items_, [1, 2, 3, 4, 5])
    assert len(fig.layout.shapes) == 5 and len(_arr(fig.data[0].x)) == len(m.items_)


def test_item_intervals_sorted_with_gold(fitted):
    crowd, m = fitted
    sub = m.items_.head(20)
    fig = figures.item_intervals(sub, crowd.gold)
    est = _arr(fig.data[0].y)
    assert np.all(np.diff(est) >= 0)
    assert np.allclose(
        _arr(fig.data[0].error_y.array),
        figures.Z95 * sub.sort_values("estimate")["sd"].to_numpy(),
    )
    assert np.allclose(_arr(fig.data[1].y), crowd.gold.reindex(list(fig.data[0].x)).to_numpy())


def test_bound_traces_mark_the_winner(fitted):
    _, m = fitted
    fig = figures.bound_traces(m.trace_, m.best_restart_, m.restarts_)
    groups = {t.legendgroup for t in fig.data}
    assert groups == {f"r{r}" for r in m.trace_["restart"].unique()}
    wide = {t.legendgroup for t in fig.data if t.line.width > 2}
    assert wide == {f"r{m.best_restart_}"}
    assert fig.layout.annotations[0].text == f"chosen: restart {m.best_restart_}"
    dashed = [t for t in fig.data if t.line.dash == "dash"]
    assert len(dashed) == (m.trace_["stage"] == "nospam").groupby(m.trace_["restart"]).any().sum()
    # every sweep drawn once: a later stage's segment repeats only its predecessor's last point
    points = {(t.legendgroup, float(x)) for t in fig.data for x in _arr(t.x)}
    assert len(points) == len(m.trace_)
    # one legend entry per restart, each restart's stages in one colour
    assert sum(t.showlegend is not False for t in fig.data) == m.trace_["restart"].nunique()
    colours = {}
    for t in fig.data:
        colours.setdefault(t.legendgroup, set()).add(t.line.color)
    assert all(len(c) == 1 for c in colours.values())
    assert len({c.pop() for c in colours.values()}) == len(colours)


def _staged_trace(n_restarts: int, stages=("nospam", "uniform", "mixture")) -> pd.DataFrame:
    """A trace of ``n_restarts`` restarts, each running through ``stages`` (4 sweeps each)."""
    rows = []
    for r in range(n_restarts):
        bound = -1000.0 - 10 * r
        for stage in stages:
            for i in range(1, 5):
                bound += 50.0 / i
                rows.append((r, stage, i, bound))
    return pd.DataFrame(rows, columns=["restart", "stage", "iteration", "lower_bound"])


def test_bound_traces_a_restarts_line_runs_on_across_its_stages(fitted):
    _, m = fitted
    for trace, best in ((_staged_trace(3), 1), (m.trace_, m.best_restart_)):
        fig = figures.bound_traces(trace, best)
        for r, grp in trace.groupby("restart"):
            parts = [t for t in fig.data if t.legendgroup == f"r{r}"]
            assert len(parts) == grp["stage"].nunique()
            for before, after in zip(parts[:-1], parts[1:], strict=True):
                assert _arr(after.x)[0] == _arr(before.x)[-1]
                assert _arr(after.y)[0] == _arr(before.y)[-1]
            # the line's points in order are the restart's sweeps, each once
            xs = np.concatenate([_arr(p.x)[1 if i else 0 :] for i, p in enumerate(parts)])
            ys = np.concatenate([_arr(p.y)[1 if i else 0 :] for i, p in enumerate(parts)])
            assert list(xs) == list(range(1, len(grp) + 1))
            assert np.array_equal(ys, grp["lower_bound"].to_numpy())


def test_bound_traces_draw_each_stage_in_its_own_dash():
    fig = figures.bound_traces(_staged_trace(2), 0)
    for r in (0, 1):  # each restart's segments in stage order: nospam, uniform, mixture
        dashes = [t.line.dash for t in fig.data if t.legendgroup == f"r{r}"]
        assert dashes == ["dash", "dot", "solid"]
    title = fig.layout.xaxis.title.text
    assert "dashed: no-spam warm-up" in title and "dotted: uniform spam" in title
    assert "solid: mixture" in title


def test_bound_traces_give_twenty_restarts_distinct_colours_never_the_chosen_red():
    winner = 7
    fig = figures.bound_traces(_staged_trace(20, stages=("mixture",)), winner)
    colour = {t.legendgroup: t.line.color for t in fig.data}
    assert len(colour) == 20
    red = colour.pop(f"r{winner}")
    others = [c.lower() for c in colour.values()]
    assert len(set(others)) == 19
    assert red.lower() not in others


def test_estimate_vs_truth_and_metric_bars():
    truth = pd.Series([1.0, 2.0, 3.0, 3.0], index=["a", "b", "c", "d"])
    est = pd.DataFrame(
        {"m1": [1.1, 2.0, 2.9, 3.2], "m2": [2.0, 2.0, 2.0, 2.0]}, index=["a", "b", "c", "x"]
    )
    fig = figures.estimate_vs_truth(est, truth, jitter=0)
    assert [t.name for t in fig.data] == ["m1", "m2", "estimate = truth"]
    assert np.allclose(_arr(fig.data[0].x), [1, 2, 3]) and np.allclose(
        _arr(fig.data[0].y), [1.1, 2, 2.9]
    )
    table = pd.DataFrame(
        {"method": ["m1", "m2"], "mse": [0.1, 0.5], "correlation": [0.9, 0.0], "ndcg": [1, 0.8]}
    )
    bars = figures_compare.metric_bars(table)
    assert [t.name for t in bars.data] == ["mse", "correlation", "ndcg"]
    assert list(bars.data[0].text) == ["0.100", "0.500"]
    # the best of each metric in red: lowest MSE, highest correlation and NDCG
    red, grey = figures._WINNER, figures._OTHER
    assert [list(t.marker.color) for t in bars.data] == [[red, grey], [red, grey], [red, grey]]
    # six metrics: two rows of three; a method without level probabilities gets no number
    full = table.assign(label_error=[0.1, 0.2], calibration_error=[None, 0.05], log_loss=[None, 1])
    bars = figures_compare.metric_bars(full)
    assert list(bars.data[4].text) == ["", "0.050"] and np.isnan(_arr(bars.data[4].y)[0])
    assert bars.data[2].xaxis == "x3" and bars.data[3].xaxis == "x4"
    assert bars.layout.xaxis4.domain == bars.layout.xaxis.domain  # the second row's first
    assert bars.layout.yaxis4.domain[1] < bars.layout.yaxis.domain[0]


def test_spam_curves_one_line_per_method_and_metric():
    rows = [
        {
            "spam_level": lvl,
            "method": meth,
            "mse": lvl * k,
            "correlation": 1 - lvl / 10,
            "ndcg": 0.9,
        }
        for lvl in range(3)
        for k, meth in enumerate(["a", "b"], 1)
    ]
    fig = figures_compare.spam_curves(pd.DataFrame(rows))
    assert len(fig.data) == 6
    first = fig.data[0]
    assert (
        first.name == "a" and list(_arr(first.x)) == [0, 1, 2] and list(_arr(first.y)) == [0, 1, 2]
    )
    assert sum(t.showlegend for t in fig.data) == 2
    # spam levels are counts: whole-number ticks only
    for axis in ("xaxis", "xaxis2", "xaxis3"):
        ax = fig.layout[axis]
        assert ax.tickmode == "linear" and ax.tick0 == 0 and ax.dtick == 1, axis
    wide = pd.DataFrame(rows * 1).assign(spam_level=lambda d: d["spam_level"] * 15)
    assert figures_compare.spam_curves(wide).layout.xaxis.dtick == 3  # 0..30: every third level


def test_simulator_figures(fitted):
    crowd, m = fitted
    fig = figures_simulator.simulator_truth_vs_estimate(
        crowd.truth, m.items_["estimate"], m.items_["sd"]
    )
    r = np.corrcoef(crowd.truth, m.items_["estimate"].reindex(crowd.truth.index))[0, 1]
    assert f"correlation {r:.3f}" in fig.layout.title.text
    fig = figures_simulator.spammers_true_vs_estimated(
        crowd.spammers, m.annotators_["spam_share"], 0.4
    )
    assert [t.name.split(" (")[0] for t in fig.data] == ["true honest", "true spammer"]
    assert len(_arr(fig.data[1].y)) == int(crowd.spammers.sum())
    assert fig.layout.shapes[0].y0 == 0.4


def test_item_intervals_with_bounds_draw_the_levels_beside_the_estimate(fitted):
    _, m = fitted
    sub = m.items_.head(20).join(decisions.item_decisions(m))
    lo_col, hi_col = decisions.interval_columns()
    fig = figures.item_intervals(sub, bounds=(lo_col, hi_col))
    bar, est = fig.data
    it = sub.sort_values("estimate")
    assert bar.type == "bar" and est.type == "scatter"
    base, height = (np.asarray(_arr(v), dtype=float) for v in (bar.base, bar.y))
    np.testing.assert_allclose(base, it[lo_col])
    np.testing.assert_allclose(base + height, it[hi_col])
    np.testing.assert_allclose(np.asarray(_arr(est.y), dtype=float), it["estimate"])


def test_ordinal_probit_areas_are_the_rating_probabilities():
    from scipy.special import ndtr

    b = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5])
    fig = figures_simulator.ordinal_probit(3.2, 0.7, b, [1, 2, 3, 4, 5])
    p = [float(t.name.split(": ")[1].rstrip("%")) / 100 for t in fig.data]
    cuts = np.array([-np.inf, 1.5, 2.5, 3.5, 4.5, np.inf])
    np.testing.assert_allclose(p, np.diff(ndtr((cuts - 3.2) / 0.7)), atol=6e-4)
    for t, lo, hi in zip(fig.data, cuts[:-1], cuts[1:], strict=True):
        x = _arr(t.x)
        assert (x >= lo).all() and (x <= hi).all() and t.fill == "tozeroy"
    with pytest.raises(ValueError, match="thresholds"):
        figures_simulator.ordinal_probit(3.0, 0.5, b[:-1], [1, 2, 3, 4, 5])


def test_truth_vs_estimate_keeps_its_intervals_inside_the_scale(fitted):
    crowd, m = fitted
    plain = crowd.ratings.groupby("instance")["rating"].mean()
    fig = figures_simulator.simulator_truth_vs_estimate(
        crowd.truth, m.items_["estimate"], m.items_["sd"] * 5, span=(0.5, 5.5), plain_mean=plain
    )
    est, mean = fig.data[:2]
    y = _arr(est.y)
    assert (y + _arr(est.error_y.array) <= 5.5 + 1e-12).all()
    assert (y - _arr(est.error_y.arrayminus) >= 0.5 - 1e-12).all()
    np.testing.assert_allclose(_arr(mean.y), plain.reindex(crowd.truth.index))
