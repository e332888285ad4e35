"""Where the tiny checkpoints' build_once() writes: one folder a process, removed when it exits.

folder(prefix) gives a new empty folder `prefix*` under this process' base,
`<temp>/foldserve-refs-<pid>-*` (made on first use, under tempfile.gettempdir()); the base and
everything in it is removed at the process' exit (atexit). A forked
child makes a base of its own and never removes its parent's. A base whose process died without
running its exit handlers (killed) is removed by sweep(), which tests/conftest.py calls at a
run's start. So the checkpoints stay cached for the life of the process (a test run builds each
once) and a run leaves nothing in the temporary folder.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = "foldserve-refs-"
_BASES: dict[int, Path] = {}          # pid -> that process' base


def folder(prefix: str) -> Path:
    """A new empty folder named prefix* under this process' base."""
    pid = os.getpid()
    base = _BASES.get(pid)
    if base is None:
        base = _BASES[pid] = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-"))
        atexit.register(_remove, pid)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def _remove(pid: int) -> None:
    if os.getpid() == pid and pid in _BASES:
        shutil.rmtree(_BASES.pop(pid), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(root: str | Path, prefixes=(PREFIX,)) -> list[Path]:
    """Remove the folders `<prefix><pid>-*` directly under root whose process is gone; returns
    them. A live process' folder (any pid that answers) is left alone."""
    gone = []
    pats = [re.compile(re.escape(p) + r"(\d+)-") for p in prefixes]
    for p in Path(root).iterdir():
        m = next((m for m in (pat.match(p.name) for pat in pats) if m), None)
        if m and p.is_dir() and not p.is_symlink() and not _alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone
