"""Output paths: never delete what ordmix did not write; refuse before any compute."""

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from _cli_helpers import NOBODY, as_user, read_only_dir, run_cli, run_unprivileged, shared_dir

import ordmix_core.evaluation.experiments  # noqa: F401 - imported before no_compute patches its import
from ordmix_core import InputError
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.results.output_paths import (
    FIT_FILES,
    check_input_file,
    check_output_dir,
    check_output_file,
    safe_output_dir,
)

#: a fit of ``crowd_files`` cut short (it takes ~475 sweeps to converge): these tests are about
#: where the files go, not what is in them
QUICK = ["--restarts", "1", "--max-iter", "30"]


@pytest.fixture(scope="module")
def crowd_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("outpaths")
    crowd = simulate_crowd(40, 6, 3, random_state=2)
    crowd.ratings.to_csv(d / "r.csv", index=False)
    crowd.gold.to_csv(d / "gold.csv")
    return d


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def run(argv) -> tuple[int, list[str]]:
    return run_cli(argv)[:2]


def refused(argv, fragment: str, compute_spy=None) -> str:
    rc, err = run(argv)
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("ordmix: error: "), err
    assert fragment in err[0], err[0]
    return err[0]


@pytest.fixture
def no_compute(monkeypatch):
    """Fails the test if any fit starts: the refusals come before any compute."""

    def boom(*a, **k):
        raise AssertionError("a fit started before the output path was checked")

    monkeypatch.setattr("ordmix_core.estimators.ordinal_mixture.OrdinalMixture.fit", boom)
    monkeypatch.setattr("ordmix_core.evaluation.compare.compare_methods", boom)
    monkeypatch.setattr("ordmix_core.evaluation.experiments.compare_methods", boom)


# --------------------------------------------------------------------------- data loss
def test_out_holding_the_input_and_other_files_refused_and_nothing_deleted(
    crowd_files, tmp_path, monkeypatch, no_compute
):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(crowd_files / "r.csv", data / "r.csv")
    (data / "notes.txt").write_text("my notes")
    before = snapshot(tmp_path)
    msg = refused(["fit", data / "r.csv", "--out", data], "holds the ratings file")
    assert "never overwrites its input" in msg
    # a folder holding only someone else's file
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    before = snapshot(tmp_path)
    msg = refused(["fit", crowd_files / "r.csv", "--out", other], "holds files ordmix did not")
    assert "(notes.txt)" in msg
    # the input file itself, and the input's folder from inside it
    refused(["fit", data / "r.csv", "--out", data / "r.csv"], "is the ratings file itself")
    monkeypatch.chdir(data)
    refused(["fit", "r.csv", "--out", "."], "is the current folder")
    refused(["fit", "r.csv", "--out", ".."], "is the current folder (or holds it)")
    refused(["fit", "r.csv", "--out", ""], "--out is empty")
    assert snapshot(tmp_path) == before


def test_previous_output_with_a_foreign_file_refused(crowd_files, tmp_path):
    out = tmp_path / "out"
    assert run(["fit", crowd_files / "r.csv", "--out", out, *QUICK])[0] == 0
    assert sorted(os.listdir(out)) == sorted(FIT_FILES)
    assert "ordmix_version" in json.loads((out / "summary.json").read_text())
    # a second run replaces an ordmix output ...
    assert run(["fit", crowd_files / "r.csv", "--out", out, *QUICK])[0] == 0
    # ... but not once someone put their own file in it
    (out / "my-analysis.xlsx").write_text("precious")
    before = snapshot(tmp_path)
    refused(["fit", crowd_files / "r.csv", "--out", out], "(my-analysis.xlsx)")
    assert snapshot(tmp_path) == before
    # an ordmix-looking folder without ordmix's summary is someone else's
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "items.csv").write_text("instance,estimate\n")
    (fake / "summary.json").write_text('{"version": 1}')
    refused(["fit", crowd_files / "r.csv", "--out", fake], "holds files ordmix did not write")
    # and an output inside an earlier output would be deleted by the next run into that
    (out / "my-analysis.xlsx").unlink()
    refused(["fit", crowd_files / "r.csv", "--out", out / "sub"], "is inside the earlier ordmix")


def test_compare_out_refusals(crowd_files, tmp_path, no_compute):
    r, g = crowd_files / "r.csv", crowd_files / "gold.csv"
    before = snapshot(crowd_files)
    base = ["compare", r, "--gold", g, "--out"]
    refused([*base, r], "is the ratings file itself")
    refused([*base, g], "is the gold file itself")
    refused([*base, tmp_path], "is a folder; give a file name for the table")
    refused([*base, ""], "--out is empty")
    notes = tmp_path / "notes.csv"
    notes.write_text("a,b\n1,2\n")
    refused([*base, notes], "exists and is not a table ordmix compare wrote")
    assert notes.read_text() == "a,b\n1,2\n"
    assert snapshot(crowd_files) == before


