"""Every TF_* / FOLDSERVE_* setting: read in server/config.py alone, listed once there
(SETTINGS), and documented under the same names in deploy/foldserve.env and docs/operations.md."""
from __future__ import annotations

import re
from pathlib import Path

from server.config import SETTINGS, setting

ROOT = Path(__file__).resolve().parents[2]
NAME = r"((?:TF|FOLDSERVE)_[A-Z0-9_]+)"
# read by the deploy scripts (bash: deploy/common.sh, one-host.sh, rank.sh), not by foldserve
DEPLOY_SETTINGS = ("FOLDSERVE_ARGS", "FOLDSERVE_ENV", "FOLDSERVE_DRY_RUN")


def env_file_names() -> set[str]:
    """Names the env file sets or shows commented out (`NAME=` / `#NAME=` at a line's start)."""
    text = (ROOT / "deploy/foldserve.env").read_text()
    return set(re.findall(rf"^#?{NAME}=", text, re.M))


def operations_table_names() -> set[str]:
    """Names in the first column of docs/operations.md's variable table."""
    text = (ROOT / "docs/operations.md").read_text()
    return set(re.findall(rf"^\| `{NAME}`", text, re.M))


def test_the_list_the_env_file_and_the_docs_agree():
    listed = {s.name for s in SETTINGS}
    assert env_file_names() - set(DEPLOY_SETTINGS) == listed
    assert operations_table_names() - set(DEPLOY_SETTINGS) == listed


def test_no_module_but_config_reads_a_setting():
    reads = re.compile(rf"(?:environ\.get|getenv|environ\[)\(?\s*[\"']{NAME}")
    found = []
    for pkg in ("server", "kernels"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if p == ROOT / "server/config.py":
                continue
            found += [f"{p.relative_to(ROOT)}: {m}" for m in reads.findall(p.read_text())]
    assert found == []


def test_defaults_as_documented():
    assert setting("TF_PDL", {}) == "1" and setting("TF_TMA_SMALL", {}) == "0"
    assert setting("FOLDSERVE_MODEL", {}) is None
    assert setting("TF_PDL", {"TF_PDL": "0"}) == "0"
