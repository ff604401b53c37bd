"""Convergence page: bound traces per restart with the chosen one marked, table, reasons."""

from __future__ import annotations

from test_app_main import assert_clean, charts, demo_and_fit, texts


def test_traces_per_restart_with_the_winner_marked():
    at = demo_and_fit(restarts=3)
    model = at.session_state["ordmix"]["fit"].model
    at.switch_page("pages/convergence.py").run()
    assert_clean(at)
    fig = charts(at)["conv_traces"]
    restarts_drawn = {t["legendgroup"] for t in fig["data"]}
    # numbered from 0, as trace.csv, restarts.csv and summary.json number them
    assert restarts_drawn == {f"r{r}" for r in model.restarts_.index}
    # one legend entry per restart: the warm-up is the dashed part of the same entry, the
    # mixture with uniform spam the dotted part
    legend = [t["name"] for t in fig["data"] if t.get("showlegend", True)]
    assert sorted(legend) == sorted(
        f"restart {r}" + (" (chosen)" if r == model.best_restart_ else "")
        for r in model.restarts_.index
    )
    assert {t["line"]["dash"] for t in fig["data"]} == {"dash", "dot", "solid"}
    assert any("lower bound is the score the fit climbs" in c for c in texts(at.caption))
    chosen = [t for t in fig["data"] if "(chosen)" in t["name"]]
    assert chosen and all(t["line"]["width"] > 2 for t in chosen)
    others = [t for t in fig["data"] if "(chosen)" not in t["name"]]
    assert others and all(t["line"]["width"] < 2 for t in others)
    assert all(f"r{model.best_restart_}" == t["legendgroup"] for t in chosen)
    assert any(
        f"chosen: restart {model.best_restart_}" in a["text"] for a in fig["layout"]["annotations"]
    )

    table = at.dataframe[0].value
    assert len(table) == len(model.restarts_)
    assert table.loc[table["chosen"], "restart"].tolist() == [model.best_restart_]
    assert {"n_iter", "warmup_iter", "converged", "collapsed", "truth_share"} <= set(table)
    assert any(f"Selection: restart {model.best_restart_} " in i for i in texts(at.info))
    m = {x.label: x.value for x in at.metric}
    assert m["Converged"] == "yes" and m["Chosen restart"] == str(model.best_restart_)


def test_collapse_and_warnings_are_shown():
    at = demo_and_fit(restarts=1)
    res = at.session_state["ordmix"]["fit"]
    m = res.model
    m.collapsed_ = True  # as if every restart had collapsed to all-spam
    m.warnings_ = ["the fit collapsed: almost every rating is explained as spam"]
    at.switch_page("pages/convergence.py").run()
    assert_clean(at)
    assert any("Collapse" in e for e in texts(at.error))
    assert any("collapsed" in w for w in texts(at.warning))
