"""Every TF_* setting: read in server/config.py alone, listed once there (SETTINGS), and
documented under the same names in deploy/foldserve.env and docs/operations.md; the names
renamed to that prefix still read, with one warning."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernels.settings import KERNEL_SETTINGS, setting as kernel_setting
from server import config
from server.config import API_KEY_VARIABLE, RENAMED, SETTINGS, Env, setting

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
    """SETTINGS, and the API key beside them (rank 0's alone, read by config.py too)."""
    listed = {s.name for s in SETTINGS} | {API_KEY_VARIABLE}
    assert env_file_names() - set(DEPLOY_SETTINGS) == listed
    assert operations_table_names() - set(DEPLOY_SETTINGS) == listed


def test_no_module_but_config_reads_a_setting():
    """server/config.py reads the settings, kernels/settings.py the kernels' own (kernels
    import nothing from server/); no other module reads a TF_* name from the environment."""
    reads = re.compile(rf"(?:environ\.get|getenv|environ\[|e\.get)\(?\s*[\"']{NAME}")
    found = []
    for pkg in ("server", "kernels"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if p in (ROOT / "server/config.py", ROOT / "kernels/settings.py"):
                continue
            found += [f"{p.relative_to(ROOT)}: {m}" for m in reads.findall(p.read_text())]
    assert found == []
    uses = re.compile(r"\bsetting\(\s*[\"']((?:TF|FOLDSERVE)_[A-Z0-9_]+)")
    by_kernels = {n for p in (ROOT / "kernels").rglob("*.py") for n in uses.findall(p.read_text())}
    assert by_kernels == set(KERNEL_SETTINGS)          # each listed one read, and only those


def test_the_kernels_settings_are_the_tables_own():
    """kernels/settings.py's names, defaults and meanings are SETTINGS' entries for them, so
    the env file and docs/operations.md (held to SETTINGS above) document them truly."""
    listed = {s.name: s for s in SETTINGS}
    for name, (default, meaning) in KERNEL_SETTINGS.items():
        assert name in listed, f"{name}: a kernel setting missing from server/config.SETTINGS"
        assert (listed[name].default, listed[name].meaning) == (default, meaning), name
        assert kernel_setting(name, {}) == default == setting(name, {})
        assert kernel_setting(name, {name: "7"}) == "7" == setting(name, {name: "7"})
    with pytest.raises(KeyError, match="TF_MODEL is not a kernel setting"):
        kernel_setting("TF_MODEL", {})


def test_defaults_as_documented():
    assert setting("TF_PDL", {}) == "1" and setting("TF_TMA_SMALL", {}) == "0"
    assert setting("TF_MODEL", {}) is None
    assert setting("TF_PDL", {"TF_PDL": "0"}) == "0"


def test_one_prefix():
    assert [s.name for s in SETTINGS if not s.name.startswith("TF_")] == []


def test_old_names_still_read_with_one_warning(monkeypatch, caplog):
    monkeypatch.setattr(config, "_warned", set())
    old = {"FOLDSERVE_MODEL": "dummy:smollm2-135m", "FOLDSERVE_CUDA_GRAPHS": "0",
           "FOLDSERVE_CACHE_DIR": "/tmp/c"}
    with caplog.at_level("WARNING", logger="server.config"):
        assert setting("TF_MODEL", old) == "dummy:smollm2-135m"
        assert setting("TF_MODEL", old) == "dummy:smollm2-135m"
        assert Env.read(old).model == "dummy:smollm2-135m"
        assert setting("TF_CUDA_GRAPHS", old) == "0" and setting("TF_CACHE_DIR", old) == "/tmp/c"
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3 and all(sum(o in m for m in said) == 1 for o in old)
    assert "set TF_MODEL instead" in next(m for m in said if "FOLDSERVE_MODEL" in m)
    # the new name wins where both are set, and says nothing
    caplog.clear()
    assert setting("TF_MODEL", {**old, "TF_MODEL": "x.gguf"}) == "x.gguf"
    assert Env.read({"TF_MODEL": "x.gguf"}).model == "x.gguf"
    assert sorted(RENAMED) == ["TF_CACHE_DIR", "TF_CUDA_GRAPHS", "TF_MODEL"]
    assert caplog.records == []