def test_next_refuses_its_input_other_files_and_a_fit_folders_inside(
    crowd_files, tmp_path, no_compute
):
    """``ordmix next`` writes by the same rule as ``compare``: a new path, or an earlier output of
    the same kind; never an input, never someone else's file, never inside a fit folder."""
    r = tmp_path / "r.csv"
    shutil.copy(crowd_files / "r.csv", r)
    notes = tmp_path / "notes.csv"
    notes.write_text("a,b\n1,2\n")
    fit = tmp_path / "fit"
    fit.mkdir()
    (fit / "summary.json").write_text('{"ordmix_version": "0"}')
    before = snapshot(tmp_path)
    refused(["next", r, "--out", r], "is the ratings file itself")
    refused(["next", r, "--out", tmp_path / "n.csv", "--review", r], "is the ratings file itself")
    refused(["next", r, "--out", notes], "exists and is not a batch ordmix next wrote")
    refused(
        ["next", r, "--out", tmp_path / "n.csv", "--review", notes],
        "is not a review list ordmix next --review wrote",
    )
    refused(["next", fit, "--out", fit / "next.csv"], "is inside the fit folder")
    refused(["next", r, "--out", tmp_path], "is a folder; give a file name")
    refused(["next", r, "--out", ""], "--out is empty")
    assert snapshot(tmp_path) == before


def test_next_replaces_its_own_batch_and_review(crowd_files, tmp_path):
    n, v = tmp_path / "n.csv", tmp_path / "v.csv"
    argv = ["next", crowd_files / "r.csv", "--quiet", *QUICK]
    assert run([*argv, "--out", n, "--review", v])[0] == 0
    assert run([*argv, "--out", n, "--review", v, "--batch", "3"])[0] == 0
    assert len(n.read_text().splitlines()) == 4  # the header and the new batch of three
    refused([*argv, "--out", v], "is not a batch ordmix next wrote")  # the other kind


def test_compare_overwrites_its_own_table(crowd_files, tmp_path):
    t = tmp_path / "deep" / "t.csv"  # missing parents are created
    argv = ["compare", crowd_files / "r.csv", "--gold", crowd_files / "gold.csv", "--out", t]
    assert run([*argv, "--methods", "mean"])[0] == 0
    assert run([*argv, "--methods", "median"])[0] == 0
    assert t.read_text().splitlines()[1].startswith("median,")


def test_experiment_out_refused_when_it_holds_other_files(crowd_files, tmp_path, no_compute):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "results.csv").write_text("mine")
    refused(
        ["experiment", "spam", crowd_files / "r.csv", "--gold", crowd_files / "gold.csv"]
        + ["--out", out, "--methods", "mean", "--levels", "0"],
        "holds files ordmix did not write (results.csv)",
    )
    assert (out / "results.csv").read_text() == "mine"


def test_experiment_output_is_recognised_and_replaced(crowd_files, tmp_path):
    out = tmp_path / "exp"
    argv = ["experiment", "spam", crowd_files / "r.csv", "--gold", crowd_files / "gold.csv"]
    argv += ["--out", out, "--methods", "mean", "--levels", "0,1"]
    assert run(argv)[0] == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"] == [0, 1] and summary["methods"] == ["mean"]
    assert run(argv)[0] == 0


