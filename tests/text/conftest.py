"""Fixtures for the text layer: the default model's tokenizer and the golden prompts.

Both skip cleanly where the model package or the shared golden file is absent, so
the text tests run anywhere and say why they did not.
"""
from __future__ import annotations

import json

import pytest

from .cases import GOLDEN


@pytest.fixture(scope="session")
def smollm_gguf() -> str:
    from server.engine.locate import ModelNotFound, default_gguf
    try:
        return default_gguf()
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def smollm(smollm_gguf):
    from server.text.tokenizer import Tokenizer
    return Tokenizer.from_gguf(smollm_gguf)


@pytest.fixture(scope="session")
def golden_cases() -> list[dict]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
