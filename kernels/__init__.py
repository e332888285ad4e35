"""One pair per op: a numpy reference and a CUDA form with its cupy launcher.

`kernels/<op>.py` holds `ref(...)` (numpy, float32: the arithmetic the CPU engine runs);
where the op has a GPU form, `kernels/<op>_cuda.py` holds `cuda(...)` (cupy arrays in, cupy
arrays out), its CUDA C in `kernels/csrc/` (`*.cu`, and `*.cuh` for what several share:
common.cuh with bf16, warp reductions, the shared per-element arithmetic and PDL;
pi_order.cuh; the mma steps), composed by `common_cuda.csrc` (files in order, local
includes resolved) and compiled at run time by `common_cuda.kernel` (HEADER in front; for the
device's own SM, or arch "sm_90a" for the wgmma kernels). The model never
calls either form directly: it calls `<op>` on the backend `kernels.ops.backend(name)` gave it
once at startup ("numpy", "cpu" with numba, or "cuda": kernels/ops_cpu.py, ops_cuda.py).

kernels/ is the ground floor: it imports nothing from server/ (tests/house/test_imports.py);
a weight kept as GGUF blocks is kernels/blocks.py's `Blocks`, and the kernels' own settings are
read by kernels/settings.py.

Importing `kernels` changes no environment variable; `init()` (below) prepares numba, called
explicitly before any numba kernel module is imported.
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


# the kernel modules that import numba, each refusing to import before `init`
# (tests/house/test_imports.py holds this list to the files)
NUMBA_MODULES = ("attention_cpu", "blocks_cpu", "blocks_vec", "dsa_cpu", "forward_cpu", "gdn_cpu",
                 "kquant_cpu", "kda_cpu", "mhc_cpu", "mla_cpu", "moe_cpu", "rmsnorm_cpu", "team_cpu",
                 "vec_ir")
_ready = False


def init() -> str:
    """Prepare the process for the numba kernels; call it once, before any of NUMBA_MODULES is
    imported (the server's and the CLI's start, tests/conftest.py, kernels.ops.backend for the
    CPU, the benches and tools that import them directly). Importing `kernels` changes nothing;
    this keeps glibc's freed large blocks for reuse (keep_freed_blocks) and sets, where unset: NUMBA_CACHE_DIR (numba_cache_dir: a folder named by the kernels'
    sources), NUMBA_SLP_VECTORIZE=1, and GOMP_SPINCOUNT=10000 unless OMP_WAIT_POLICY is set
    (libgomp's spin between parallel regions, read when libgomp loads). Where numba is
    imported already its config is reloaded from them. Idempotent; returns the cache folder.
    Each of NUMBA_MODULES refuses to import before it (`require_init`): numba fixes a cached
    function's folder as its decorator runs, and numba's own default, beside the sources,
    would keep old machine code in use after a change to a function another file holds."""
    global _ready
    e = _os.environ
    if not _ready:
        keep_freed_blocks()
    if not e.get("NUMBA_CACHE_DIR"):
        e["NUMBA_CACHE_DIR"] = numba_cache_dir()
    e.setdefault("NUMBA_SLP_VECTORIZE", "1")
    if "OMP_WAIT_POLICY" not in e:
        e.setdefault("GOMP_SPINCOUNT", "10000")
    if "numba" in _sys.modules:               # imported already: its config read them then
        from numba.core import config as _config
        _config.reload_config()
        _config.CACHE_DIR = e["NUMBA_CACHE_DIR"]
    _ready = True
    return e["NUMBA_CACHE_DIR"]


KEEP_FREED_BYTES = 1 << 30     # blocks up to this size from malloc's heap, freed ones kept there


def keep_freed_blocks() -> bool:
    """glibc's malloc: blocks up to KEEP_FREED_BYTES from its heap (M_MMAP_THRESHOLD) and its
    free top kept up to 2 GiB (M_TRIM_THRESHOLD), so a round's large arrays (a 512-token
    prompt's products: 4-32 MB each, ~40 a layer) reuse the pages the last round freed:
    glibc's default maps each past its dynamic threshold afresh and unmaps it when freed,
    every page faulted in and zeroed again (~9,000-14,000 minor faults and 65-90 ms of system
    CPU a Qwen3-30B-A3B-shaped 4-layer prefill here: receipt 2026-12-06-pp38). The process
    keeps its largest round's arrays mapped between rounds (it needs them again at the next
    one). Not where the user set MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ (glibc's
    own), nor off glibc. Allocation only: no byte of any result changes. Whether it was set."""
    e = _os.environ
    if "MALLOC_MMAP_THRESHOLD_" in e or "MALLOC_TRIM_THRESHOLD_" in e or not _sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mapped = mallopt(M_MMAP_THRESHOLD, KEEP_FREED_BYTES) or mallopt(M_MMAP_THRESHOLD, 32 << 20)
    return bool(mapped and mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1))     # 32 MiB: glibc's cap


def ready() -> bool:
    """Whether `init` has run in this process."""
    return _ready


def require_init(module: str) -> None:
    """The first line of each of NUMBA_MODULES: refuses (RuntimeError naming `module`) to
    import before `init`, whose folder numba reads as the decorators run."""
    if not _ready:
        raise RuntimeError(f"{module} imported before kernels.init(): numba would cache its "
                           f"functions beside the sources; call kernels.init() at the "
                           f"program's start")
