"""The whole default through both engines on real and simulated crowds (``ordmix fit``, the
same seed): the Dask engine's label path (``dask_engine.label_fit``) gives the in-memory
labels, level probabilities, flags and agreement.

TREC RF10, web-zhou2014 (``../shared/data``) and a simulated crowd of 1M ratings, each through
``ordmix fit`` and ``ordmix fit --engine dask`` on a 2-process local cluster: the same files
and columns, the same ``label`` and ``flag`` of every item, ``p_level_*`` within 1e-6, the
same agreement (the crowd's exactly, each annotator's to rounding).
All three end on the same winning restart (the default runs the data start alone), and
web-zhou2014 and the simulated crowd with the same continuous fit to ``EST_TOL``. TREC's
continuous fit does not: its path is decided by the rounding of its sums (SQUAREM amplifies
it), and the in-memory engine itself ends elsewhere when only the ratings' row order changes
(``test_trec_as_in_memory``). Minutes each: slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")
pytest.importorskip("dask.dataframe")

from _shared import need  # noqa: E402
from test_dask_engine import IDS, LABEL_TOL, assert_same_folders  # noqa: E402

from ordmix_core.cli.main import main  # noqa: E402
from ordmix_core.data.simulate import simulate_crowd  # noqa: E402

pytestmark = pytest.mark.slow

#: the continuous fit's estimates on web-zhou2014 and the 1M crowd: SQUAREM's step length
#: amplifies the sums' rounding (measured 1.5e-3 and 2e-5 on z_mean, 6e-3 and 2e-5 on the
#: truth weight)
EST_TOL = 5e-3


@pytest.fixture(scope="module")
def scheduler(client) -> str:
    """The address of the module's local cluster (``conftest.client``), as ``--scheduler``."""
    return client.scheduler.address


def both_engines(ratings: Path, tmp: Path, scheduler: str, *extra: str) -> tuple[Path, Path]:
    """``ordmix fit`` in memory and with ``--engine dask``, seed 0; the two folders."""
    common = ["--seed", "0", "--quiet", *extra]
    mem, dsk = tmp / "mem", tmp / "dask"
    assert main(["fit", str(ratings), "--out", str(mem), *common]) == 0
    args = ["fit", str(ratings), "--out", str(dsk), *common, "--engine", "dask"]
    assert main([*args, "--scheduler", scheduler]) == 0
    return mem, dsk


def same_labels(mem: Path, dsk: Path) -> None:
    """The same files and columns, every item's label and flag, ``p_level_*`` within
    ``LABEL_TOL``, the same agreement."""
    assert sorted(p.name for p in dsk.iterdir()) == sorted(p.name for p in mem.iterdir())
    for name in ("items", "annotators", "categories", "trace", "restarts"):
        got = pd.read_csv(dsk / f"{name}.csv", nrows=0).columns
        assert list(got) == list(pd.read_csv(mem / f"{name}.csv", nrows=0).columns), name
    a = pd.read_csv(mem / "items.csv", dtype=IDS).set_index("instance")
    b = pd.read_csv(dsk / "items.csv", dtype=IDS).set_index("instance").loc[a.index]
    assert (a["label"] == b["label"]).all() and (a["flag"] == b["flag"]).all()
    levels = [c for c in a.columns if c.startswith("p_level_")]
    np.testing.assert_allclose(b[levels], a[levels], rtol=0, atol=LABEL_TOL)
    for col in ("estimate", "sd", "p_wrong", "expected_gain"):
        np.testing.assert_allclose(b[col], a[col], rtol=0, atol=LABEL_TOL)
    # the agreement reads the ratings alone: the crowd's the same bits, each annotator's to
    # the rounding of their sums over the blocks
    x = pd.read_csv(mem / "annotators.csv", dtype=IDS).set_index("annotator")
    y = pd.read_csv(dsk / "annotators.csv", dtype=IDS).set_index("annotator").loc[x.index]
    np.testing.assert_allclose(y["agreement"], x["agreement"], rtol=1e-12, atol=1e-14)
    summaries = [json.loads((f / "summary.json").read_text()) for f in (mem, dsk)]
    assert summaries[0]["agreement"] == summaries[1]["agreement"]


def test_trec_as_in_memory(scheduler, tmp_path):
    ratings = need("trec-rf10") / "ratings.csv"
    mem, dsk = both_engines(ratings, tmp_path, scheduler)
    same_labels(mem, dsk)
    same_annotator_flags(mem, dsk)  # they read the label fit, not the continuous one
    a, b = (json.loads((f / "summary.json").read_text()) for f in (mem, dsk))
    assert a["winning_restart"] == b["winning_restart"] == 0
    # the continuous fit: the in-memory engine's own path moves with the order of its sums,
    # ratings sorted by instance (the order a Dask block holds them in) instead of the file's
    frame = pd.read_csv(ratings, dtype=str)
    resorted = tmp_path / "sorted.csv"
    frame.sort_values(["instance", "annotator"], kind="stable").to_csv(resorted, index=False)
    other = tmp_path / "mem-sorted"
    assert main(["fit", str(resorted), "--out", str(other), "--seed", "0", "--quiet"]) == 0
    same_labels(mem, other)
    same_annotator_flags(mem, other)
    file_order, sorted_order = (json.loads((f / "summary.json").read_text()) for f in (mem, other))
    assert sorted_order["iterations"] != file_order["iterations"]
    assert abs(sorted_order["lower_bound"] - file_order["lower_bound"]) > 1.0  # nats


