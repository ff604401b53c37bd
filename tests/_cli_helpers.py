"""Running the CLI in-process in tests: as this user, or as another one (when root)."""

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from ordmix_core.cli.main import main

NOBODY = 65534


def run_cli(argv, cwd: Path | None = None) -> tuple[int, list[str], str]:
    """``main(argv)`` in-process (in ``cwd`` if given): exit code, stderr lines, stdout."""
    err, out = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main([str(a) for a in argv])
    finally:
        os.chdir(old)
    return rc, err.getvalue().splitlines(), out.getvalue()


def as_user(uid: int, argv, cwd: Path) -> tuple[int, list[str]]:
    """``main(argv)`` in a forked child running as ``uid`` in ``cwd`` (the caller is root)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        out: list = [99, ["the child failed before running"]]
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            rc, err, _ = run_cli(argv, cwd)
            out = [rc, err]
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = [99, [repr(e)]]
        finally:
            os.write(w, json.dumps(out).encode())
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    rc, err = json.loads(data)
    return rc, err


def run_unprivileged(argv, cwd: Path) -> tuple[int, list[str]]:
    """As another user when root (root may write anywhere), else as this one."""
    if os.geteuid() == 0:
        return as_user(NOBODY, argv, cwd)
    return run_cli(argv, cwd)[:2]


@contextlib.contextmanager
def shared_dir():
    """A folder other users can enter (pytest's tmp_path is private to its owner)."""
    d = Path(tempfile.mkdtemp(prefix="ordmix-perm-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def read_only_dir(base: Path, name: str) -> Path:
    """A folder the unprivileged runner cannot write (root's 755, or 555 when not root)."""
    d = base / name
    d.mkdir()
    os.chmod(d, 0o755 if os.geteuid() == 0 else 0o555)
    return d
