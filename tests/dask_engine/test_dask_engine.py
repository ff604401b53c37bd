"""The Dask engine on a real 2-process LocalCluster equals the in-memory fit (same seed).

One cluster for the module; small simulated crowds. The reference is ``OrdinalMixture`` with
its defaults (SQUAREM, restarts in threads), and both engines with ``accelerate=False``.

Tolerances: without SQUAREM the fits agree to ~1e-15, so everything is checked at ``RTOL``.
With it, the step length of every extrapolation is a ratio of norms that include logit(eps),
and eps sits at its floor 1 - 1e-10 for the reliable annotators: there the logit turns the
last bits of ``1 - eps`` into ~1e-6 absolute, so a different summation order moves later
states by ~1e-7 relative (estimates, alpha), and spammers' small eps and annotators' spam
shares by up to ~2e-5 relative (~1e-8 absolute). The in-memory engine moves as much against
itself when only its chunk count changes (2 -> 3 threads' partial sums); the Dask engine,
summing over blocks, stays within that. The bound, flat at the optimum, agrees to ``RTOL``;
the other learned values are checked at ``EST_RTOL`` / ``EST_ATOL``. The ensemble's spreads
(``estimate_spread``, ``reliability_spread``) are differences of two such values, so each is
checked at the sum of their two tolerances (``spread_tol``); which items and annotators are
unstable must be the same.

The stopping rule (``race.converged``) runs these fits two to three times longer than the
bound's old ``|dF| < 0.1``; before eps was clipped at 1e-8 for SQUAREM's logit
(``FitPolicy.eps_pack``) that let the rounding drift above grow past these tolerances
mid-fit (1.3e-8 to 2.5e-5 relative, measured); with it the engines' bound traces agree to
~1e-10.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")
pytest.importorskip("dask.dataframe")

from distributed import Client, LocalCluster  # noqa: E402

from ordmix_core.cli.main import main  # noqa: E402
from ordmix_core.dask_engine import DaskOrdinalMixture, block_loading, blocks, write_outputs  # noqa: E402
from ordmix_core.dask_engine.client import _Sweeps  # noqa: E402
from ordmix_core.data.simulate import simulate_crowd  # noqa: E402
from ordmix_core.errors import InputError  # noqa: E402
from ordmix_core.estimators.memory_engine import MemorySweeps  # noqa: E402
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture  # noqa: E402
from ordmix_core.fit import rescues  # noqa: E402
from ordmix_core.fit.policy import DEFAULT  # noqa: E402
from ordmix_core.results import decision_columns, outputs  # noqa: E402

# a local Dask cluster per test (minutes in all): ``python -m pytest -m slow`` runs them
pytestmark = pytest.mark.slow

RTOL = 1e-8
#: estimates, annotators, categories, hyperparameters of accelerated fits (module docstring)
EST_RTOL, EST_ATOL = 5e-6, 1e-7


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    crowd = simulate_crowd(
        n_items=240, n_annotators=20, ratings_per_item=5, n_queries=6, spammer_share=0.3,
        random_state=11,
    )  # fmt: skip
    return crowd.ratings


def in_memory(**kw) -> OrdinalMixture:
    """``OrdinalMixture`` with its defaults unless ``kw`` says otherwise."""
    return OrdinalMixture(**kw)


def quiet_fit(model, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(data, **kw)


#: the ensemble's columns of items_ (a Dask DataFrame of items has none)
ITEM_STABILITY = ("estimate_spread", "unstable")


def spread_tol(values: pd.Series, rtol: float, atol: float) -> float:
    """Tolerance of a spread (max - min of a value across restarts) when each value agrees
    to ``rtol``/``atol``: twice the largest tolerance of one value."""
    return 2 * (atol + rtol * float(np.abs(values).max()))


def assert_same_spread(got: pd.DataFrame, ref: pd.DataFrame, value: str, rtol, atol) -> None:
    """``{value}_spread`` within ``spread_tol``, ``unstable`` identical."""
    np.testing.assert_allclose(
        got[f"{value}_spread"], ref[f"{value}_spread"], rtol=0,
        atol=spread_tol(ref[value], rtol, atol),
    )  # fmt: skip
    assert (got["unstable"].to_numpy() == ref["unstable"].to_numpy()).all()


def assert_same_alternative(got: dict | None, ref: dict | None) -> None:
    """The same annotators carried on, sweeps and verdict; bounds within RTOL."""
    if ref is None:
        assert got is None
        return
    assert {k: got[k] for k in ("annotators", "n_iter", "near_tied")} == {
        k: ref[k] for k in ("annotators", "n_iter", "near_tied")
    }
    assert got["lower_bound"] == pytest.approx(ref["lower_bound"], rel=RTOL)
    assert got["bound_above_winner"] == pytest.approx(
        ref["bound_above_winner"], abs=RTOL * abs(ref["lower_bound"])
    )


def assert_same_fit(
    mem: OrdinalMixture, dsk: DaskOrdinalMixture, rtol: float = RTOL, atol: float = 1e-12
) -> None:
    """Every learned attribute of the two fits agrees: the bound trace within ``RTOL``, q(z)
    (``z_mean``, ``z_sd``), eps and the other learned values within ``rtol``/``atol``; the
    same choices (sweeps, restarts), the same ensemble; the labels' posterior and every item
    column read from it, the annotators' flags and reliability (``assert_same_decisions``)."""
    gathered = isinstance(dsk.items_, pd.DataFrame)
    items = (dsk.items_ if gathered else dsk.items_.compute()).sort_index()
    ref = mem.items_
    assert dsk.ensemble_ == mem.ensemble_
    assert list(items.columns) == list(ref.columns)
    # the spread is of q(z)'s mean across the near-tied restarts
    z = {"estimate": items["z_mean"]}, {"estimate": ref["z_mean"]}
    assert_same_spread(items.assign(**z[0]), ref.assign(**z[1]), "estimate", rtol, atol)
    pd.testing.assert_frame_equal(
        items.drop(columns=list(ITEM_STABILITY)),
        ref.drop(columns=list(ITEM_STABILITY)),
        rtol=rtol,
        atol=atol,
        check_dtype=False,
        check_index_type=False,
    )
    cats = dsk.categories_
    cats = (cats if isinstance(cats, pd.DataFrame) else cats.compute()).sort_index()
    pd.testing.assert_frame_equal(
        cats,
        mem.categories_.sort_index(),
        rtol=rtol,
        atol=atol,
        check_dtype=False,
        check_index_type=False,
    )
    assert_same_spread(
        dsk.annotators_.assign(reliability=dsk.annotators_["eps"]),
        mem.annotators_.assign(reliability=mem.annotators_["eps"]), "reliability", rtol, atol,
    )  # fmt: skip
    pd.testing.assert_frame_equal(
        dsk.annotators_.drop(columns=["reliability_spread"]),
        mem.annotators_.drop(columns=["reliability_spread"]),
        rtol=rtol,
        atol=atol,
    )
    pd.testing.assert_frame_equal(dsk.trace_, mem.trace_, rtol=RTOL)
    pd.testing.assert_frame_equal(dsk.restarts_, mem.restarts_, rtol=RTOL)
    assert dsk.best_restart_ == mem.best_restart_
    assert dsk.selection_reason_ == mem.selection_reason_
    assert_same_alternative(dsk.alternative_, mem.alternative_)
    assert dsk.converged_ == mem.converged_ and dsk.n_iter_ == mem.n_iter_
    assert dsk.collapsed_ == mem.collapsed_ and dsk.warnings_ == mem.warnings_
    assert dsk.alpha_ == pytest.approx(mem.alpha_, rel=rtol)
    assert dsk.beta_ == pytest.approx(mem.beta_, rel=rtol)
    assert dsk.hyperparams_.keys() == mem.hyperparams_.keys()
    for k, v in mem.hyperparams_.items():  # pytest >= 9.2 refuses approx on nested dicts
        assert np.allclose(dsk.hyperparams_[k], v, rtol=rtol, atol=0), k
    assert dsk.lower_bound_ == pytest.approx(mem.lower_bound_, rel=RTOL)
    assert_same_decisions(mem, dsk, rtol, atol)


