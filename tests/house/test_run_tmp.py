"""A test run leaves nothing in the system's temporary folder (tests/run_tmp.py,
tools/refs/scratch.py): the run's files go under one folder, the checkpoints' scratch base goes
at its process' exit, a killed run's folders go at the next run's start, and what is left at
the end beside those is named (tests/conftest.py then fails the run)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import run_tmp
from tools.refs import scratch

REPO = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_the_run_writes_its_temporary_files_under_its_own_folder():
    run = Path(tempfile.gettempdir())
    assert run.name.startswith(f"{run_tmp.PREFIX}{os.getpid()}-"), run
    assert os.environ["TMPDIR"] == str(run)           # the servers and ranks a test starts too
    fd, path = tempfile.mkstemp()
    os.close(fd)
    os.unlink(path)
    assert Path(path).parent == run


def test_the_scratch_base_goes_at_its_process_exit():
    code = ("from tools.refs import scratch\n"
            "a, b = scratch.folder('foldserve-a-'), scratch.folder('foldserve-b-')\n"
            "(a / 'f').write_bytes(b'x' * 4096)\n"
            "assert a.parent == b.parent and a != b\n"
            "print(a.parent)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    base = Path(out.stdout.strip())
    assert base.name.startswith(scratch.PREFIX) and base.parent == Path(tempfile.gettempdir())
    assert not base.exists()


def test_sweep_removes_the_folders_of_processes_that_are_gone_and_no_other(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    names = [f"{scratch.PREFIX}{dead}-a", f"{run_tmp.PREFIX}{dead}-b",      # gone
             f"{scratch.PREFIX}{live}-c", f"{run_tmp.PREFIX}{live}-d",      # alive: kept
             f"foldserve-other-{dead}-e", f"{scratch.PREFIX}x-f"]           # not ours: kept
    for n in names:
        (tmp_path / n).mkdir()
        (tmp_path / n / "f").write_text("x")
    gone = scratch.sweep(tmp_path, (run_tmp.PREFIX, scratch.PREFIX))
    assert sorted(p.name for p in gone) == sorted(names[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])


def test_leftovers_are_all_but_pytests_root_and_the_own_scratch_base(tmp_path):
    for n in ("pytest-of-me", f"{scratch.PREFIX}123-x", f"{scratch.PREFIX}456-y", "foldserve-ranks-z"):
        (tmp_path / n).mkdir()
    (tmp_path / "moe-tp-rows-q").write_text("x")
    left = run_tmp.leftovers(tmp_path, pid=123)
    assert [p.name for p in left] == ["foldserve-ranks-z", f"{scratch.PREFIX}456-y", "moe-tp-rows-q"]
    run_tmp.remove(left)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{scratch.PREFIX}123-x", "pytest-of-me"]
