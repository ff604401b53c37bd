"""The Dask engine on a real 2-process LocalCluster equals the in-memory fit (same seed).

One cluster for the module; small simulated crowds. The in-memory reference runs the
restart schedule the Dask engine implements (``restarts.race``): no SQUAREM, restarts in turn.
"""

from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")
pytest.importorskip("dask.dataframe")

from distributed import Client, LocalCluster  # noqa: E402

from ordmix_core.cli import main  # noqa: E402
from ordmix_core.dask_engine import DaskOrdinalMixture, write_outputs  # noqa: E402
from ordmix_core.model import OrdinalMixture  # noqa: E402
from ordmix_core.simulate import simulate_crowd  # noqa: E402

RTOL = 1e-9


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    crowd = simulate_crowd(
        n_items=240, n_annotators=20, ratings_per_item=5, n_queries=6, spammer_share=0.3,
        random_state=11,
    )  # fmt: skip
    return crowd.ratings


def in_memory(**kw) -> OrdinalMixture:
    """``OrdinalMixture`` with the schedule the Dask engine runs (no SQUAREM, one thread)."""
    extra = {"accelerate": False, "n_jobs": 1}
    params = inspect.signature(OrdinalMixture).parameters
    return OrdinalMixture(**kw, **{k: v for k, v in extra.items() if k in params})


