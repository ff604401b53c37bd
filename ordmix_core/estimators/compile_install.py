"""numba's compile at ``pip install -e .``: the first fit after install loads every kernel from
the cache instead of compiling them (about a minute of CPU on a first run).

setuptools runs ``CompileAtInstall`` (``[tool.setuptools.cmdclass]`` in ``pyproject.toml``)
where it would copy the modules; in an editable install the modules stay where they are, so the
kernels a child process compiles (``compile_fit.compile_every_kernel``) land in numba's cache
beside them, where a fit looks. numba keys its cache on its own version and each module's time
stamp, so a kernel compiled by another numba or from another version of a module is compiled
again, as without this step: the child imports the libraries the package is installed with
where they are there, else the build environment's (``[build-system] requires``). A wheel's
modules are copied, with new time stamps: nothing is compiled there. The install never fails
for it: a failed compile is one line on pip's log (``pip install -v`` shows it) and the first
run compiles as before.
"""

# setuptools loads this file on its own, not as a module of ``ordmix_core`` (the package is not
# importable while it is being built): it imports the standard library and setuptools only

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from setuptools.command.build_py import build_py

#: set (to anything but "" or "0") to compile nothing at install (a developer's quick reinstall)
NO_INSTALL_COMPILE = "ORDMIX_NO_INSTALL_COMPILE"

#: the longest the compile may take (seconds); then it is stopped and the first run compiles
INSTALL_COMPILE_TIMEOUT = 900.0

#: what the child runs: the fit that compiles every kernel a default fit calls
CHILD_CODE = (
    "from ordmix_core.estimators.compile_fit import compile_every_kernel; compile_every_kernel()"
)


def child_env(root: Path, build_env: bool) -> dict[str, str]:
    """The environment of the compiling child: the package at ``root`` first on its path; with
    ``build_env``, pip's isolated build environment behind it (pip sets it up through
    ``PYTHONPATH``), else the environment the package is installed into (this interpreter's
    own site-packages, as when the package runs)."""
    env = dict(os.environ)
    path = [str(root), env.get("PYTHONPATH", "") if build_env else ""]
    if not build_env:
        env.pop("PYTHONNOUSERSITE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    # compile_ahead.NO_BACKGROUND: this file imports nothing of the package (see the top)
    env["ORDMIX_NO_BACKGROUND_COMPILE"] = "1"
    return env


def compile_kernels(root: Path, timeout: float = INSTALL_COMPILE_TIMEOUT) -> str:
    """Compile every kernel of the package at ``root`` (the folder holding ``ordmix_core``)
    into numba's cache, in a child of this interpreter that imports the package from
    ``root``; returns one line saying what happened (never raises for a failed compile).

    The child runs first with the libraries of the environment the package is installed into:
    numba reads a cache written by its own version only, and that is the numba a fit will
    run. Where they are not installed yet (a new venv: pip builds the package before it
    installs what the package needs), it runs with the build environment's, resolved from the
    same index at the same time."""
    if os.environ.get(NO_INSTALL_COMPILE, "") not in ("", "0"):
        return f"ordmix: no compile at install ({NO_INSTALL_COMPILE} is set)"
    start = time.perf_counter()
    for build_env in (False, True):
        try:
            done = subprocess.run(
                [sys.executable, "-c", CHILD_CODE], cwd=root, env=child_env(root, build_env),
                timeout=timeout, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"ordmix: numba's kernels not compiled at install ({exc}); the first run will"
        if done.returncode == 0:
            where = "the build environment's" if build_env else "the installed"
            seconds = time.perf_counter() - start
            return (
                f"ordmix: numba's kernels compiled into its cache in {seconds:.0f} s, with "
                f"{where} libraries"
            )
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
    return f"ordmix: numba's kernels not compiled at install ({why}); the first run will"


class CompileAtInstall(build_py):
    """setuptools' ``build_py``, then, in an editable install, ``compile_kernels``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            # pip shows a build's output with -v or when it fails
            print(compile_kernels(Path(__file__).resolve().parents[2]), file=sys.stderr)