#: the labels' posterior, ``p_level_*`` and what is read from it: the label fit reads the
#: ratings alone (measured: ~1e-13 apart); the paper's model's read the continuous fit (1e-9)
LABEL_TOL = 1e-6


def assert_same_decisions(mem, dsk, rtol: float = RTOL, atol: float = 1e-12) -> None:
    """The same item columns (labels, flags, ``p_level_*`` within ``LABEL_TOL``, the truth
    weight within ``rtol``/``atol``), the same annotators' flags (their numbers within
    ``rtol``/``atol``), the label fit's description, the same summary counts."""
    got = decided_items(dsk)
    want = outputs.items_table(mem).set_index("instance")
    assert list(got.columns) == list(want.columns)
    assert (got["label"] == want["label"]).all() and (got["flag"] == want["flag"]).all()
    labels = [c for c in want.columns if c.startswith("p_level_")]
    labels += ["p_wrong", "expected_gain", "estimate", "sd"]
    pd.testing.assert_frame_equal(
        got[labels], want[labels], rtol=0, atol=LABEL_TOL, check_index_type=False
    )
    np.testing.assert_allclose(got["truth_weight"], want["truth_weight"], rtol=rtol, atol=atol)
    flags_d, flags_m = dsk.annotator_flags_, mem.annotator_flags_
    assert (flags_d["flag"] == flags_m["flag"]).all()
    pd.testing.assert_frame_equal(flags_d, flags_m, rtol=rtol, atol=atol)
    d, m = dsk.model_["labels"], mem.model_["labels"]
    assert d.keys() == m.keys()
    for k, v in m.items():
        assert np.allclose(d[k], v, rtol=1e-9) if isinstance(v, (float, list)) else d[k] == v, k
    assert outputs.summary(dsk, {})["decisions"] == outputs.summary(mem, {})["decisions"]


def decided_items(model) -> pd.DataFrame:
    """``items.csv``'s rows of a fit (by instance, sorted), items left on a cluster included."""
    if isinstance(model.items_, pd.DataFrame):
        return outputs.items_table(model).set_index("instance")
    frame = outputs.decided(model, "items", decision_columns.decide(model)).compute()
    return outputs.TABLES["items"].rows(frame).set_index("instance").sort_index()


@pytest.mark.parametrize("spam", [True, False])
@pytest.mark.parametrize("granularity", ["instance", "query", "global"])
def test_same_fit_as_in_memory(client, ratings, granularity, spam):
    """Default settings (SQUAREM) in both engines: the same sweeps, bound trace and fit."""
    kw = dict(granularity=granularity, spam=spam, n_restarts=3, random_state=3)
    mem = quiet_fit(in_memory(**kw), ratings)
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
    assert dsk.data_.n_partitions == 3 and dsk.data_.n_ratings == len(ratings)
    assert len(dsk.trace_) > 2 * kw["n_restarts"]  # several sweeps of every restart
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)
    if spam:  # SQUAREM changed the course of the fit, and the Dask engine followed it
        plain = quiet_fit(in_memory(**kw, accelerate=False), ratings)
        assert len(plain.trace_) != len(mem.trace_)


