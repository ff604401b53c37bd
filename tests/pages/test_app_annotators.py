"""Annotators page: evidence-aware flags in three groups with their evidence, the threshold and
confidence widgets, the review list and annotators.csv downloads (formula-safe)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from test_app_main import (
    ROOT,
    arr,
    assert_clean,
    charts,
    demo_and_fit,
    fit_current,
    load_simulated_demo,
    new_app,
    texts,
)

import ordmix_core.io as oio
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.results import decision_columns, decisions, outputs, reliability

SPAMMERS = set(
    pd.read_csv(ROOT / "demo_data" / "simulated-spammers.csv").query("spammer == 1").annotator
)


def tables(at) -> dict[str, pd.DataFrame]:
    """The group tables, one tab each ("Unreliable (9)", ...), by flag."""
    out = {}
    for tab, flag in zip(at.tabs, decisions.ANNOTATOR_FLAGS, strict=True):
        (table,) = tab.dataframe
        assert tab.label == f"{flag.capitalize()} ({len(table.value):,})"
        out[f"ann_table_{flag}"] = table.value
    return out


def test_flags_with_their_evidence_in_three_groups():
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    assert_clean(at)
    metrics = {
        m.label: m.value for m in at.metric if m.label in ("Unreliable", "Ok", "Undetermined")
    }
    assert metrics == {"Unreliable": "9", "Ok": "11", "Undetermined": "10"}
    figs = charts(at)
    assert {"ann_evidence", "ann_scatter", "ann_distributions"} <= set(figs)
    evidence = figs["ann_evidence"]
    names = {t["name"] for t in evidence["data"]}
    assert names == {"unreliable (9)", "ok (11)", "undetermined (10)"}
    hover = evidence["data"][0]["hovertemplate"]
    assert "P(unreliable)" in hover and "reliability" in hover
    assert evidence["layout"]["xaxis"]["type"] == "log"
    t = tables(at)
    unreliable = t["ann_table_unreliable"]
    # the simulated demo's 9 spammers are exactly the ones flagged unreliable, with evidence
    assert set(unreliable["annotator"]) == SPAMMERS
    assert (unreliable["p_unreliable"] >= 0.9).all()
    assert (unreliable["reliability_upper"] < 0.5).all()
    assert (t["ann_table_ok"]["p_unreliable"] <= 0.1).all()
    captions = " ".join(texts(at.caption))
    for words in ("Review them", "agree with the other ratings", "Too few ratings"):
        assert words in captions
    labels = [d.label for d in at.get("download_button")]
    assert labels == ["Download review.csv", "Download annotators.csv"]
    # unstable and still_moving are columns of every group, explained in the
    # caption, with the fit's own values
    assert "Still moving: that eps was still changing when the fit stopped" in captions
    assert "Unstable: answers the data support about as well" in captions
    fitted = at.session_state["ordmix"]["fit"].model.annotators_
    for table in t.values():
        assert list(table.columns)[-2:] == ["unstable", "still_moving"]
        want = fitted.loc[table["annotator"], ["unstable", "still_moving"]].to_numpy()
        assert (table[["unstable", "still_moving"]].to_numpy() == want).all()


def test_threshold_and_confidence_give_the_library_flags():
    """Each setting's groups equal those of reliability.annotator_flags on a library fit."""
    ratings = oio.read_ratings(ROOT / "demo_data" / "simulated-ratings.csv")
    model = OrdinalMixture("query", n_restarts=2, random_state=0).fit(ratings)
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    seen = set()
    for threshold, confidence in ((0.5, 0.9), (0.9, 0.9), (0.2, 0.99), (0.5, 0.55)):
        at.slider(key="ann_threshold").set_value(threshold)
        at.slider(key="ann_confidence").set_value(confidence).run()
        assert_clean(at)
        want = reliability.annotator_flags(model, threshold=threshold, confidence=confidence)
        t = tables(at)
        for flag in decisions.ANNOTATOR_FLAGS:
            expected = set(want.index[want["flag"] == flag])
            assert set(t[f"ann_table_{flag}"]["annotator"]) == expected, (threshold, flag)
            metric = next(m for m in at.metric if m.label == flag.capitalize())
            assert metric.value == str(len(expected))
        seen.add(tuple(int((want["flag"] == f).sum()) for f in decisions.ANNOTATOR_FLAGS))
    assert len(seen) >= 3  # the settings change the groups


