import numpy as np

from ordmix_core.data.crowd import prepare
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.evaluation.experiments import ablation_experiment, add_spam, spam_experiment


def test_add_spam_keeps_real_and_adds_uniform_fakes():
    crowd = simulate_crowd(400, 20, 4, spammer_share=0.0, random_state=1)
    data = prepare(crowd.ratings, None, "query")
    noisy = add_spam(data, 3, np.random.default_rng(0))
    fake = noisy[noisy["annotator"].str.startswith("fake-spammer-")]
    assert len(noisy) == len(crowd.ratings) + 3 * 400
    assert (fake.groupby("instance").size() == 3).all()
    assert (fake.groupby("instance")["annotator"].nunique() == 3).all()
    load_real = len(crowd.ratings) / 20
    load_fake = len(fake) / fake["annotator"].nunique()
    assert 0.5 * load_real < load_fake < 1.5 * load_real
    counts = fake["rating"].value_counts(normalize=True)
    assert len(counts) == 5 and counts.max() < 0.25  # uniform over the 5 levels
    assert (noisy.loc[fake.index, "query"].notna()).all()


def test_spam_hurts_the_mean_more_than_the_mixture():
    crowd = simulate_crowd(300, 20, 4, spammer_share=0.0, random_state=3)
    res = spam_experiment(
        crowd.ratings, crowd.gold, [0, 5], ["mean", "odm-query"], n_restarts=2, random_state=0
    )
    c = res.set_index(["spam_level", "method"])["correlation"]
    drop_mean = c[(0, "mean")] - c[(5, "mean")]
    drop_odm = c[(0, "odm-query")] - c[(5, "odm-query")]
    assert drop_mean > 0.1 and drop_odm < 0.05


def test_ablation_runs_the_four_variants():
    crowd = simulate_crowd(120, 10, 4, random_state=4)
    res = ablation_experiment(crowd.ratings, crowd.gold, [0], n_restarts=1, random_state=0)
    assert sorted(res["method"]) == sorted(
        ["odm-ordinal-spam", "odm-ordinal-nospam", "odm-real-spam", "odm-real-nospam"]
    )


def test_levels_are_bounded():
    import pytest

    from ordmix_core import InputError
    from ordmix_core.evaluation.experiments import MAX_SPAM_LEVEL, check_levels

    assert check_levels("0, 2,5") == [0, 2, 5] and check_levels(range(3)) == [0, 1, 2]
    for bad in ("1000000000000", "-1", "x", "", [1.5], [True], [MAX_SPAM_LEVEL + 1]):
        with pytest.raises(InputError, match="spam levels"):
            check_levels(bad)
    assert check_levels([MAX_SPAM_LEVEL]) == [MAX_SPAM_LEVEL]
    crowd = simulate_crowd(30, 5, 3, random_state=4)
    with pytest.raises(InputError, match="whole numbers from 0 to 100"):
        spam_experiment(crowd.ratings, crowd.gold, [10**12], ["mean"])
