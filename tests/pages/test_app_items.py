"""Items page: labels with level probabilities and clipped intervals, undetermined items marked,
search and sort, distribution, per-query view, what to rate next, safe CSVs."""

from __future__ import annotations

import io
import json

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
    new_app,
    texts,
)

from ordmix_core.results import decisions, outputs, reliability


def items_table(at) -> pd.DataFrame:
    return at.dataframe[0].value


def table_with(at, *columns: str) -> pd.DataFrame:
    """The first table on the page that has these columns."""
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


def test_items_table_labels_intervals_plots_and_per_query_view():
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    table = items_table(at)
    assert len(table) == 300
    levels = [f"p_level_{v}" for v in range(1, 6)]
    assert list(table.columns[:4]) == ["instance", "label", "flag", "p_wrong"]
    assert {*levels, "lower_90", "upper_90", "estimate", "sd", "query", "gold"} <= set(table)
    p = table[levels].to_numpy()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    # the most probable level, the interval a run of levels around it
    np.testing.assert_array_equal(table["label"], np.arange(1, 6)[p.argmax(axis=1)])
    assert (table["lower_90"] >= 1).all() and (table["upper_90"] <= 5).all()
    assert ((table["lower_90"] <= table["label"]) & (table["label"] <= table["upper_90"])).all()
    # ... its ends are levels, shown as the label is (5, not 5.000)
    shown = json.loads(at.dataframe[0].proto.columns)
    assert shown["label"]["type_config"]["format"] == "%g"
    assert shown["lower_90"]["type_config"]["format"] == "%g"
    assert shown["upper_90"]["type_config"]["format"] == "%g"
    assert table["estimate"].is_monotonic_decreasing  # default sort: estimate, descending
    figs = charts(at)
    assert {"items_distribution", "items_query_plot", "items_levels_plot"} <= set(figs)
    first_query = at.selectbox(key="items_query").value
    n_in_query = int((table["query"] == first_query).sum())
    interval, estimate = figs["items_query_plot"]["data"][:2]
    assert len(interval["x"]) == len(estimate["x"]) == n_in_query
    # the label's levels as bars of their own (not +-1.96 sd around the estimate)
    assert interval["type"] == "bar" and "base" in interval and "error_y" not in estimate
    assert len(figs["items_levels_plot"]["data"]) == 5  # one bar segment per level
    assert "300 of 300 items" in texts(at.markdown)


def test_search_and_sort():
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    at.text_input(key="items_search").set_value("item0001").run()
    table = items_table(at)
    assert len(table) == 10 and table["instance"].str.contains("item0001").all()
    at.selectbox(key="items_sort").set_value("sd")
    at.toggle(key="items_desc").set_value(False).run()
    table = items_table(at)
    assert table["sd"].is_monotonic_increasing
    at.text_input(key="items_search").set_value("q003").run()  # matches the query column
    assert (items_table(at)["query"] == "q003").all()


def test_unstable_only_shows_what_the_near_tied_restarts_disagree_on():
    """The toggle keeps the items the fit's ensemble marks unstable; the table
    carries their spread."""
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    table = items_table(at)
    assert {"estimate_spread", "unstable"} <= set(table)
    n = int(table["unstable"].sum())
    toggle = at.toggle(key="items_unstable")
    assert toggle.label.startswith(f"Unstable only ({n:,}")
    toggle.set_value(True).run()
    assert_clean(at)
    shown = items_table(at)
    assert len(shown) == n and shown["unstable"].all()
    assert f"{n:,} of 300 items" in texts(at.markdown)


def test_disputed_honeypots_only_shows_the_gold_items_the_crowd_reads_otherwise():
    """With gold in the fit, the toggle keeps the gold items more than a level from their own
    ratings' reading (``decisions.disputed_gold``); without gold there is no toggle."""
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    assert not [t for t in at.toggle if t.key == "items_disputed"]
    at = fit_current(at, fit_use_gold=True)
    at.switch_page("pages/items.py").run()
    table = items_table(at)
    gold = table["crowd_estimate"].notna()
    disputed = gold & ((table["crowd_estimate"] - table["estimate"]).abs() > 1.0)
    toggle = at.toggle(key="items_disputed")
    assert toggle.label.startswith(f"Disputed honeypots only ({int(disputed.sum()):,}:")
    toggle.set_value(True).run()
    assert_clean(at)
    shown = items_table(at)
    assert set(shown["instance"]) == set(table.loc[disputed, "instance"])


def test_what_to_rate_next_and_annotators_to_review(csv_downloads):
    written = csv_downloads
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    at.number_input(key="items_batch_size").set_value(25).run()
    assert_clean(at)
    res = at.session_state["ordmix"]["fit"]
    m = res.model
    want = decisions.next_batch(m.items_.join(decisions.item_decisions(m)), 25)
    batch = table_with(at, "rank")
    assert len(batch) == 25
    assert batch["instance"].tolist() == want["instance"].tolist()
    labels = [d.label for d in at.get("download_button")]
    assert labels == ["Download items.csv", "Download next.csv", "Download review.csv"]
    files = {b.split(b"\n", 1)[0]: b for b in written}
    got = pd.read_csv(io.BytesIO(files[b",".join(c.encode() for c in want.columns)]), dtype=str)
    assert got["instance"].tolist() == want["instance"].tolist()  # the columns of ordmix next
    at.selectbox(key="items_rank_by").set_value("p_wrong").run()
    assert table_with(at, "rank")["p_wrong"].is_monotonic_decreasing
    review = table_with(at, "p_unreliable")
    flags = reliability.annotator_flags(m)
    assert set(review["annotator"]) == set(flags.index[flags["flag"] == "unreliable"])
    assert {"p_unreliable", "reliability_lower", "reliability_upper"} <= set(review)