def test_downloads_write_the_cli_columns_safely(csv_downloads):
    written = csv_downloads
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
    assert_clean(at)
    back = pd.read_csv(io.BytesIO(written[-1]), dtype=str)  # annotators.csv, the last one
    assert len(back) == 4
    assert '\'=HYPERLINK("x")' in set(back["annotator"])
    assert not any(a.startswith("=") for a in back["annotator"])
    res = at.session_state["ordmix"]["fit"]
    assert list(back.columns) == list(outputs.annotators_table(res.model).columns)
    flags = [*decision_columns.FLAG_COLUMNS, decision_columns.AGREEMENT_COLUMN]
    assert list(back.columns)[-len(flags) :] == flags


def test_a_fit_without_spam_says_why_it_has_none():
    at = fit_current(load_simulated_demo(new_app()), 1, fit_spam=False)
    at.switch_page("pages/annotators.py").run()
    assert_clean(at)
    (info,) = [t for t in texts(at.info) if "spam component" in t]
    assert info.startswith("This fit has no spam component (it was switched off)")


def test_unreliable_tab_puts_the_most_certain_and_biggest_first():
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    t = tables(at)
    for flag, descending in (("unreliable", True), ("undetermined", True), ("ok", False)):
        table = t[f"ann_table_{flag}"]
        key = list(zip(table["p_unreliable"], -table["n_ratings"], strict=True))
        if descending:
            key = [(-p, n) for p, n in key]
        assert key == sorted(key), flag


def test_numbers_are_rounded_for_people():
    """No 1e-10 reliability, no -0.00 bias; the expertise annotators.csv has, also for those
    taken as all spam (not "None")."""
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    fitted = at.session_state["ordmix"]["fit"].model.annotators_
    for table in tables(at).values():
        rel = table["reliability"].astype(str)
        assert rel.str.fullmatch(r"<0\.001|>0\.999|\d\.\d{3}").all(), rel.tolist()
        want = fitted.loc[table["annotator"], "reliability"].to_numpy()
        assert ((want < 0.001) == (rel == "<0.001")).all()
        bias = table["bias"].to_numpy(float)
        assert not (np.signbit(bias) & (bias == 0)).any()  # no negative zero
        np.testing.assert_array_equal(bias, np.round(bias, 2))
        expertise = fitted.loc[table["annotator"], "expertise"].to_numpy()
        np.testing.assert_array_equal(table["expertise"].to_numpy(float), expertise)
    spammers = tables(at)["ann_table_unreliable"]
    assert (fitted.loc[spammers["annotator"], "reliability"] < 0.05).any()  # the case shown


def test_why_a_flagged_annotator_is_flagged():
    at = demo_and_fit()
    at.switch_page("pages/annotators.py").run()
    res = at.session_state["ordmix"]["fit"]
    review = decisions.annotators_to_review(
        res.model.annotators_.join(reliability.annotator_flags(res.model))
    )
    pick = at.selectbox(key="ann_why")
    assert pick.options == review["annotator"].astype(str).tolist()  # most certain first
    who = review["annotator"].astype(str).iloc[-1]
    pick.set_value(who).run()
    assert_clean(at)
    ratings = pd.read_csv(ROOT / "demo_data" / "simulated-ratings.csv", dtype=str)
    own = ratings[ratings["annotator"] == who]
    items = next(d.value for d in at.dataframe if "agrees" in d.value.columns)
    assert sorted(items["instance"]) == sorted(own["instance"])
    labels = res.model.items_.join(decisions.item_decisions(res.model))["label"]
    agree = (
        own["rating"].astype(float).to_numpy() == labels.loc[own["instance"]].to_numpy()
    ).mean()
    m = {x.label: x.value for x in at.metric}
    assert m["Agreement with the consensus"] == f"{agree:.0%}"
    assert m["Ratings"] == str(len(own))
    ann = outputs.annotators_table(res.model).set_index("annotator")
    assert m["Agreement with the others (alpha)"] == f"{ann.loc[who, 'agreement']:.2f}"
    # the items table has the page's width, not a column's: its estimate is not cut off
    assert not any("agrees" in d.value.columns for col in at.columns for d in col.dataframe)
    fig = charts(at)["ann_why_histogram"]
    mine, crowd = fig["data"]
    assert who in mine["name"] and "crowd" in crowd["name"]
    counts = own["rating"].astype(float).value_counts()
    assert arr(mine["y"]) == pytest.approx([counts.get(v, 0) / len(own) for v in range(1, 6)])
    assert arr(crowd["y"]).sum() == pytest.approx(1.0)
