"""Real servers for the end-to-end suite: `python3 -m server.cli serve` subprocesses with the
real default model on the CPU, one per configuration, started once per session (all at
once, so their loading overlaps) and killed as a process group at the end.

    paged     TF_KV_PAGES=on,  --parallel 16, --context 1024, --prompt-cache-gib 0.1
    windowed  TF_KV_PAGES=off, --parallel 8,  --context 1024  (prompt cache 0.25 GiB, the default)
    cold      TF_KV_PAGES=on,  --parallel 2,  --context 1024, --prompt-cache-gib 0 (no prefix kept)
"""
from __future__ import annotations

import pytest

from .live import CONFIGS, Server, start_all


@pytest.fixture(scope="session")
def servers():
    try:
        from server.engine.locate import ModelNotFound, default_gguf
        default_gguf()
    except ModelNotFound as e:
        pytest.skip(str(e))
    started: dict[str, Server] = {}
    try:
        started.update(start_all(CONFIGS))
        yield started
    finally:
        for s in started.values():
            s.stop()


@pytest.fixture(scope="session")
def paged(servers) -> Server:
    return servers["paged"].alive()


@pytest.fixture(scope="session")
def windowed(servers) -> Server:
    return servers["windowed"].alive()


@pytest.fixture(scope="session")
def cold(servers) -> Server:
    return servers["cold"].alive()


@pytest.fixture(params=["paged", "windowed"])
def either(request, servers) -> Server:
    """Each test that takes it runs on pages, then on windows."""
    return servers[request.param].alive()
