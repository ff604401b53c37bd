"""compile_install: numba's kernels compiled at ``pip install -e .``, never failing the install."""

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from setuptools import Distribution
from setuptools.command.build_py import build_py

from ordmix_core.estimators import compile_install

ROOT = Path(__file__).resolve().parents[2]


def test_the_switch_at_0_compiles(monkeypatch):
    monkeypatch.setenv(compile_install.NO_INSTALL_COMPILE, "0")
    monkeypatch.setattr(compile_install, "CHILD_CODE", "pass")
    line = compile_install.compile_kernels(ROOT)
    # the child does nothing: its seconds are an interpreter's start, more under load
    assert re.match(r"ordmix: numba's kernels compiled into its cache in \d+ s", line)


def test_nothing_is_compiled_when_asked_not_to(monkeypatch):
    monkeypatch.setenv(compile_install.NO_INSTALL_COMPILE, "1")

    def no_child(*args, **kwargs):
        raise AssertionError("no child may start")

    monkeypatch.setattr(subprocess, "run", no_child)
    assert "no compile at install" in compile_install.compile_kernels(ROOT)


@pytest.mark.parametrize(
    ("code", "timeout", "said"),
    [
        ("import sys; sys.exit('no numba here')", 60, "(no numba here)"),
        ("import os; os._exit(3)", 60, "(no message)"),
        ("import time; time.sleep(30)", 0.5, "timed out after 0.5 seconds"),
    ],
)
def test_a_failed_compile_is_one_line_and_no_error(monkeypatch, code, timeout, said):
    monkeypatch.delenv(compile_install.NO_INSTALL_COMPILE, raising=False)
    monkeypatch.setattr(compile_install, "CHILD_CODE", code)
    line = compile_install.compile_kernels(ROOT, timeout=timeout)
    assert line.startswith("ordmix: numba's kernels not compiled at install")
    assert said in line and line.endswith("the first run will") and "\n" not in line


