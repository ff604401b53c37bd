"""Mutation testing of one engine module with mutmut 3, in a scratch copy of the repository.

Usage (from the repository root; mutmut is not a project dependency: ``pip install mutmut``):

    python tests/mutation/run_mutmut.py MODULE [--max-children N] [--keep]

``MODULE`` is a key of ``MODULES`` (tn, updates, bound, options, outputs, posterior,
calibration, choose, confusion, shift, evidence, reliability, install). The script copies
``ordmix_core/``, ``tests/``, ``demo_data/`` and ``pyproject.toml`` to
``/tmp/ordmix-mutmut/MODULE`` (so no ``mutants/`` folder or config ever lands in the
repository), appends a ``[tool.mutmut]`` section that mutates only that module and runs only
its tests, runs ``mutmut run`` there and prints the per-status counts and the survivors
(``mutmut results``). ``--keep`` reuses the scratch folder (mutmut resumes where it stopped).
``--recheck [--only TEST ...]``, after adding tests for the survivors: copies ``tests/`` into
the scratch folder again and re-runs each mutant the last run left alive in a fresh process
(with ``--only``, just the new tests: the others already ran against every mutant; a mutant
mutmut timed out or called suspicious gets the module's tests and the new ones). A re-run
counts as killing its mutant when a test fails or the process dies of a signal (a compiled
kernel given arrays of the wrong shape aborts).
Run with ``--max-children 1`` on a shared machine; a module then takes 2-40 minutes.

Inspect a survivor in the scratch folder: ``cd /tmp/ordmix-mutmut/MODULE && mutmut show NAME``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = Path("/tmp/ordmix-mutmut")

#: seconds a re-run of one mutant's tests may take; beyond it the mutant counts as killed
RERUN_TIMEOUT = 300

#: module -> (file to mutate, the tests that guard it: fast, targeted)
MODULES: dict[str, tuple[str, list[str]]] = {
    "tn": ("ordmix_core/numerics/truncnorm.py", ["tests/numerics/test_truncnorm.py",
    "tests/vb/test_kernels.py"]),
    "updates": (
        "ordmix_core/vb/updates.py",
        ["tests/vb/test_updates.py", "tests/vb/test_updates_reference.py",
         "tests/vb/test_bound_independent.py::test_sweeps_from_arbitrary_states",
         "tests/vb/test_sweep.py::test_bound_never_decreases_with_exact_updates",
         "tests/vb/test_sweep.py::test_fused_sweep_equals_numpy_reference",
         "tests/estimators/test_extensions.py::test_fused_equals_reference_and_bound_monotone",
         "tests/estimators/test_extensions.py::test_paper_problem_sweeps_as_before",
         "tests/estimators/test_extensions.py::test_learned_spam_distribution_updates_are_maximisers",
         "tests/estimators/test_extensions.py::test_gold_items_are_known_and_marked"],
    ),
    "bound": (
        "ordmix_core/vb/bound.py",
        ["tests/vb/test_bound_independent.py::test_sweeps_from_arbitrary_states",
         "tests/vb/test_bound_independent.py::test_fit_reports_the_reference_bound",
         "tests/estimators/test_extensions.py::test_fused_equals_reference_and_bound_monotone",
         "tests/estimators/test_extensions.py::test_bias_terms_equal_an_independent_computation",
         "tests/estimators/test_extensions.py::test_dirichlet_terms_equal_an_independent_computation",
         "tests/estimators/test_extensions.py::test_gold_instance_terms_are_the_log_prior_density",
         # the fused-vs-reference check's 12 sweeps too (the default run's are 4)
         "-m", "slow or not slow"],
    ),
    "options": ("ordmix_core/estimators/options.py", ["tests/estimators/test_options.py"]),
    "posterior": ("ordmix_core/labels/posterior.py", ["tests/labels/test_posterior.py"]),
    "calibration": (
        "ordmix_core/labels/calibration.py",
        ["tests/labels/test_calibration.py", "tests/labels/test_choose.py"],
    ),
    "choose": (
        "ordmix_core/labels/choose.py",
        ["tests/labels/test_choose.py", "tests/estimators/test_one_posterior.py"],
    ),
    "confusion": (
        "ordmix_core/labels/confusion_model.py",
        ["tests/labels/test_confusion_model.py", "tests/labels/test_confusion_passes.py",
         "tests/labels/test_confusion_steps.py"],
    ),
    "shift": (
        "ordmix_core/labels/confusion_shift.py",
        ["tests/labels/test_confusion_shift.py", "tests/labels/test_confusion_model.py"],
    ),
    "evidence": (
        "ordmix_core/results/evidence.py", ["tests/results/test_decisions.py", "-m", "not slow"]
    ),
    "reliability": (
        "ordmix_core/results/reliability.py",
        ["tests/results/test_decisions.py", "tests/results/test_passes.py",
         "tests/results/test_reliability.py", "-m", "not slow"],
    ),
    "install": (
        "ordmix_core/estimators/compile_install.py",
        ["tests/estimators/test_compile_install.py", "-m", "not slow"],
    ),
    # "-m not slow": the TREC fit through the CLI (6 s) adds nothing the other tests miss
    "outputs": (
        "ordmix_core/results/outputs.py", ["tests/results/test_outputs.py", "-m", "not slow"]
    ),
}  # fmt: skip


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{x}"' for x in items) + "]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", choices=sorted(MODULES))
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="reuse the scratch copy (resume)")
    ap.add_argument(
        "--recheck",
        action="store_true",
        help="after adding tests: copy tests/ into the existing scratch copy and re-run only "
        "the mutants the last run did not kill, each in a fresh process",
    )
    ap.add_argument(
        "--only",
        action="append",
        metavar="TEST",
        help="with --recheck: run only this test (repeatable), e.g. the ones added since the "
        "run; the others already ran against every mutant",
    )
    ap.add_argument(
        "--mutants",
        nargs="+",
        metavar="PATTERN",
        help="only these mutants (fnmatch patterns such as "
        "'ordmix_core.vb.updates.x_update_bias__*'); the scores count only them",
    )
    args = ap.parse_args()
    args.keep = args.keep or args.recheck
    target, tests = MODULES[args.module]
    work = SCRATCH / args.module
    if work.exists() and not args.keep:
        shutil.rmtree(work)
    if not work.exists():
        work.mkdir(parents=True)
        ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", ".hypothesis")
        for d in ("ordmix_core", "tests", "demo_data"):  # demo_data: test_outputs' fits
            shutil.copytree(ROOT / d, work / d, ignore=ignore)
        config = (ROOT / "pyproject.toml").read_text()
        config += (
            "\n[tool.mutmut]\n"
            'source_paths = ["ordmix_core"]\n'
            'also_copy = ["demo_data"]\n'
            f"only_mutate = {_toml_list([target])}\n"
            f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        )
        (work / "pyproject.toml").write_text(config)
    env = dict(os.environ, PYTHONPATH=str(work))
    env.pop("CI", None)  # a skip inside a mutant run is not a CI failure
    if args.recheck:  # the tests as they are now; the mutants and their results as they were
        ignore = shutil.ignore_patterns("__pycache__", ".hypothesis")
        for dest in (work / "tests", work / "mutants" / "tests"):
            shutil.rmtree(dest)
            shutil.copytree(ROOT / "tests", dest, ignore=ignore)
        run = subprocess.CompletedProcess([], 0)
    else:
        run = subprocess.run(
            ["mutmut", "run", "--max-children", str(args.max_children), *(args.mutants or [])],
            cwd=work,
            env=env,
        )
    if run.returncode != 0:  # e.g. the clean run of the tests failed: nothing was measured
        print(f"mutmut run failed (exit {run.returncode}); see its output above")
        return run.returncode
    res = subprocess.run(
        ["mutmut", "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True
    )
    statuses = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(\S+): (.+)$", line)
        if m:
            statuses[m.group(1)] = m.group(2).strip()
    if args.mutants:
        statuses = {
            n: st for n, st in statuses.items() if any(fnmatch(n, pat) for pat in args.mutants)
        }
    counts = collections.Counter(statuses.values())
    if counts["not checked"]:
        print(f"mutmut left {counts['not checked']} mutants not checked: rerun with --keep")
        return 1
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"\nmutmut: {args.module} ({target}): {summary}")
    # mutmut calls a mutant "suspicious" when its forked test run ends with an unexpected exit
    # code; here that happened to mutants whose tests pass. Re-run every such mutant (any
    # status but killed, survived and no tests) in a fresh process, and count it as killed
    # only if the tests fail.
    # "survived" and "no tests" need no second opinion: they count as not killed.
    # With --recheck every mutant not killed is unclear: the tests have changed since.
    alive = () if args.recheck else ("survived", "no tests")
    unclear = [n for n, st in statuses.items() if st != "killed" and st not in alive]
    survived = [n for n, st in statuses.items() if st in alive]
    for name in unclear:
        # --only: new tests for mutants the full selection let live; a timeout or a
        # "suspicious" one gets the full selection, and the --only tests beside it (they may
        # lie outside it)
        only = args.recheck and args.only and statuses[name] in ("survived", "no tests")
        rerun = args.only if only else [*tests, *(args.only or [])]
        env_m = dict(env, MUTANT_UNDER_TEST=name, PYTHONPATH=str(work / "mutants"))
        cmd = [sys.executable, "-m", "pytest", *rerun, "-x", "-q", "-p", "no:cacheprovider"]
        try:
            rc = subprocess.run(
                cmd, cwd=work / "mutants", env=env_m, capture_output=True, timeout=RERUN_TIMEOUT
            ).returncode
        except subprocess.TimeoutExpired:  # a mutant that makes the tests hang: found, as
            rc = 1  # mutmut counts its own timeouts
        # failed tests (1) or a process the mutant crashed (killed by a signal: a compiled
        # kernel reading out of bounds aborts); 0 is a pass, 2-5 pytest's own trouble
        if rc != 1 and rc >= 0:
            survived.append(name)
    killed = len(statuses) - len(survived)
    share = 100 * killed / max(len(statuses), 1)
    print(
        f"after re-running {len(unclear)} unclear mutants: killed {killed}, "
        f"survived {len(survived)} of {len(statuses)} ({share:.1f}%)"
    )
    for name in survived:
        print("SURVIVED", name)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