def test_the_same_alternative_as_in_memory(client):
    """A crowd whose default fit ends with an annotator still moving (worker006): both
    engines judge it the other way, with the same sweeps, bound and unstable items (the
    blocks keep the winner's slot while the alternative sweeps from it)."""
    crowd = simulate_crowd(
        n_items=240, n_annotators=20, ratings_per_item=5, n_queries=6, spammer_share=0.3,
        random_state=1,
    ).ratings  # fmt: skip
    kw = dict(n_restarts=3, random_state=3)
    mem = quiet_fit(in_memory(**kw), crowd)
    assert mem.alternative_ is not None and mem.alternative_["near_tied"]
    assert mem.items_["unstable"].any()
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), crowd)
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


@pytest.mark.parametrize("granularity", ["instance", "query"])
def test_a_settled_stop_as_in_memory(client, ratings, granularity, monkeypatch):
    """The settle at a stop (``rescues.Rescues.at_stop``), taken at every stop and with three
    annotators named still moving, so that both of its parts run: the items no named
    annotator rated, on their blocks (``blocks.settle_block``), and the named annotators
    with their items, gathered, solved by the client and written back
    (``_Sweeps.settle_items``, ``blocks.settle_write``). Each settle gives the in-memory
    one's items' means, reliabilities and largest move, and the fits agree (measured:
    estimates 2e-14 apart); the settles changed the fit (more sweeps than without them)."""
    kw = dict(granularity=granularity, n_restarts=3, random_state=3)
    unforced = quiet_fit(in_memory(**kw), ratings)
    seen: dict[str, list] = {"mem": [], "dask": []}
    mem_settle, dask_settle = MemorySweeps.settle_items, _Sweeps.settle_items

    def in_memory_settle(self, state, annotators):
        new, moved = mem_settle(self, state, annotators)
        seen["mem"].append((pd.Series(new.mu_m), new.eps.copy(), moved.max(), annotators.sum()))
        return new, moved

    def on_blocks(self, g, annotators):
        new, moved = dask_settle(self, g, annotators)
        got = self.bl.client.gather(self.bl.run(blocks.block_means, new.restart, new.slot))
        seen["dask"].append((pd.concat(got).sort_index(), new.eps.copy(), moved.max()))
        return new, moved

    def named(window, n, policy=DEFAULT):
        mask = np.zeros(n, dtype=bool)
        mask[[0, 3, 7]] = True
        return mask

    monkeypatch.setattr(OrdinalMixture, "fit_policy", replace(DEFAULT, settle_move=1e-12))
    monkeypatch.setattr(rescues, "still_moving", named)
    monkeypatch.setattr(MemorySweeps, "settle_items", in_memory_settle)
    monkeypatch.setattr(_Sweeps, "settle_items", on_blocks)
    mem = quiet_fit(in_memory(**kw, n_jobs=1), ratings)  # restarts in turn, as on Dask
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
    assert len(mem.trace_) > len(unforced.trace_)
    assert len(seen["mem"]) == len(seen["dask"]) > 0
    for (mu, eps, moved, named_n), (means, d_eps, d_moved) in zip(
        seen["mem"], seen["dask"], strict=True
    ):
        assert named_n == 3 and moved > 0
        mu.index = mem.items_.index
        np.testing.assert_allclose(means.reindex(mu.index), mu, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(d_eps, eps, rtol=1e-9, atol=1e-12)
        assert d_moved == pytest.approx(moved, rel=1e-6, abs=1e-12)
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


def test_a_window_settle_not_taken_goes_back_as_in_memory(client, ratings, monkeypatch):
    """A window's settle whose sweep is not higher is not taken
    (``rescues.Rescues.after_plain_sweep``): the run goes back to the plain sweep's state,
    whose slot and q(y) the blocks keep through the sweep from the settle
    (``_Global.source``). Forced: every window's settle swept from (``window_settle_move``
    ~0) with every reliability set to 0.5, so its sweep is lower; the fits agree."""
    kw = dict(granularity="query", n_restarts=3, random_state=3)
    back = {"mem": 0, "dask": 0}
    settled = []
    after = rescues.Rescues.after_plain_sweep
    mem_settle, dask_settle = MemorySweeps.settle_items, _Sweeps.settle_items

    def counted(self, run, new, f):
        settled.clear()
        out = after(self, run, new, f)
        if settled and out[0] is new:  # settled, swept from, and not taken
            back["dask" if isinstance(self.engine, _Sweeps) else "mem"] += 1
        return out

    def worse(settle):
        def settle_items(self, state, annotators):
            settled.append(True)
            new, moved = settle(self, state, annotators)
            return replace(new, eps=np.full_like(new.eps, 0.5)), moved

        return settle_items

    monkeypatch.setattr(OrdinalMixture, "fit_policy", replace(DEFAULT, window_settle_move=1e-12))
    monkeypatch.setattr(rescues.Rescues, "after_plain_sweep", counted)
    monkeypatch.setattr(MemorySweeps, "settle_items", worse(mem_settle))
    monkeypatch.setattr(_Sweeps, "settle_items", worse(dask_settle))
    mem = quiet_fit(in_memory(**kw, n_jobs=1), ratings)
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
    assert back["dask"] == back["mem"] > 0
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


@pytest.mark.parametrize("granularity", ["instance", "query"])
def test_the_escape_step_as_in_memory(client, ratings, granularity, monkeypatch):
    """The window settle taken again with the raters of the item it moved most
    (``rescues._escaping_item``), forced at every window: the Dask engine names that
    item from its blocks' and its own tops (``_Sweeps.settle_top``, ``blocks.settle_block``)
    and its raters from the item's block (``blocks.item_raters``). Both engines name the same
    raters at every window, and the fits agree."""
    kw = dict(granularity=granularity, n_restarts=3, random_state=3)
    named: dict[str, list] = {"mem": [], "dask": []}
    escaping_item = rescues._escaping_item

    def every_window(watch, moved, top=None, policy=DEFAULT):  # the growth condition dropped
        escaping_item(watch, moved, top, policy)
        if watch.settle_top is None:
            return None
        return watch.settle_top[0]

    mem_raters, dask_raters = MemorySweeps.raters, _Sweeps.raters

    def mem_named(self, item):
        named["mem"].append(mem_raters(self, item))
        return named["mem"][-1]

    def dask_named(self, item):
        named["dask"].append(dask_raters(self, item))
        return named["dask"][-1]

    monkeypatch.setattr(rescues, "_escaping_item", every_window)
    monkeypatch.setattr(MemorySweeps, "raters", mem_named)
    monkeypatch.setattr(_Sweeps, "raters", dask_named)
    mem = quiet_fit(in_memory(**kw, n_jobs=1), ratings)  # restarts in turn, as on Dask
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
    assert len(named["mem"]) == len(named["dask"]) > 0
    for a, b in zip(named["mem"], named["dask"], strict=True):
        assert a.any() and np.array_equal(a, b)
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


def test_a_refused_flip_leaves_its_start_current_with_its_q_y(client, ratings, monkeypatch):
    """A flip tried and refused leaves the state it was tried from current, so the blocks
    must still hold that state's q(y) for the next exact eps step. Forced here: every try
    flips annotator 0 (``rescues.escaping`` patched in this process, where both engines' steps
    run), which lowers the bound; both engines refuse it alike."""
    tries = []

    def escaping(window, growth=DEFAULT.flip_growth):
        tries.append(growth)
        return np.array([0])

    monkeypatch.setattr(rescues, "escaping", escaping)
    kw = dict(n_restarts=2, random_state=3)
    mem = quiet_fit(in_memory(**kw), ratings)
    assert DEFAULT.flip_growth in tries  # flips were tried
    dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


def test_the_exact_eps_steps_first_sums_come_with_the_sweep(client, ratings, monkeypatch):
    """The sweep that made a state took the exact eps step's first Newton sums in its second
    round (``eps_first``): the step from them is the step with every round a round trip, to
    the bit, and one round trip shorter."""
    solve = _Sweeps.eps_block
    rounds, used = [], []

    def counted(bl, fn):
        run = bl.run

        def each(f, *args):
            if f is blocks.eps_sums:
                rounds[-1] += 1
            return run(f, *args)

        bl.run = each
        try:
            return fn()
        finally:
            bl.run = run

    def both(self, g):
        first = g.eps_first
        rounds.append(0)
        alone = counted(self.bl, lambda: solve(self, replace(g, eps_first=None)))
        rounds.append(0)
        got = counted(self.bl, lambda: solve(self, replace(g, eps_first=first)))
        np.testing.assert_array_equal(got.eps, alone.eps)
        if first is not None and first[:2] == (g.restart, g.slot):  # this state's own
            used.append(rounds[-2] - rounds[-1])
        return got

    monkeypatch.setattr(_Sweeps, "eps_block", both)
    quiet_fit(
        DaskOrdinalMixture(n_restarts=2, random_state=3, scheduler=client, n_partitions=3),
        ratings,
    )
    assert used and set(used) == {1}


@pytest.mark.parametrize("granularity", ["instance", "global"])
def test_same_fit_without_acceleration(client, ratings, granularity):
    """``accelerate=False`` in both engines: plain sweeps, equal to ~1e-15, with the full
    stopping rule (the estimates' remaining change): the same sweeps and stops."""
    kw = dict(granularity=granularity, n_restarts=2, random_state=3, accelerate=False)
    mem = quiet_fit(in_memory(**kw), ratings)
    dsk = quiet_fit(DaskOrdinalMixture(**kw, n_jobs=4, scheduler=client, n_partitions=3), ratings)
    assert_same_fit(mem, dsk)
    assert mem.converged_  # stopped by the rule, not by max_iter


def _slots_and_q_y() -> dict:
    """On a worker: restart -> ``(kept states, how many of them keep a q(y))`` of each of its
    blocks."""
    from ordmix_core.dask_engine import blocks

    out: dict = {}
    for b in blocks._REGISTRY.values():
        for r, slots in b.states.items():
            q_y = sum(loc.omega is not None for loc in slots.values())
            out[r] = (*out.get(r, ()), (len(slots), q_y))
    return out


def test_blocks_keep_at_most_four_states_per_restart(client, ratings):
    """SQUAREM's history on the blocks: at most s0, s1, s2 and the candidate per restart."""
    seen: list[int] = []

    def cb(restart, iteration, f):
        per_worker = client.run(_slots_and_q_y).values()
        seen.extend(max(n for n, _ in blocks_of) for w in per_worker for blocks_of in w.values())

    kw = dict(granularity="instance", n_restarts=2, random_state=2, max_iter=12)
    quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=2), ratings, callback=cb)
    assert seen and max(seen) <= 4 and min(seen) >= 1


