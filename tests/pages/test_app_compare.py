"""Compare page: methods side by side on the gold items, estimate vs truth, spam experiment."""

from __future__ import annotations

from test_app_main import assert_clean, charts, load_simulated_demo, new_app, texts


def test_compare_methods_and_spam_experiment_on_the_simulated_demo():
    at = load_simulated_demo(new_app())
    at.switch_page("pages/compare.py").run()
    assert_clean(at)
    at.multiselect(key="cmp_methods").set_value(["mean", "majority", "odm-query"])
    at.number_input(key="cmp_restarts").set_value(1)
    at.button(key="cmp_run").click().run(timeout=120)
    assert_clean(at)
    table = at.dataframe[0].value
    assert table["method"].tolist() == ["mean", "majority", "odm-query"]
    assert (table["n_gold"] == 300).all()
    best = table.set_index("method")["mse"]
    assert best["odm-query"] < best["mean"]  # the model beats the plain mean on its own data
    # the best method of each metric is marked in the table and named in words
    words = " ".join(texts(at.markdown))
    by = table.set_index("method")
    for metric, name, lower in (("mse", "MSE", True), ("correlation", "correlation", False),
                                ("ndcg", "NDCG", False)):  # fmt: skip
        winner = by[metric].idxmin() if lower else by[metric].idxmax()
        assert name in by.loc[winner, "best_at"].split(", "), metric
        assert f"Best {name}: {winner}" in words, metric
        line = words.split(f"Best {name}:")[1].split("Best ")[0]
        assert ("A baseline wins here" in line) == (not winner.startswith("odm")), metric
    assert table.loc[table["method"] == "odm-query", "best_at"].str.contains("MSE").all()
    figs = charts(at)
    assert {"cmp_bars", "cmp_scatter"} <= set(figs)
    assert {t["name"] for t in figs["cmp_scatter"]["data"]} >= {"mean", "odm-query"}

    at.slider(key="cmp_spam_levels").set_value(1)
    at.button(key="cmp_spam_run").click().run(timeout=120)
    assert_clean(at)
    curves = charts(at)["cmp_spam_plot"]
    assert {t["name"] for t in curves["data"]} == {"mean", "majority", "odm-query"}
    spam = at.dataframe[1].value
    assert sorted(spam["spam_level"].unique()) == [0, 1]
    assert curves["layout"]["xaxis"]["dtick"] == 1  # whole spam levels, no 0.5 ticks


def test_without_gold_the_page_says_what_it_needs():
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    at.file_uploader(key="data_upload").upload(
        "r.csv", b"annotator,instance,rating\na,x,1\nb,x,2\n", "text/csv"
    )
    at.run()
    at.button(key="data_use_upload").click().run()
    at.switch_page("pages/compare.py").run()
    assert_clean(at)
    assert any("gold" in i for i in texts(at.info))
    assert not at.get("plotly_chart")


def test_the_caption_says_how_each_method_is_labelled_and_the_crowds_agreement():
    """The label error of odm comes from its shipped ``label`` (its posterior's most probable
    level), not from its estimate rounded; and the data set's agreement is given."""
    from ordmix_core.results import agreement

    at = load_simulated_demo(new_app())
    at.switch_page("pages/compare.py").run()
    assert_clean(at)
    (caption,) = [c for c in texts(at.caption) if "rated gold items" in c]
    assert "each estimate rounded" not in caption
    assert "odm's is its `label` (the most probable level of its posterior)" in caption
    assert "(mean, median, continuous ML) its estimate rounded to the nearest level" in caption
    ds = at.session_state["ordmix"]["dataset"]
    crowd = agreement.crowd_agreement(ds.data)
    assert agreement.words(crowd.as_dict()) in caption
    assert f"Krippendorff's alpha, ordinal): {crowd.alpha:.3f} (95% bootstrap" in caption