def quiet_fit(model, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(data, **kw)


def assert_same_fit(mem: OrdinalMixture, dsk: DaskOrdinalMixture) -> None:
    """Every learned attribute of the two fits agrees within floating-point tolerance."""
    items = dsk.items_ if isinstance(dsk.items_, pd.DataFrame) else dsk.items_.compute()
    items = items.sort_index()
    pd.testing.assert_frame_equal(
        items, mem.items_, rtol=RTOL, check_dtype=False, check_index_type=False
    )
    cats = dsk.categories_
    cats = (cats if isinstance(cats, pd.DataFrame) else cats.compute()).sort_index()
    pd.testing.assert_frame_equal(
        cats, mem.categories_.sort_index(), rtol=RTOL, check_dtype=False, check_index_type=False
    )
    pd.testing.assert_frame_equal(dsk.annotators_, mem.annotators_, rtol=RTOL, atol=1e-12)
    pd.testing.assert_frame_equal(dsk.trace_, mem.trace_, rtol=RTOL)
    pd.testing.assert_frame_equal(dsk.restarts_, mem.restarts_, rtol=RTOL)
    assert dsk.best_restart_ == mem.best_restart_
    assert dsk.selection_reason_ == mem.selection_reason_
    assert dsk.converged_ == mem.converged_ and dsk.n_iter_ == mem.n_iter_
    assert dsk.collapsed_ == mem.collapsed_ and dsk.warnings_ == mem.warnings_
    assert dsk.alpha_ == pytest.approx(mem.alpha_, rel=RTOL)
    assert dsk.beta_ == pytest.approx(mem.beta_, rel=RTOL)
    assert dsk.hyperparams_.keys() == mem.hyperparams_.keys()
    for k, v in mem.hyperparams_.items():  # pytest >= 9.2 refuses approx on nested dicts
        assert np.allclose(dsk.hyperparams_[k], v, rtol=RTOL, atol=0), k
    assert dsk.lower_bound_ == pytest.approx(mem.lower_bound_, rel=RTOL)


@pytest.mark.parametrize("spam", [True, False])
@pytest.mark.parametrize("granularity", ["instance", "query", "global"])
def test_same_fit_as_in_memory(client, ratings, granularity, spam):
    kw = dict(granularity=granularity, spam=spam, n_restarts=3, random_state=3)
    mem = quiet_fit(in_memory(**kw), ratings)
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
    assert dsk.data_.n_partitions == 3 and dsk.data_.n_ratings == len(ratings)
    assert len(dsk.trace_) > 2 * kw["n_restarts"]  # several sweeps of every restart
    assert_same_fit(mem, dsk)


def test_parquet_dataset_and_dask_frames(client, ratings, tmp_path):
    """A folder of Parquet files, real-valued + paper updates, items_ as a Dask DataFrame."""
    folder = tmp_path / "ratings"
    folder.mkdir()
    shuffled = ratings.sample(frac=1.0, random_state=0)  # row order must not matter
    for i, rows in enumerate(np.array_split(np.arange(len(shuffled)), 3)):
        shuffled.iloc[rows].rename(columns={"annotator": "worker", "instance": "task"}).to_parquet(
            folder / f"part-{i}.parquet"
        )
    kw = dict(granularity="query", ordinal=False, updates="paper", n_restarts=2, random_state=5)
    mem = quiet_fit(in_memory(**kw), ratings)
    dsk = DaskOrdinalMixture(**kw, scheduler=client, n_partitions=4, max_local_items=0)
    quiet_fit(dsk, str(folder))
    assert not isinstance(dsk.items_, pd.DataFrame)  # a Dask DataFrame, one part per block
    assert dsk.items_.npartitions == 4
    assert_same_fit(mem, dsk)
    out = tmp_path / "out"
    out.mkdir()
    write_outputs(dsk, out, settings={})
    assert (out / "items.csv").exists() is False and (out / "summary.json").exists()
    parts = sorted((out / "items").glob("part-*.csv"))
    assert len(parts) == 4
    items = pd.concat([pd.read_csv(p, dtype={"instance": str}) for p in parts])
    items = items.set_index("instance").sort_index()
    np.testing.assert_allclose(items["estimate"], mem.items_["estimate"], rtol=RTOL)
    assert list(items.columns) == list(mem.items_.columns)


def test_progress_and_stop_as_in_memory(client, ratings):
    """The callback sees the same (restart, iteration, F) and a stop keeps the same result."""

    def recorder(calls):
        def cb(restart, iteration, f):
            calls.append((restart, iteration, f))
            return len(calls) < 25

        return cb

    kw = dict(granularity="global", n_restarts=2, random_state=1)
    calls_mem, calls_dsk = [], []
    mem = quiet_fit(in_memory(**kw), ratings, callback=recorder(calls_mem))
    dsk = DaskOrdinalMixture(**kw, scheduler=client, n_partitions=2)
    quiet_fit(dsk, ratings, callback=recorder(calls_dsk))
    assert [c[:2] for c in calls_dsk] == [c[:2] for c in calls_mem]
    np.testing.assert_allclose([c[2] for c in calls_dsk], [c[2] for c in calls_mem], rtol=RTOL)
    assert dsk.interrupted_ and mem.interrupted_
    assert_same_fit(mem, dsk)


def test_cli_engine_dask_writes_the_same_files(client, ratings, tmp_path, capsys):
    path = tmp_path / "r.csv"
    ratings.to_csv(path, index=False)
    common = ["--restarts", "2", "--seed", "4", "--granularity", "query", "--quiet"]
    assert main(["fit", str(path), "--out", str(tmp_path / "mem"), *common]) == 0
    args = ["fit", str(path), "--out", str(tmp_path / "dsk"), *common, "--engine", "dask"]
    assert main([*args, "--scheduler", client.scheduler.address]) == 0
    mem_files = sorted(p.name for p in (tmp_path / "mem").iterdir())
    assert sorted(p.name for p in (tmp_path / "dsk").iterdir()) == mem_files
    ref = quiet_fit(in_memory(granularity="query", n_restarts=2, random_state=4), ratings)
    for name in ("items", "annotators", "categories", "trace", "restarts"):
        got = pd.read_csv(tmp_path / "dsk" / f"{name}.csv")
        mem = pd.read_csv(tmp_path / "mem" / f"{name}.csv")
        assert list(got.columns) == list(mem.columns), name
    items = pd.read_csv(tmp_path / "dsk" / "items.csv", index_col="instance")
    np.testing.assert_allclose(items["estimate"], ref.items_["estimate"], rtol=RTOL)
    trace = pd.read_csv(tmp_path / "dsk" / "trace.csv")
    np.testing.assert_allclose(trace["lower_bound"], ref.trace_["lower_bound"], rtol=RTOL)
    summary = json.loads((tmp_path / "dsk" / "summary.json").read_text())
    mem_summary = json.loads((tmp_path / "mem" / "summary.json").read_text())
    assert set(summary) == set(mem_summary)
    assert summary["winning_restart"] == ref.best_restart_
    assert summary["n_ratings"] == len(ratings) and summary["settings"]["engine"] == "dask"


def test_cli_bad_file_one_error_line(tmp_path, capsys):
    """A local cluster of its own; a malformed file: one error line, exit 2, nothing written."""
    bad = tmp_path / "bad.csv"
    bad.write_text("annotator,instance,rating\na,i1,3\nb,i1,three\n")
    out = tmp_path / "out"
    assert main(["fit", str(bad), "--out", str(out), "--engine", "dask", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("ordmix: error: ") and "'three' is not a number" in err[0]
    assert not out.exists()
    missing = tmp_path / "nope.csv"
    assert main(["fit", str(missing), "--out", str(out), "--engine", "dask"]) == 2
    assert "file not found" in capsys.readouterr().err