def test_interrupted_run_keeps_the_previous_output(crowd_files, tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert run(["fit", crowd_files / "r.csv", "--out", out, *QUICK])[0] == 0
    before = snapshot(out)

    def fail(*a, **k):
        raise InputError("the disk is full")

    # cmd_fit imports the writer from outputs when it writes: patch it there
    monkeypatch.setattr("ordmix_core.results.outputs.write_fit_outputs", fail)
    rc, err = run(["fit", crowd_files / "r.csv", "--out", out, *QUICK, "--quiet"])
    assert rc == 2 and err == ["ordmix: error: the disk is full"]
    assert snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary folder left behind


def test_safe_output_dir_checks_again_at_replacement(tmp_path):
    out = tmp_path / "out"
    with safe_output_dir(out) as d:
        (d / "summary.json").write_text('{"ordmix_version": "x"}')
    (out / "late.txt").write_text("written while ordmix ran")
    with pytest.raises(InputError, match=r"holds files ordmix did not write \(late.txt\)"):
        with safe_output_dir(out) as d:
            raise AssertionError("not reached: checked on entry")
    assert (out / "late.txt").exists()
    (out / "late.txt").unlink()
    with safe_output_dir(out) as d:
        (d / "summary.json").write_text('{"ordmix_version": "y"}')
    assert json.loads((out / "summary.json").read_text())["ordmix_version"] == "y"


def test_symlink_out_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(InputError, match="is a symbolic link"):
        check_output_dir(tmp_path / "link")


def test_out_under_a_file_refused(tmp_path):
    f = tmp_path / "f.csv"
    f.write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_output_dir(f / "sub")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_output_file(f / "t.csv")


# --------------------------------------------------------------------------- inputs
def test_fifo_input_refused_without_hanging(tmp_path, no_compute):
    fifo = tmp_path / "ratings.csv"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    msg = refused(["fit", fifo, "--out", tmp_path / "out"], "is a named pipe (FIFO)")
    assert "not a regular file" in msg and time.monotonic() - t0 < 10
    gold = tmp_path / "g.csv"
    gold.write_text("instance,truth\n")
    refused(["compare", gold, "--gold", fifo, "--out", tmp_path / "t.csv"], "named pipe")
    with pytest.raises(InputError, match="is a folder"):
        check_input_file(tmp_path)
    assert check_input_file(tmp_path, allow_dir=True) == tmp_path


def test_fifo_input_subprocess_exits_2_promptly(tmp_path):
    import subprocess
    import sys

    fifo = tmp_path / "r.csv"
    os.mkfifo(fifo)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ordmix_core.cli.main",
            "fit",
            str(fifo),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"ordmix: error: {fifo}: is a named pipe (FIFO), not a regular file; ordmix reads "
        "files only: save the data to a file first"
    ]


# --------------------------------------------------------------------------- permissions
@pytest.fixture(scope="module")
def perm_files():
    with shared_dir() as d:
        crowd = simulate_crowd(20, 4, 3, random_state=1)
        crowd.ratings.to_csv(d / "r.csv", index=False)
        crowd.gold.to_csv(d / "g.csv")
        os.chmod(d / "r.csv", 0o644)
        os.chmod(d / "g.csv", 0o644)
        yield d


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_read_only_and_missing_read_only_parent_refused_before_compute(perm_files, command):
    ro = read_only_dir(perm_files, f"ro-{command}")
    try:
        cases = [ro / "out", ro / "missing" / "deeper" / "out"]
        for out in cases:
            if command == "fit":
                argv = ["fit", perm_files / "r.csv", "--out", out]
            else:
                argv = ["compare", perm_files / "r.csv", "--gold", perm_files / "g.csv"]
                argv += ["--out", out.with_suffix(".csv"), "--methods", "mean"]
            rc, err = run_unprivileged(argv, perm_files)
            assert rc == 2 and len(err) == 1, err
            assert err[0].startswith("ordmix: error: ") and "is not writable" in err[0], err
        assert os.listdir(ro) == []
    finally:
        os.chmod(ro, 0o755)


def test_read_only_previous_output_refused(perm_files):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder another user owns")
    parent = perm_files / "rw"
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)  # nobody may write here, but not inside ``out``
    out = parent / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"ordmix_version": "0"}')
    os.chmod(out, 0o755)
    rc, err = as_user(NOBODY, ["fit", perm_files / "r.csv", "--out", out], perm_files)
    assert rc == 2 and len(err) == 1 and "is read-only" in err[0], err
    assert os.listdir(out) == ["summary.json"]


def test_other_users_output_in_a_sticky_folder_refused(perm_files):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder another user owns")
    sticky = perm_files / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    assert os.stat(sticky).st_mode & stat.S_ISVTX
    out = sticky / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"ordmix_version": "0"}')
    os.chmod(out, 0o777)  # writable by all, yet not renamable by nobody (sticky parent)
    rc, err = as_user(NOBODY, ["fit", perm_files / "r.csv", "--out", out], perm_files)
    assert rc == 2 and len(err) == 1, err
    assert "belongs to another user" in err[0] and "sticky bit" in err[0], err
    table = sticky / "t.csv"
    table.write_text("method,mse,correlation,ndcg,seconds,n_gold\n")
    os.chmod(table, 0o666)
    argv = ["compare", perm_files / "r.csv", "--gold", perm_files / "g.csv", "--out", table]
    rc, err = as_user(NOBODY, argv, perm_files)
    assert rc == 2 and len(err) == 1 and "belongs to another user" in err[0], err
    assert sorted(os.listdir(sticky)) == ["out", "t.csv"]
