"""Whether `--device cuda` can run on this machine, said before anything starts."""
from __future__ import annotations

from server.config import ConfigError


def require_cuda() -> None:
    """Raise ConfigError naming what is missing: cupy (the cuda12 / cuda13 extra) or a device."""
    try:
        import cupy
    except ImportError as e:
        raise ConfigError("--device cuda needs cupy and NCCL: pip install 'foldserve[cuda12]' "
                          "(or 'foldserve[cuda13]' with a CUDA 13 driver)") from e
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:                 # no driver, or the runtime cannot start
        raise ConfigError(f"--device cuda: no usable CUDA device ({type(e).__name__}: {e})") from e
    if n < 1:
        raise ConfigError("--device cuda: no CUDA device found")