def _record_race_end(record: bool) -> dict:
    """On a worker: ``record`` each block's slots as the race left them (``_slots_and_q_y``'s
    counts, into ``block_labels._race_end``) when the label path drops them
    (``block_labels._end_race``), or stop recording."""
    from ordmix_core.dask_engine import block_labels

    if not record:
        block_labels._end_race = block_labels.__dict__.pop("_held", block_labels._end_race)
        return {}
    end = block_labels._held = block_labels._end_race
    seen = block_labels._race_end = {}

    def end_race(b) -> None:
        for r, slots in b.states.items():
            q_y = sum(loc.omega is not None for loc in slots.values())
            seen[r] = (*seen.get(r, ()), (len(slots), q_y))
        end(b)
        assert b.states == {} and b.work is None  # the label path keeps none of the race's

    block_labels._end_race = end_race
    return {}


def _race_end() -> dict:
    from ordmix_core.dask_engine import block_labels

    return block_labels._race_end


def test_a_dropped_restart_keeps_its_states_q_y_and_its_history_without(client, ratings):
    """A restart the race drops (halving, the out-of-reach stop) keeps on the blocks its
    state's slot with its q(y) and its history's without (``block_slots.park_block``), as
    the in-memory engine keeps it, until the race is over (then the label path drops every
    slot: ``block_labels._end_race``); those still running at the end keep theirs."""
    client.run(_record_race_end, True)
    try:
        kw = dict(granularity="instance", n_restarts=6, random_state=3)
        model = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=2), ratings)
        per_worker = client.run(_race_end)
    finally:
        client.run(_record_race_end, False)
    table = model.restarts_
    dropped = table.index[table["dropped"]]
    assert len(dropped) >= 3 and (~table["dropped"]).any()
    for per_restart in per_worker.values():
        for r in dropped:
            for n_slots, q_y in per_restart[r]:
                assert n_slots <= 2 and q_y == 1, (r, n_slots, q_y)


