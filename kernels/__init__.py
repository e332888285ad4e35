"""One pair per op: a numpy reference and a CUDA form with its cupy launcher.

`kernels/<op>.py` holds `ref(...)` (numpy, float32: the arithmetic the CPU engine runs);
where the op has a GPU form, `kernels/<op>_cuda.py` holds `cuda(...)` (cupy arrays in, cupy
arrays out), its CUDA C in `kernels/csrc/` (`*.cu`, and `*.cuh` for what several share:
common.cuh with bf16, warp reductions, the shared per-element arithmetic and PDL;
pi_order.cuh; the mma steps), composed by `common_cuda.csrc` (files in order, local
includes resolved) and compiled at run time by `common_cuda.kernel` (HEADER in front; for the
device's own SM, or arch "sm_90a" for the wgmma kernels). The model never
calls either form directly: it calls `kernels.ops.<op>(...)`, which picks the form by the
array's type (numpy or cupy).
"""

import hashlib as _hashlib
import os as _os
import sys as _sys
from pathlib import Path as _Path


def numba_cache_dir(here: _Path | None = None) -> str:
    """numba's cache for these kernels, named by a hash of their sources (every kernels/*.py):
    numba checks a cached function against its own file only, so a change to a function it
    calls in another file (blocks_vec's kernels inside forward_cpu's forward, vec_ir's
    intrinsics inside attention_cpu) would leave the old machine code in use; a new hash is a
    new folder, compiled afresh. Beside the sources where they are writable, else in
    ~/.cache/foldserve. NUMBA_CACHE_DIR set by the user is kept."""
    here = here or _Path(__file__).resolve().parent
    h = _hashlib.sha256()
    for p in sorted(here.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    base = here / "__pycache__" if _os.access(here, _os.W_OK) else _Path.home() / ".cache" / "foldserve"
    return str(base / f"numba-{h.hexdigest()[:16]}")


if not _os.environ.get("NUMBA_CACHE_DIR"):
    _os.environ["NUMBA_CACHE_DIR"] = numba_cache_dir()      # read when numba is imported
    if "numba" in _sys.modules:                               # imported already: its config too
        _sys.modules["numba"].config.CACHE_DIR = _os.environ["NUMBA_CACHE_DIR"]
