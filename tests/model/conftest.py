"""Fixtures of the model tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tok():
    """The default model's tokenizer (no weights loaded); skips where the model is not installed."""
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        return Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))