@pytest.fixture(scope="module")
def trec_items():
    """The Items page of a fit of the TREC demo (one restart; its fit is most of the two tests'
    time, so they share it): the app as it opens, on TREC. The tests read it; the one that sets
    the Show filter reads nothing the other does after it (the list of undetermined items to
    rate is built from every item, whatever the filter)."""
    at = new_app()  # opens on TREC
    at = fit_current(at, restarts=1)
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    return at


def test_undetermined_items_are_marked_on_trec(trec_items):
    """The TREC demo (one restart): the items whose ratings carry almost no truth weight."""
    at = trec_items
    res = at.session_state["ordmix"]["fit"]
    want = decisions.item_decisions(res.model)
    n_und = int((want["flag"] == "undetermined").sum())
    assert n_und > 100
    assert any(f"*undetermined* ({n_und:,} items here)" in t for t in texts(at.markdown))
    at.selectbox(key="items_show").set_value("undetermined").run()
    table = items_table(at)
    assert len(table) == n_und and (table["flag"] == "undetermined").all()
    assert table["label"].notna().all()  # labelled, and marked as not to be trusted
    # the label's interval: the levels around it holding 90% of its level probabilities
    assert ((table["lower_90"] <= table["label"]) & (table["label"] <= table["upper_90"])).all()
    dist = charts(at)["items_distribution"]
    names = [t["name"] for t in dist["data"]]
    assert "undetermined (too little evidence, or a tie)" in names


def test_csv_download_is_the_cli_items_csv_and_formula_safe(csv_downloads):
    written = csv_downloads
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    csv = b"annotator,instance,rating\na,=1+1,1\nb,=1+1,2\na,@SUM(A1),2\nb,ok,3\n"
    at.file_uploader(key="data_upload").upload("r.csv", csv, "text/csv")
    at.run()
    at.button(key="data_use_upload").click().run()
    at = fit_current(at, restarts=1, fit_granularity="instance")
    at.switch_page("pages/items.py").run()
    assert_clean(at)
    assert "Download items.csv" in [d.label for d in at.get("download_button")]
    assert written, "the Items page did not use io.to_csv_bytes"
    items_csv = next(b for b in written if b.startswith(b"instance,estimate,"))
    back = pd.read_csv(io.BytesIO(items_csv), dtype=str)
    assert set(back["instance"]) == {"'=1+1", "'@SUM(A1)", "ok"}
    res = at.session_state["ordmix"]["fit"]
    assert list(back.columns) == list(outputs.items_table(res.model).columns)


def test_one_items_ratings_and_why_it_got_its_label():
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    pick = at.selectbox(key="items_detail")
    assert pick.options == items_table(at)["instance"].tolist()  # the table's order
    item = pick.options[7]
    pick.set_value(item).run()
    assert_clean(at)
    res = at.session_state["ordmix"]["fit"]
    ratings = pd.read_csv(ROOT / "demo_data" / "simulated-ratings.csv", dtype=str)
    own = ratings[ratings["instance"] == item]
    shown = table_with(at, "annotator", "rating", "flag")
    assert sorted(shown["annotator"]) == sorted(own["annotator"])
    flags = reliability.annotator_flags(res.model)["flag"]
    assert shown.set_index("annotator")["flag"].to_dict() == {
        a: flags.loc[a] for a in own["annotator"]
    }
    assert "counted" not in shown  # every rating counts, by its annotator's confusion
    fig = charts(at)["items_detail_plot"]
    hist, levels = fig["data"]
    counts = own["rating"].astype(float).value_counts()
    np.testing.assert_allclose(arr(hist["y"]), [counts.get(v, 0) / len(own) for v in range(1, 6)])
    want = decisions.item_decisions(res.model).loc[item, [f"p_level_{v}" for v in range(1, 6)]]
    np.testing.assert_allclose(arr(levels["y"]), want.to_numpy(float))
    label = decisions.item_decisions(res.model).loc[item, "label"]
    assert any(f"**{item}**: label **{label:g}**" in t for t in texts(at.markdown))


def test_level_chart_does_not_open_on_certain_items():
    """By default the table is sorted by estimate, whose first 40 items are all level 5 with
    probability 1: the chart opens on the least certain items instead."""
    at = demo_and_fit()
    at.switch_page("pages/items.py").run()
    bars = charts(at)["items_levels_plot"]["data"]
    p = np.column_stack([arr(t["x"]) for t in bars])
    assert (p.max(axis=1) < 0.999).any()
    res = at.session_state["ordmix"]["fit"]
    dec = decisions.item_decisions(res.model)
    worst = dec["p_wrong"].sort_values(ascending=False).iloc[:40]
    assert 1 - p.max(axis=1).min() == pytest.approx(worst.iloc[0], abs=1e-9)


def test_undetermined_items_are_listed_most_useful_first(trec_items):
    at = trec_items  # TREC: many undetermined items
    und = next(
        d.value for d in at.dataframe if "rank" not in d.value and "flag" not in d.value
        and "expected_gain" in d.value
    )  # fmt: skip
    res = at.session_state["ordmix"]["fit"]
    n_und = int((decisions.item_decisions(res.model)["flag"] == "undetermined").sum())
    assert len(und) == n_und > 100
    key = list(zip(-und["expected_gain"], und["n_ratings"], strict=True))
    assert key == sorted(key)