def test_parquet_dataset_and_dask_frames(client, ratings, tmp_path):
    """A folder of Parquet files, real-valued + paper updates, items_ as a Dask DataFrame."""
    folder = tmp_path / "ratings"
    folder.mkdir()
    shuffled = ratings.sample(frac=1.0, random_state=0)  # row order must not matter
    for i, rows in enumerate(np.array_split(np.arange(len(shuffled)), 3)):
        shuffled.iloc[rows].rename(columns={"annotator": "worker", "instance": "task"}).to_parquet(
            folder / f"part-{i}.parquet"
        )
    kw = dict(
        granularity="query", ordinal=False, updates="paper", n_restarts=2, random_state=5
    )  # fmt: skip
    mem = quiet_fit(in_memory(**kw), ratings)
    dsk = DaskOrdinalMixture(**kw, scheduler=client, n_partitions=4, max_local_items=0)
    quiet_fit(dsk, str(folder))
    assert not isinstance(dsk.items_, pd.DataFrame)  # a Dask DataFrame, one part per block
    assert dsk.items_.npartitions == 4
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)
    out = tmp_path / "out"
    out.mkdir()
    write_outputs(dsk, out, settings={})
    assert (out / "items.csv").exists() is False and (out / "summary.json").exists()
    parts = sorted((out / "items").glob("part-*.csv"))
    assert len(parts) == 4
    items = pd.concat([pd.read_csv(p, dtype={"instance": str, "query": str}) for p in parts])
    items = items.set_index("instance").sort_index()
    # the model's columns, then the decision columns, computed in each partition
    mem_items = outputs.items_table(mem).set_index("instance")
    assert list(items.columns) == list(mem_items.columns)
    assert items["truth_weight"].notna().all()  # each block's q(y), summed per item
    assert (items["label"] == mem_items["label"]).all()
    pd.testing.assert_frame_equal(
        items.drop(columns="label"), mem_items.drop(columns="label"), rtol=EST_RTOL,
        atol=EST_ATOL, check_names=False,
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())["decisions"]
    assert summary == json.loads(json.dumps(outputs.summary(mem, {})["decisions"]))


def test_inferred_scale_with_an_outlier_is_refused_as_in_memory(client, ratings, tmp_path):
    """A stray 99 among 1..5 (a "no answer" code) spread over blocks: both engines refuse the
    inferred scale with the same words (the Dask blocks are shuffled: counts, no rows); a
    given scale that holds it is fitted; text ratings are parsed as in memory (" 3.0" is 3)."""
    from ordmix_core.data.crowd import prepare
    from ordmix_core.errors import InputError

    bad = ratings.copy()
    bad["rating"] = bad["rating"].astype(str)
    bad.loc[bad.index[:3], "rating"] = ["99", "99.0", " 3.0"]
    with pytest.raises(InputError) as mem_err:
        prepare(bad, source="ratings")
    path = tmp_path / "r.csv"
    bad.to_csv(path, index=False)
    dsk = DaskOrdinalMixture(granularity="global", n_restarts=1, max_iter=2, scheduler=client)
    with pytest.raises(InputError) as dsk_err:
        quiet_fit(dsk, str(path))
    msg = str(dsk_err.value)
    assert msg.startswith(f"{path}: rating 99 (2 rating(s)) lies far outside the other ratings")
    # the same sentence as in memory, less the rows that a shuffled block cannot name
    assert msg.split(" far outside ", 1)[1] == str(mem_err.value).split(" far outside ", 1)[1]
    scale = list(range(1, 6)) + [99]
    dsk = quiet_fit(DaskOrdinalMixture(**{**dsk.get_params(), "scale": scale}), str(path))
    mem = OrdinalMixture(granularity="global", n_restarts=1, max_iter=2, scale=scale)
    quiet_fit(mem, bad)
    assert dsk.data_.scale.values.tolist() == mem.data_.scale.values.tolist() == scale


