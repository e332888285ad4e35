"""Byte counts for people: GiB with a chosen precision, MiB below one GiB."""
from __future__ import annotations

MIB = 1 << 20
GIB = 1 << 30


def gib(n: int, digits: int = 2) -> str:
    return f"{n / GIB:.{digits}f} GiB"


def size(n: int, digits: int = 2) -> str:
    """'100 bytes', '12 KiB', '180 MiB' under a GiB, '5.00 GiB' from there (digits after the point)."""
    if abs(n) < 10 * 1024:
        return f"{n} bytes"
    if abs(n) < MIB:
        return f"{n / 1024:.0f} KiB"
    if abs(n) < GIB:
        return f"{n / MIB:.0f} MiB" if abs(n) >= 10 * MIB else f"{n / MIB:.2f} MiB"
    return gib(n, digits)
