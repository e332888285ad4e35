"""One temporary folder a test run, so that a run leaves nothing behind in the system's.

start() (tests/conftest.py, at its import: before any test) makes
`<temp>/foldserve-tests-<pid>-*`, points tempfile.tempdir and TMPDIR (which the servers and
ranks the tests start inherit) at it, registers its removal at the process' exit, and removes
the folders of earlier runs whose process is gone (a run killed before its exit handlers ran;
tools/refs/scratch.py's sweep, which leaves a live process' folder alone).

At the run's end (conftest's pytest_sessionfinish) leftovers() names what is still in the
folder beside what is removed at exit by design: pytest's own tmp_path root (`pytest-of-*`)
and this process' tools/refs/scratch.py base (the checkpoints built once a run). Anything else
is something a test or a harness made and did not remove (a serve group's logs, a build
folder, a temporary file): the run fails, naming it.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "foldserve-tests-"


def start() -> Path:
    """The run's folder, made and put in place (see the module's docstring)."""
    from tools.refs import scratch
    root = tempfile.gettempdir()
    scratch.sweep(root, (PREFIX, scratch.PREFIX))
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = str(folder)
    return folder


def leftovers(folder: Path, pid: int | None = None) -> list[Path]:
    """What folder holds beside pytest's tmp_path root and process pid's scratch base
    (this process' by default), sorted."""
    from tools.refs import scratch
    own = f"{scratch.PREFIX}{os.getpid() if pid is None else pid}-"
    return sorted(p for p in Path(folder).iterdir()
                  if not p.name.startswith("pytest-of-") and not p.name.startswith(own))


def remove(paths) -> None:
    for p in paths:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