def test_combined_summaries_count_each_rating_value_once():
    """``combine_summaries`` merges the blocks' distinct values and adds their counts (-0.0
    and 0.0 are one value, as in memory)."""

    def part(values, counts):
        return {
            "ann": pd.Series([1], index=["a"]), "values": np.array(values, dtype=float),
            "value_counts": np.array(counts), "query_min": None, "n_ratings": sum(counts),
            "n_instances": 1, "worker": None,
        }  # fmt: skip

    got = block_loading.combine_summaries(
        part([-0.0, 2, 5], [1, 2, 3]), part([0.0, 5, 7], [4, 5, 6])
    )
    assert got["values"].tolist() == [0, 2, 5, 7]
    assert got["value_counts"].tolist() == [5, 2, 8, 6]


def test_partitioned_items_at_instance_granularity_get_their_decisions(client, ratings, tmp_path):
    """Items and categories both partitioned (instance granularity, above max_local_items):
    each partition's decision columns come from its own block's categories."""
    kw = dict(granularity="instance", n_restarts=1, random_state=3)
    mem = quiet_fit(in_memory(**kw), ratings)
    dsk = DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3, max_local_items=0)
    quiet_fit(dsk, ratings)
    assert not isinstance(dsk.categories_, pd.DataFrame)
    out = tmp_path / "out"
    out.mkdir()
    write_outputs(dsk, out, settings={})
    parts = sorted((out / "items").glob("part-*.csv"))
    items = pd.concat([pd.read_csv(p, dtype={"instance": str, "query": str}) for p in parts])
    items = items.set_index("instance").sort_index()
    want = outputs.items_table(mem).set_index("instance")
    assert list(items.columns) == list(want.columns)
    pd.testing.assert_frame_equal(
        items, want, rtol=EST_RTOL, atol=EST_ATOL, check_names=False
    )  # fmt: skip


@pytest.mark.parametrize("stop_at", [25, 80])
def test_progress_and_stop_as_in_memory(client, ratings, stop_at):
    """The callback sees the same (restart, iteration, F) and a stop keeps the same result,
    in the warm-up (25) or in the stage with uniform spam (80, its 10th sweep: the items'
    truth weight reads that stage's q(y), which the blocks keep)."""

    def recorder(calls):
        def cb(restart, iteration, f):
            calls.append((restart, iteration, f))
            return len(calls) < stop_at

        return cb

    kw = dict(granularity="global", n_restarts=2, random_state=1)
    calls_mem, calls_dsk = [], []
    mem = quiet_fit(in_memory(**kw, n_jobs=1), ratings, callback=recorder(calls_mem))
    dsk = DaskOrdinalMixture(**kw, scheduler=client, n_partitions=2)
    quiet_fit(dsk, ratings, callback=recorder(calls_dsk))
    assert [c[:2] for c in calls_dsk] == [c[:2] for c in calls_mem]
    np.testing.assert_allclose([c[2] for c in calls_dsk], [c[2] for c in calls_mem], rtol=RTOL)
    assert dsk.interrupted_ and mem.interrupted_
    assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


def test_cli_engine_dask_writes_the_same_files(client, ratings, tmp_path, capsys):
    """``ordmix fit --engine dask`` and ``ordmix fit``: the same files with the same values."""
    path = tmp_path / "r.csv"
    ratings.to_csv(path, index=False)
    common = ["--restarts", "2", "--seed", "4", "--granularity", "query", "--quiet"]
    assert main(["fit", str(path), "--out", str(tmp_path / "mem"), *common]) == 0
    args = ["fit", str(path), "--out", str(tmp_path / "dsk"), *common, "--engine", "dask"]
    assert main([*args, "--scheduler", client.scheduler.address]) == 0
    assert_same_folders(tmp_path / "mem", tmp_path / "dsk")
    trace = pd.read_csv(tmp_path / "dsk" / "trace.csv")
    # SQUAREM sweeps included (the default model's mixture: stage uniform, then mixture)
    assert trace["stage"].isin(["uniform", "mixture"]).sum() > 5
    summary = json.loads((tmp_path / "dsk" / "summary.json").read_text())
    assert summary["n_ratings"] == len(ratings) and summary["settings"]["engine"] == "dask"
    # the agreement, computed on the blocks: the crowd's figure and every annotator's
    annotators = pd.read_csv(tmp_path / "dsk" / "annotators.csv")
    assert annotators[decision_columns.AGREEMENT_COLUMN].notna().all()
    assert summary["agreement"]["alpha"] is not None
    assert summary["decisions"]["annotators"]["unreliable"] > 0


IDS = {"instance": str, "annotator": str, "query": str, "category": str}


def assert_same_folders(mem, dsk, rtol: float = EST_RTOL, atol: float = EST_ATOL) -> None:
    """Two ``ordmix fit`` folders: the same files and columns, the same labels and flags of
    every item and annotator, ``p_level_*`` within ``LABEL_TOL``, the other numbers within
    ``rtol``/``atol`` (the bound's within ``RTOL``), the same winning restart and counts."""
    assert sorted(p.name for p in dsk.iterdir()) == sorted(p.name for p in mem.iterdir())
    for name in ("items", "annotators", "categories", "trace", "restarts"):
        got = pd.read_csv(dsk / f"{name}.csv", dtype=IDS)
        want = pd.read_csv(mem / f"{name}.csv", dtype=IDS)
        assert list(got.columns) == list(want.columns), name
        for col in ("label", "flag", "unstable"):
            if col in want:
                assert (got[col] == want[col]).all(), (name, col)
        if name == "items":
            levels = [c for c in want.columns if c.startswith("p_level_")]
            np.testing.assert_allclose(got[levels], want[levels], rtol=0, atol=LABEL_TOL)
        tol = (RTOL, 1e-12) if name in ("trace", "restarts") else (rtol, atol)
        spread = {"items": "estimate", "annotators": "reliability"}.get(name)
        if spread is not None:  # the ensemble's spreads: differences of two values
            ref = want.assign(reliability=want["eps"]) if name == "annotators" else want
            np.testing.assert_allclose(
                got[f"{spread}_spread"], want[f"{spread}_spread"], rtol=0,
                atol=spread_tol(ref[spread], *tol),
            )  # fmt: skip
            got, want = got.drop(columns=f"{spread}_spread"), want.drop(columns=f"{spread}_spread")
        pd.testing.assert_frame_equal(got, want, rtol=tol[0], atol=tol[1], obj=name)
    summary = json.loads((dsk / "summary.json").read_text())
    want = json.loads((mem / "summary.json").read_text())
    assert set(summary) == set(want)
    for key in ("winning_restart", "iterations", "decisions", "warnings", "n_ratings", "agreement"):
        assert summary[key] == want[key], key
    assert summary["model_choice"]["labels"].keys() == want["model_choice"]["labels"].keys()


