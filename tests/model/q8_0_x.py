"""The int8-x switch of the families whose Q8_0 products take x rounded through q8_0 (moe,
deepseek2, qwen3next: the family module's Q8_0_X8, /work/notes/q8_products.md's list), for the
golden tests that hold a Q8_0 file both ways: switched on, to the record's "Q8_0 q8_0"
reference (tools/refs/record_q8ref.py); switched off, to its float reference."""
from __future__ import annotations

import contextlib
import importlib

SWITCHED = ("server.families.moe", "server.families.deepseek2", "server.families.qwen3next")
# the switch (q8all) and the head-only switch before it (q8x): both off for float x
FLAGS = ("Q8_0_X8", "HEAD_Q8_0_X8")


@contextlib.contextmanager
def float_x():
    """Within: every switch of SWITCHED's families off, so a model opened here multiplies its
    Q8_0 blocks against float32 x (restored on leaving)."""
    saved = []
    for m in map(importlib.import_module, SWITCHED):
        for f in FLAGS:
            if hasattr(m, f):
                saved.append((m, f, getattr(m, f)))
                setattr(m, f, False)
    try:
        yield
    finally:
        for m, f, v in saved:
            setattr(m, f, v)


def on_q8_0_x(model) -> bool:
    """Every Q8_0 product of `model` (server.engine.model.Model) takes q8_0 x: its ops' q80."""
    return getattr(model.ops, "q80", False) is True


def is_float_x(model) -> bool:
    """No Q8_0 product of `model` takes q8_0 x (no q80, no head-only q80_head)."""
    return not on_q8_0_x(model) and getattr(model.ops, "q80_head", None) is None
