"""Annotators page: the expertise-reliability scatter, distributions, spammer list, safe CSV."""

from __future__ import annotations

import io

import pandas as pd
from test_app_main import ROOT, assert_clean, charts, demo_and_fit, fit_current, new_app, texts

import ordmix_core.io as oio
from ordmix_core.model import OrdinalMixture

SPAMMERS = set(
    pd.read_csv(ROOT / "demo_data" / "simulated-spammers.csv").query("spammer == 1").annotator
)


def test_scatter_with_hover_and_the_spammer_list():
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    assert_clean(at)
    figs = charts(at)
    assert {"ann_scatter", "ann_distributions"} <= set(figs)
    scatter = figs["ann_scatter"]
    hover = scatter["data"][0]["hovertemplate"]
    assert "customdata[0]" in hover and "ratings" in hover
    names = {row[0] for trace in scatter["data"] for row in trace["customdata"]}
    assert len(names) == 30
    flagged = set(at.dataframe[0].value["annotator"])
    # the simulated demo's 9 spammers are exactly the ones flagged at 0.5
    assert flagged == SPAMMERS
    assert any(f"Flagged: {len(SPAMMERS)} of 30" in h for h in texts(at.subheader))
    crosses = [t for t in scatter["data"] if t["name"] == "flagged as spammer"]
    assert len(crosses[0]["customdata"]) == len(SPAMMERS)


def test_threshold_slider_flags_exactly_the_annotators_over_it():
    """The list at each threshold equals one computed from an independent library fit."""
    ratings = oio.read_ratings(ROOT / "demo_data" / "simulated-ratings.csv")
    share = (
        OrdinalMixture("query", n_restarts=2, random_state=0).fit(ratings).annotators_["spam_share"]
    )
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    for threshold in (0.0, 0.25, 0.5, 0.75, 0.95, 1.0):
        at.slider(key="ann_threshold").set_value(threshold).run()
        assert_clean(at)
        expected = set(share.index[share >= threshold])
        listed = at.dataframe[0].value
        assert set(listed["annotator"]) == expected, threshold
        assert (listed["flag"] == "spammer").all()
        assert any(f"Flagged: {len(expected)} of 30" in h for h in texts(at.subheader))
    assert len(set(share.index[share >= 0.0])) == 30


def test_flagged_csv_is_safe_against_formula_injection(monkeypatch):
    written: list[bytes] = []
    real = oio.to_csv_bytes
    monkeypatch.setattr(
        oio,
        "to_csv_bytes",
        lambda df, id_columns=None: written.append(real(df, id_columns)) or written[-1],
    )
    rows = ["annotator,instance,rating"]
    for i in range(12):
        rows += [f"good{j},i{i},{1 + i % 3}" for j in range(3)]
        rows.append(f'=HYPERLINK("x"),i{i},{1 + (i * 7) % 3}')
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    at.file_uploader(key="data_upload").upload("r.csv", "\n".join(rows).encode(), "text/csv")
    at.run()
    at.button(key="data_use_upload").click().run()
    at = fit_current(at, restarts=1, fit_granularity="global")
    at.switch_page("pages/annotators.py").run()
    at.slider(key="ann_threshold").set_value(0.0).run()
    assert_clean(at)
    back = pd.read_csv(io.BytesIO(written[-1]), dtype=str)
    assert len(back) == 4
    assert '\'=HYPERLINK("x")' in set(back["annotator"])
    assert not any(a.startswith("=") for a in back["annotator"])