def test_cli_named_levels_and_their_gold_as_in_memory(client, ratings, tmp_path):
    """A scale of named levels (``--scale``, lowest first) with gold given as names: both
    engines read the names and write the same folders, labels, intervals and
    ``p_level_<name>`` columns in the names."""
    names = ["none", "low", "mid", "high", "top"]
    by_value = dict(zip([1.0, 2.0, 3.0, 4.0, 5.0], names, strict=True))
    path, gold = tmp_path / "r.csv", tmp_path / "gold.csv"
    ratings.assign(rating=ratings["rating"].map(by_value)).to_csv(path, index=False)
    firsts = ratings.groupby("instance")["rating"].first().iloc[::8]
    firsts.map(by_value).rename("truth").rename_axis("instance").to_csv(gold)
    common = ["--restarts", "2", "--seed", "4", "--quiet", "--scale", ",".join(names)]
    common += ["--gold", str(gold)]
    assert main(["fit", str(path), "--out", str(tmp_path / "mem"), *common]) == 0
    args = ["fit", str(path), "--out", str(tmp_path / "dsk"), *common, "--engine", "dask"]
    assert main([*args, "--scheduler", client.scheduler.address]) == 0
    assert_same_folders(tmp_path / "mem", tmp_path / "dsk")
    items = pd.read_csv(tmp_path / "dsk" / "items.csv")
    assert [c for c in items.columns if c.startswith("p_level_")] == [f"p_level_{n}" for n in names]
    assert items["label"].isin(names).all() and items["lower_90"].isin(names).all()
    # the gold items' truth read as their names' values: their labels are the names given
    gold_items = items.set_index("instance").loc[firsts.index.astype(str)]
    assert (gold_items["label"] == firsts.map(by_value).to_numpy()).all()


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


def test_gold_as_in_memory(client):
    """Gold items on the blocks: their truth in the continuous fit, their own reading
    (``crowd_estimate``), the expert in the label fit and the temperature gold teaches; items
    gathered and left on the cluster."""
    crowd = simulate_crowd(
        n_items=240, n_annotators=20, ratings_per_item=5, n_queries=6, spammer_share=0.3,
        random_state=11,
    )  # fmt: skip
    gold = crowd.gold.iloc[::6]
    kw = dict(granularity="query", n_restarts=3, random_state=3)
    mem = quiet_fit(in_memory(**kw), crowd.ratings, gold=gold)
    assert mem.model_["n_gold"] == 40 and mem.items_["crowd_estimate"].notna().sum() == 40
    for local in (2_000_000, 0):
        dsk = DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3, max_local_items=local)
        quiet_fit(dsk, crowd.ratings, gold=gold)
        assert dsk.model_["n_gold"] == 40
        assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)
    with pytest.raises(InputError, match="none of the gold instances"):
        quiet_fit(dsk, crowd.ratings, gold=pd.Series([3.0], index=["nobody"]))


def test_warm_start_as_in_memory(client, ratings):
    """A refit from an earlier fit (a model, and its folder): the same starts (the previous
    posteriors on the blocks and the client), race and answer."""
    earlier = ratings.sample(frac=0.8, random_state=1)
    for granularity in ("instance", "query"):
        prev = quiet_fit(in_memory(granularity=granularity, n_restarts=3, random_state=3), earlier)
        kw = dict(granularity=granularity, n_restarts=3, random_state=4, init_from=prev)
        mem = quiet_fit(in_memory(**kw), ratings)
        assert mem.restarts_["init"].tolist()[0] == "previous"
        dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), ratings)
        assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


def test_a_scale_of_many_levels_and_the_papers_labels_as_in_memory(client, ratings):
    """A 0..20 scale, a fine one (the continuous model in tenths of its range with open ends,
    its posterior as the labels and their estimates; with ``labels="confusion"`` the label
    fit on 11 classes, spread back over the levels by the ratings) and the paper's model (the
    continuous posterior's labels): as in memory."""
    wide = ratings.assign(rating=(ratings["rating"] - 1) * 5)
    for data, kw in (
        (wide, dict(n_restarts=2, random_state=3, scale=list(range(21)))),
        (wide, dict(n_restarts=2, random_state=3, scale=list(range(21)), labels="confusion")),
        (ratings, dict(n_restarts=2, random_state=3, model="paper")),
    ):
        mem = quiet_fit(in_memory(**kw), data)
        dsk = quiet_fit(DaskOrdinalMixture(**kw, scheduler=client, n_partitions=3), data)
        assert_same_fit(mem, dsk, EST_RTOL, EST_ATOL)


