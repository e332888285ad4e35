"""Session fixtures shared by the suites: the real default model (opened once) and the golden file;
the run's one temporary folder, and the check at the run's end that nothing was left in it
(tests/run_tmp.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import kernels
import run_tmp

kernels.init()      # before any test module imports a numba kernel (kernels/__init__.py)
RUN_TMP = run_tmp.start()   # every temporary file of the run under one folder (tests/run_tmp.py)

GOLDEN_PATH = Path(__file__).resolve().parent / "data/smollm2-135m-instruct-q4_1.json"   # provenance: tests/data/README.md





@pytest.fixture(scope="session")
def golden():
    return json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def real_model():
    from server.engine.build import open_model
    from server.engine.locate import ModelNotFound
    try:
        return open_model(None, progress=False)
    except ModelNotFound as e:
        pytest.skip(str(e))


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if it left anything in its temporary folder (tests/run_tmp.py), naming it;
    remove it either way."""
    left = run_tmp.leftovers(RUN_TMP)
    if not left:
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    msg = (f"the run fails: it left {len(left)} temporary file(s) or folder(s) in {RUN_TMP} "
           "(removed now; each test or harness removes what it makes): "
           + ", ".join(p.name for p in left))
    if tr is not None:
        tr.write("\n")
        tr.write_sep("!", "temporary files left behind", red=True)
        tr.write_line(msg)
    else:
        print(msg)
    run_tmp.remove(left)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _dev_null_is_a_device() -> bool:
    import stat
    try:
        return stat.S_ISCHR(os.stat("/dev/null").st_mode)
    except OSError:
        return False


@pytest.fixture(autouse=True, scope="module")
def dev_null_stays_a_device(request):
    """/dev/null is a character device before and after every test module: the deploy tests
    source FOLDSERVE_ENV=/dev/null, and a module that replaced it (an atomic write aimed at
    it, an rm) would fail them later under another name; this names the module instead."""
    if not _dev_null_is_a_device():
        pytest.fail("/dev/null is not a character device before this module "
                    "(restore it: mknod -m 666 /dev/null c 1 3)")
    yield
    if not _dev_null_is_a_device():
        pytest.fail(f"/dev/null stopped being a character device during {request.module.__name__}")
