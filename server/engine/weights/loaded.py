"""Loaded: what every loader hands back, whatever the model's source."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.shapes.spec import ModelSpec, UnsupportedModel


class WeightsError(ValueError):
    """A model file that cannot be used as it is; the message names the file, tensor and fix."""


@dataclass
class Loaded:
    spec: ModelSpec
    tensors: dict                    # HF llama names -> float32 C-contiguous [out, in], or Blocks
                                     # (a GGUF matrix kept as stored, [out, in])
    source: str                      # the path, or "dummy:SHAPE"
    identity: dict                   # architecture, config, stored tensors, content hash
    gguf_path: str | None = None
    hf_dir: str | None = None
    load_seconds: float = 0.0


__all__ = ["Loaded", "WeightsError", "UnsupportedModel"]