def _fit_stopped_at_tenth_sweep(ratings, tmp_path, monkeypatch, pick, act) -> tuple:
    """``ordmix fit --engine dask`` of ``ratings`` on a local cluster of its own (2 workers),
    in a thread; at the fit's tenth progress line ``act(client, victim)`` is done to the
    worker ``pick(client)`` chose. Returns ``(victim, exit codes, progress lines, out
    folder)``; fails if the fit is still running 120 s later (waiting forever)."""
    import logging
    import threading

    from ordmix_core.cli import main as cli_main

    path = tmp_path / "r.csv"
    ratings.to_csv(path, index=False)
    out = tmp_path / "out"
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as c,
    ):  # fmt: skip
        victim = pick(c)
        sweeps = []

        class ActAtTenthSweep(cli_main.Progress):
            def __call__(self, restart, iteration, bound):
                sweeps.append(restart)
                if len(sweeps) == 10:
                    act(c, victim)
                return super().__call__(restart, iteration, bound)

        monkeypatch.setattr(cli_main, "Progress", ActAtTenthSweep)
        args = ["fit", str(path), "--out", str(out), "--engine", "dask", "--quiet"]
        args += ["--scheduler", c.scheduler.address, "--restarts", "2"]
        code = []  # in a thread: a fit waiting for a lost worker would wait forever
        fit = threading.Thread(target=lambda: code.append(main(args)), daemon=True)
        fit.start()
        fit.join(timeout=120)
        assert not fit.is_alive(), "the fit still waits for the lost or paused worker"
    return victim, code, sweeps, out


def test_a_worker_killed_mid_fit_stops_with_one_line(ratings, tmp_path, capsys, monkeypatch):
    """A worker killed in the middle of a fit (a cluster of its own: its nanny starts a new
    worker, without the blocks): the fit stops at once, ``ordmix fit`` prints one
    ``ordmix: error:`` line naming the worker, exits 2 and leaves no output folder."""
    import os
    import signal

    pids = {}

    def pick(c):
        victim, pid = next(iter(c.run(os.getpid).items()))
        pids[victim] = pid
        return victim

    victim, code, sweeps, out = _fit_stopped_at_tenth_sweep(
        ratings, tmp_path, monkeypatch, pick, lambda c, w: os.kill(pids[w], signal.SIGKILL)
    )
    assert code == [2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"ordmix: error: the Dask worker {victim} left the cluster")
    assert len(sweeps) < 40  # stopped at once, not after the fit
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


def _pause(dask_worker) -> None:
    """On a worker: a pause threshold its memory is past already; Dask's memory monitor then
    pauses it (and keeps it paused) within a tick."""
    dask_worker.memory_manager.memory_pause_fraction = 1e-6


def test_a_worker_paused_mid_fit_stops_with_one_line(ratings, tmp_path, capsys, monkeypatch):
    """A worker Dask pauses in the middle of a fit (its memory past the pause threshold; the
    blocks are not Dask's to spill) would leave its blocks' tasks waiting forever: the fit
    stops at once with one ``ordmix: error:`` line naming it, and writes nothing."""
    victim, code, sweeps, out = _fit_stopped_at_tenth_sweep(
        ratings, tmp_path, monkeypatch,
        lambda c: sorted(c.scheduler_info()["workers"])[0],
        lambda c, w: c.run(_pause, workers=[w]),
    )  # fmt: skip
    assert code == [2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"ordmix: error: the Dask worker {victim} paused during the fit")
    assert len(sweeps) < 40
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


def test_the_local_cluster_neither_spills_nor_pauses(ratings):
    """The local cluster's workers hold the blocks outside Dask's memory manager: no spilling
    (nothing to spill) and no pause (it would stall the fit); the nanny's end of a worker past
    95% of its limit stays (the fit then stops with one line). Their allocator reuses a
    block's per-rating arrays (``WORKER_MALLOC``), and Dask's other settings for a new worker
    stay."""
    import dask

    from ordmix_core.dask_engine.cluster import WORKER_MALLOC

    model = DaskOrdinalMixture(n_workers=1, memory_limit="1GiB")
    client, owned = model._connect()
    names = [*WORKER_MALLOC, "OMP_NUM_THREADS"]
    try:
        got = client.run(
            lambda: [dask.config.get(f"distributed.worker.memory.{k}") for k in
                     ("target", "spill", "pause", "terminate")]
        )  # fmt: skip
        env = client.run(lambda: [os.environ.get(n) for n in names])
    finally:
        client.close()
        client.cluster.close()
    assert owned and list(got.values()) == [[False, False, False, 0.95]]
    assert list(env.values()) == [[str(v) for v in WORKER_MALLOC.values()] + ["1"]]


def test_the_watch_asks_the_scheduler_not_the_clients_cache(client, ratings, monkeypatch):
    """The client's cached identity (``scheduler_info()``) may list no workers at any moment
    (its periodic refresh asks for none): the watch must not read every worker as gone."""
    from distributed import Client as DaskClient

    def cached(self, *args, **kwargs):
        return {"workers": {}}

    monkeypatch.setattr(DaskClient, "scheduler_info", cached)
    seen = []
    model = DaskOrdinalMixture(n_restarts=2, random_state=3, scheduler=client, n_partitions=2)
    quiet_fit(model, ratings, callback=lambda r, i, f: seen.append(time.perf_counter()))
    assert seen[-1] - seen[0] > 2 * client_watch_seconds()  # the watch looked, more than once
    assert model.converged_


def client_watch_seconds() -> float:
    from ordmix_core.dask_engine import block_tasks

    return block_tasks.WATCH_SECONDS
