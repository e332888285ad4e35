"""Free TCP ports for the tests' servers, chosen below the kernel's ephemeral range.

A port found free by binding port 0 comes from the ephemeral range, the same range every
outgoing connection takes its local port from: between the test closing its probe socket and
the server binding, a rank's connect to the rendezvous could take that very port (CI saw
rank 0 fail with EADDRINUSE on the port the test had just been given). Below the range no
connect() is ever given a port, so a port found free here stays free until a server binds it;
one process never hands out the same port twice.
"""
from __future__ import annotations

import random
import socket

_given: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768                              # Linux's default low end


def free_port(host: str = "127.0.0.1") -> int:
    """A port on host that nothing listens on, below the ephemeral range, not given before."""
    low, high = 20000, _ephemeral_low() - 1
    if high <= low:                               # an unusual range: fall back to the kernel's pick
        low, high = 1024, 65535
    for _ in range(1000):
        port = random.randint(low, high)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port found in {low}..{high}")
