"""The kernels' own settings: the TF_* variables the CUDA launchers read at import (all of
them scheduling only: the same bytes either way).

Kernels import nothing from server/ (tests/house/test_imports.py), so they read these here, not
through server.config.setting. server/config.py's SETTINGS lists them too, as the house's one
table of settings that deploy/foldserve.env and docs/operations.md document;
tests/house/test_settings.py holds the two lists to the same names, defaults and meanings.
"""
from __future__ import annotations

import os

# name -> (default when unset, meaning); the meanings are SETTINGS' words
KERNEL_SETTINGS = {
    "TF_PDL": ("1", "0: no programmatic dependent launch in CUDA graphs (scheduling only)"),
    "TF_STREAM_PF": ("1", "0: the decode GEMM does not load the next weights early "
                          "(scheduling only)"),
    "TF_TMA_SMALL": ("0", "1: 17..64-row GEMMs through the TMA kernel on sm_90 "
                          "(scheduling only)"),
    "TF_QGEMV_MAX": ("64", "rows up to which GEMMs over GGUF blocks unpack in registers "
                           "(qgemv); above, dequantized bf16 tiles for the tensor cores "
                           "(scheduling only)"),
    "TF_QBP_INT": ("0", "1: qgemv rounds to bf16 by integer ops (scheduling only)"),
    "TF_QPF": ("0", "1: qgemv loads the next block group early (scheduling only)"),
}


def setting(name: str, environ=None) -> str:
    """A kernel setting's value as set in the environment, else its default; a name not in
    KERNEL_SETTINGS is refused (KeyError naming it)."""
    if name not in KERNEL_SETTINGS:
        raise KeyError(f"{name} is not a kernel setting (kernels/settings.py: "
                       f"{', '.join(KERNEL_SETTINGS)})")
    e = os.environ if environ is None else environ
    return e.get(name, KERNEL_SETTINGS[name][0])
