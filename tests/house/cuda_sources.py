"""Every CUDA source string the kernels hand to the compiler, composed on the CPU.

The kernels compile at run time through one function, `common_cuda.kernel(src, name,
defines, smem, arch)`, which hands HEADER + src to cupy (the device's own arch, defines as -D
options) or to NVRTC (arch "sm_90a": the wgmma kernels); every src is composed by
`common_cuda.csrc`. This lists HEADER + each module's source constant, and HEADER + every
variant of the templating functions (wgmma_cuda.source, wgmma_tma_cuda.source), so a test can
hold their bytes to a fixture made before a refactor:

    PYTHONPATH=$PWD python3 tests/house/cuda_sources.py --write tests/data/cuda_sources.sha256.json

cupy is replaced by a stub where it is absent: nothing here touches a device.
"""
from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import sys
import types
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # this tree's kernels, not an installed copy

MODULES = ("common_cuda", "argmax_cuda", "attention_cuda", "kv_write_cuda", "matmul_definition_cuda",
           "matmul_mma_cuda", "matmul_pi_cuda", "rmsnorm_cuda", "rope_cuda", "sample_cuda",
           "swiglu_cuda", "wgmma_cuda", "wgmma_tma_cuda")


def _stub_cupy() -> None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        cp = mock.MagicMock(name="cupy")
        cp.__spec__ = None
        sys.modules["cupy"] = cp
        for sub in ("cupy.cuda", "cupyx", "cupy_backends", "cupy_backends.cuda",
                    "cupy_backends.cuda.api", "cupy_backends.cuda.libs"):
            sys.modules.setdefault(sub, mock.MagicMock(name=sub))


# The sources common_cuda.kernel compiles (each call site's src), by module and name. The
# fixture's labels are the names they had when it was made; where one has moved since (the
# split of matmul_cuda), the module that holds it now follows.
KERNEL_SOURCES = (("argmax_cuda", "_SRC"), ("attention_cuda", "_SRC"), ("attention_cuda", "_REF_SRC"),
                  ("common_cuda", "_CONVERT"), ("common_cuda", "_WIDEN"), ("kv_write_cuda", "_SRC"),
                  ("matmul_cuda", "_SRC", "matmul_mma_cuda"),
                  ("matmul_cuda", "_DEFINITION", "matmul_definition_cuda"), ("rmsnorm_cuda", "_SRC"),
                  ("rope_cuda", "_SRC"), ("sample_cuda", "SRC"), ("swiglu_cuda", "_SRC"),
                  ("wgmma_tma_cuda", "_PERMUTE", "matmul_pi_cuda"))


def composed() -> dict[str, str]:
    """name -> the exact string handed to cupy or NVRTC."""
    _stub_cupy()
    mods = {m: importlib.import_module(f"kernels.{m}") for m in MODULES}
    header = mods["common_cuda"].HEADER
    out = {"common_cuda.HEADER": header}
    for label, name, *now in KERNEL_SOURCES:
        m = now[0] if now else label
        out[f"kernel({label}.{name})"] = header + getattr(mods[m], name)     # common_cuda.kernel's code
    w = mods["wgmma_cuda"]                         # common_cuda.kernel(..., arch="sm_90a")
    for split in (False, True):
        out[f"wgmma_cuda.source(split={split})"] = header + w.source(split)
    t = mods["wgmma_tma_cuda"]
    for bn, glu, split, pi_out in itertools.product(sorted(t.CONFIGS), *[(False, True)] * 3):
        out[f"wgmma_tma_cuda.source({bn},glu={glu},split={split},pi_out={pi_out})"] = \
            header + t.source(bn, glu, split, pi_out)
    return out


def digests() -> dict[str, str]:
    return {k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(composed().items())}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        with open(sys.argv[2], "w") as f:
            json.dump(digests(), f, indent=1, sort_keys=True)
            f.write("\n")
    else:
        for k, v in digests().items():
            print(v, k)