def test_the_childs_environment(monkeypatch, tmp_path):
    """The tree first on the path; behind it pip's build environment (set up through
    PYTHONPATH and PYTHONNOUSERSITE) or the installed one; no background compile besides."""
    monkeypatch.delenv("ORDMIX_NO_BACKGROUND_COMPILE", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    alone = compile_install.child_env(tmp_path, build_env=True)
    assert alone["PYTHONPATH"] == str(tmp_path)  # no build environment to keep
    monkeypatch.setenv("PYTHONPATH", "build-env")
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")
    built = compile_install.child_env(tmp_path, build_env=True)
    assert built["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "build-env"]
    assert built["PYTHONNOUSERSITE"] == "1"
    installed = compile_install.child_env(tmp_path, build_env=False)
    assert installed["PYTHONPATH"] == str(tmp_path) and "PYTHONNOUSERSITE" not in installed
    assert built["ORDMIX_NO_BACKGROUND_COMPILE"] == installed["ORDMIX_NO_BACKGROUND_COMPILE"] == "1"


@pytest.mark.parametrize(
    ("needs_build_env", "runs", "said"),
    [(False, 1, "with the installed"), (True, 2, "with the build environment's")],
)
def test_the_installed_libraries_first_then_the_build_environments(
    monkeypatch, tmp_path, needs_build_env, runs, said
):
    """numba reads only a cache its own version wrote: the child runs with the libraries the
    package is installed with, and only where that fails with the build environment's; in
    the tree's folder, the tree first on ``sys.path``."""
    monkeypatch.delenv(compile_install.NO_INSTALL_COMPILE, raising=False)
    monkeypatch.setenv("PYTHONPATH", "build-env")
    log = tmp_path / "runs"
    check = textwrap.dedent(
        f"""
        import os, sys
        open({str(log)!r}, "a").write("run\\n")
        if sys.path[1] != {str(tmp_path)!r} or os.getcwd() != {str(tmp_path)!r}:
            sys.exit("the tree is not first")
        if {needs_build_env!r} and "build-env" not in os.environ["PYTHONPATH"]:
            sys.exit("ModuleNotFoundError: No module named 'numpy'")
        """
    )
    monkeypatch.setattr(compile_install, "CHILD_CODE", check)
    line = compile_install.compile_kernels(tmp_path)
    assert line.startswith("ordmix: numba's kernels compiled into its cache in"), line
    assert line.endswith(said + " libraries") and log.read_text().count("run") == runs


@pytest.mark.parametrize("editable", [True, False, None])
def test_the_hook_compiles_only_in_an_editable_install(monkeypatch, capsys, editable):
    """A wheel's modules are copied with new time stamps, where numba's cache would not be
    found: only an editable install compiles, the tree holding ``ordmix_core`` (a setuptools
    that does not say, ``None``, builds a wheel), and says so on the build's stderr."""
    roots = []
    monkeypatch.setattr(
        compile_install, "compile_kernels", lambda root: roots.append(root) or "said"
    )
    monkeypatch.setattr(build_py, "run", lambda self: None)
    command = compile_install.CompileAtInstall(Distribution())
    if editable is None:  # an older setuptools: neither the class nor the command has it
        monkeypatch.delattr(build_py, "editable_mode", raising=False)
        command.__dict__.pop("editable_mode", None)
        assert not hasattr(command, "editable_mode")
    else:
        command.editable_mode = editable
    command.run()
    assert roots == ([ROOT] if editable else [])
    out = capsys.readouterr()
    assert (out.err, out.out) == (("said\n" if editable else ""), "")


def test_setuptools_runs_the_hook():
    """``pyproject.toml`` names the hook as setuptools' ``build_py``, and the build environment
    brings what the compile imports."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (CI's); the project runs on 3.10

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hook = project["tool"]["setuptools"]["cmdclass"]["build_py"]
    assert hook == "ordmix_core.estimators.compile_install.CompileAtInstall"
    needs = {r.split(">")[0].split("=")[0] for r in project["build-system"]["requires"]}
    runtime = {r.split(">")[0].split("=")[0] for r in project["project"]["dependencies"]}
    assert {"setuptools", "numba", "numpy", "scipy", "pandas", "pyarrow"} <= needs
    assert needs - {"setuptools"} <= runtime


@pytest.mark.slow
def test_a_new_install_fits_the_demo_without_compiling(tmp_path):
    """The README's install in a new venv from a copy of this tree's files (no numba cache):
    the first fit of the shipped TREC demo then loads every kernel it runs from the cache."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if listed.returncode != 0:
        pytest.skip("needs the repository's git checkout to copy")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env.pop(compile_install.NO_INSTALL_COMPILE, None)
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "-e", "."], cwd=clone, env=env, check=True
    )
    check = textwrap.dedent(
        f"""
        import warnings
        warnings.simplefilter("ignore")
        import pandas as pd
        import ordmix_core
        from ordmix_core import OrdinalMixture
        from ordmix_core.numerics import jit
        assert ordmix_core.__file__.startswith({str(clone)!r}), ordmix_core.__file__
        pending = jit.uncompiled()
        trec = pd.read_csv({str(ROOT / "demo_data" / "trec-rf10-ratings.csv")!r})
        OrdinalMixture(granularity="query", random_state=0).fit(trec)
        print(sum(bool(k.overloads) for k in pending), sum(bool(k.overloads) for k in jit.KERNELS))
        """
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", check],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    compiled, loaded = out.stdout.split()
    assert compiled == "0" and int(loaded) > 15  # every kernel the fit ran (18), from the cache


def test_the_hook_imports_nothing_of_the_package():
    """setuptools loads the hook's file on its own, without ``ordmix_core``: an import from the
    package there fails every install (``No module named 'ordmix_core'``)."""
    tree = ast.parse(Path(compile_install.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("ordmix_core")
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("ordmix_core") for a in node.names)