def test_web_as_in_memory(scheduler, tmp_path):
    ratings = need("web-zhou2014") / "ratings.csv"
    mem, dsk = both_engines(ratings, tmp_path, scheduler)
    same_labels(mem, dsk)
    assert_same_flags(mem, dsk)


def test_a_million_ratings_as_in_memory(scheduler, tmp_path):
    crowd = simulate_crowd(
        n_items=200_000, n_annotators=2000, spammer_share=0.3, bias_sd=0.3,
        favourite_share=0.5, random_state=21,
    )  # fmt: skip
    path = tmp_path / "ratings.csv"
    crowd.ratings.to_csv(path, index=False)
    mem, dsk = both_engines(path, tmp_path, scheduler, "--granularity", "query")
    same_labels(mem, dsk)
    assert_same_flags(mem, dsk)


def same_annotator_flags(mem: Path, dsk: Path) -> None:
    """The same annotators' flags, and their reliability posterior to rounding: it reads the
    label fit, whatever the continuous fit's path."""
    x = pd.read_csv(mem / "annotators.csv", dtype=IDS).set_index("annotator")
    y = pd.read_csv(dsk / "annotators.csv", dtype=IDS).set_index("annotator").loc[x.index]
    assert (x["flag"] == y["flag"]).all()
    for col in ("reliability", "reliability_lower", "reliability_upper", "p_unreliable"):
        np.testing.assert_allclose(y[col], x[col], rtol=0, atol=1e-9)


def assert_same_flags(mem: Path, dsk: Path) -> None:
    """The same winning restart and annotators' flags; the continuous fit within
    ``EST_TOL``."""
    a, b = (json.loads((f / "summary.json").read_text()) for f in (mem, dsk))
    assert a["winning_restart"] == b["winning_restart"]
    assert a["decisions"] == b["decisions"]
    x = pd.read_csv(mem / "annotators.csv", dtype=IDS).set_index("annotator")
    y = pd.read_csv(dsk / "annotators.csv", dtype=IDS).set_index("annotator").loc[x.index]
    assert (x["flag"] == y["flag"]).all()
    for col in ("reliability", "p_unreliable", "eps", "expertise"):
        np.testing.assert_allclose(y[col], x[col], rtol=0, atol=EST_TOL)
    i = pd.read_csv(mem / "items.csv", dtype=IDS).set_index("instance")
    j = pd.read_csv(dsk / "items.csv", dtype=IDS).set_index("instance").loc[i.index]
    for col in ("z_mean", "z_sd"):
        np.testing.assert_allclose(j[col], i[col], rtol=0, atol=EST_TOL)
    # a sum of each item's ratings' q(y): web-zhou2014's items have up to ~12 ratings
    np.testing.assert_allclose(j["truth_weight"], i["truth_weight"], rtol=0, atol=4 * EST_TOL)


def test_gold_and_warm_start_as_in_memory(scheduler, tmp_path):
    """``--gold`` and ``--warm-start`` on a simulated crowd through the command line: the same
    folders (``assert_same_folders``)."""
    crowd = simulate_crowd(
        n_items=300, n_annotators=25, ratings_per_item=5, n_queries=6, spammer_share=0.3,
        random_state=5,
    )  # fmt: skip
    path, gold = tmp_path / "ratings.csv", tmp_path / "gold.csv"
    crowd.ratings.to_csv(path, index=False)
    crowd.gold.iloc[::5].rename("truth").rename_axis("instance").to_csv(gold)
    earlier = tmp_path / "earlier.csv"
    crowd.ratings.sample(frac=0.8, random_state=1).to_csv(earlier, index=False)
    prev = tmp_path / "prev"
    assert main(["fit", str(earlier), "--out", str(prev), "--seed", "1", "--quiet"]) == 0
    extra = ["--restarts", "3", "--gold", str(gold), "--warm-start", str(prev)]
    mem, dsk = both_engines(path, tmp_path, scheduler, *extra)
    assert_same_folders(mem, dsk)
    items = pd.read_csv(dsk / "items.csv", dtype=IDS)
    assert items["gold"].sum() == 60 and items["crowd_estimate"].notna().sum() == 60
    restarts = pd.read_csv(dsk / "restarts.csv")
    assert restarts["init"].tolist()[0] == "previous"
