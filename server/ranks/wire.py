"""Frames on the host link: [tag u8][length u32 LE][payload].

The tag says which collective a frame belongs to, so two ranks that fell out of step
are caught (RankMismatch) instead of reading each other's bytes as the wrong thing.
Pure Python (no numpy): the rendezvous uses it before any data plane exists.

Socket errors and EOF come out as ConnectionError / TimeoutError; the caller, which
knows the peer's rank, turns them into RankLost.
"""
from __future__ import annotations

import socket
import struct

HELLO, WELCOME, STEP, REDUCE, GATHER, ERROR, HEARTBEAT = 1, 2, 3, 4, 5, 6, 7
TAG_NAMES = {HELLO: "hello", WELCOME: "welcome", STEP: "broadcast_step",
             REDUCE: "all_reduce", GATHER: "all_gather", ERROR: "error",
             HEARTBEAT: "heartbeat"}      # heartbeat frames travel on a connection of their own

_HEADER = struct.Struct("<BI")
MAX_FRAME = 1 << 31          # a step or a reduce buffer is far smaller; larger is a corrupt header


def frame(tag: int, payload: bytes = b"") -> bytes:
    """One small frame as bytes (for a single non-blocking send)."""
    return _HEADER.pack(tag, len(payload)) + bytes(payload)


def send(sock: socket.socket, tag: int, payload: bytes | memoryview = b"") -> None:
    """Send one frame; the header and payload go out together for small frames."""
    n = memoryview(payload).nbytes
    if n < 65536:
        sock.sendall(_HEADER.pack(tag, n) + bytes(payload))
    else:
        sock.sendall(_HEADER.pack(tag, n))
        sock.sendall(payload)


def recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("connection closed by the peer")
        got += k
    return buf


def recv(sock: socket.socket) -> tuple[int, bytearray]:
    """Receive one frame: (tag, payload)."""
    tag, n = _HEADER.unpack(recv_exact(sock, _HEADER.size))
    if tag not in TAG_NAMES or n >= MAX_FRAME:
        raise ConnectionError(f"corrupt frame header (tag {tag}, {n} bytes)")
    return tag, recv_exact(sock, n)


def pack_list(items: list[bytes]) -> bytes:
    """[count u32][len u32]*count then the items: a gathered list in one payload."""
    return struct.pack(f"<I{len(items)}I", len(items), *map(len, items)) + b"".join(items)


def unpack_list(data: bytes | bytearray) -> list[bytes]:
    (count,) = struct.unpack_from("<I", data, 0)
    lens = struct.unpack_from(f"<{count}I", data, 4)
    out, at = [], 4 + 4 * count
    for n in lens:
        out.append(bytes(data[at:at + n]))
        at += n
    if at != len(data):
        raise ConnectionError(f"gathered list has {len(data) - at} stray bytes")
    return out


def tune(sock: socket.socket) -> None:
    """No Nagle delay (steps are small and latency-bound); keepalive so a vanished host
    (not only a dead process) is noticed within seconds even while the link is idle."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
