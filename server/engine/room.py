"""A rank's room: the memory its KV pool and streams may take, after the weights and a reserve.

  GPU:  free device memory - reserve (default max(2 GiB, 5% of the device)); on unified
        memory (GB10) also at most the host's available memory - reserve
  CPU:  half the host's available memory - reserve (the rest is the OS's and the weights' growth)
  TF_ROOM_GIB caps what a rank reports (tests, shared GPUs).
"""
from __future__ import annotations

GiB = 1 << 30


def host_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def default_reserve(total: int) -> int:
    return max(2 * GiB, total // 20)


def measure(device: str, reserve_gib: float | None, cap_gib: float | None) -> tuple[int, int | None]:
    """-> (room bytes, reserve bytes; None when TF_ROOM_GIB's cap, not the reserve, set the room)."""
    if device == "cpu":
        avail = host_available()
        reserve = int(reserve_gib * GiB) if reserve_gib is not None else default_reserve(avail)
        room = max(0, avail // 2 - reserve)
    else:
        import cupy
        free, total = cupy.cuda.runtime.memGetInfo()
        reserve = int(reserve_gib * GiB) if reserve_gib is not None else default_reserve(total)
        room = max(0, free - reserve)
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        if props.get("integrated"):               # unified memory: the host's memory is the GPU's
            room = min(room, max(0, host_available() - reserve))
    if cap_gib is not None and int(cap_gib * GiB) < room:
        return int(cap_gib * GiB), None
    return room, reserve
