"""Rank 0's HTTP socket: claimed before the model loads, answering 503 until serving begins.

`claim(host, port, retries)` binds and listens at once, so a taken port is said in the first
second (not after the model has loaded) and the port stays this server's while it loads. A
bound socket that does not listen would not hold it: two such sockets with SO_REUSEADDR
share a port on Linux. With `retries` > 0 (`--port-retries`; deploy/one-host.sh passes 10)
a taken port moves on to the next free one above it and says so; with 0 (serve's default,
the systemd unit's) it stops with the error.

`Loading`: while the ranks meet and load, a thread answers every connection with a 503 and
closes it (GET /health: `{"status": "loading", ...}`; any other path: OpenAI's error shape,
code "loading"; both with Retry-After), so a client or a health check hears "not yet" at
once instead of a connection that hangs until serving begins. It stops before uvicorn takes
the socket; a connection that arrives in between waits in the backlog and is served.
"""
from __future__ import annotations

import errno
import json
import socket
import threading

RETRY_AFTER_S = 2


class PortTaken(Exception):
    """The port (and every one tried above it) is in use, or cannot be bound."""


def claim(host: str, port: int, retries: int = 0) -> tuple[socket.socket, str | None]:
    """A listening socket on host:port, or on the first free port of port+1..port+retries.
    Returns it and, when it is not on `port`, a line saying so."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    first_error = None
    last = port + max(0, retries) if port else 0        # port 0: the kernel picks one
    for p in range(port, last + 1):
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT on restart
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((host, p))
            s.listen(2048)                     # uvicorn's backlog
        except OSError as e:
            s.close()
            if first_error is None:
                first_error = e
            if e.errno != errno.EADDRINUSE:    # a wrong address: no other port will do
                break
            continue
        note = None
        if p != port and port:
            note = (f"port {port} on {host} is in use (another server there? `make serve` holds "
                    f"8000); serving on port {p} instead (--port-retries {retries})")
        return s, note
    e = first_error
    tried = f"{port}" if not retries else f"{port}..{port + retries}"
    hint = ("is another server running there? (--port, --host"
            + (", --port-retries N to take the next free port)" if not retries else ")"))
    raise PortTaken(f"cannot listen on {host}:{tried}: {e.strerror or e}; {hint}")


class Loading:
    """Answers 503 on `sock` from a thread of its own until stop()."""

    def __init__(self, sock: socket.socket, reason: str = "foldserve is starting (the ranks meeting, the model loading)"):
        self.sock = sock
        self.reason = reason
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="foldserve-loading", daemon=True)

    def start(self) -> "Loading":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Idempotent; leaves the socket open and blocking for uvicorn."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self.sock.fileno() >= 0:
            self.sock.settimeout(None)

    def _loop(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:                    # closed under us, or a passing accept error
                if self.sock.fileno() < 0:
                    return
                continue
            try:
                self._answer(conn)
            except OSError:
                pass
            finally:
                conn.close()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(1.0)
        head = b""
        try:                                   # the request line and headers, if they come soon
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
        except socket.timeout:
            pass
        conn.sendall(response(head, self.reason))
        try:
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def response(head: bytes, reason: str) -> bytes:
    """The 503 for a request whose first bytes are `head`."""
    line = head.split(b"\r\n", 1)[0].split()
    method = line[0] if line else b""
    path = line[1].split(b"?", 1)[0] if len(line) > 1 else b""
    message = f"{reason}; retry in a few seconds"
    if path == b"/health":
        body = {"status": "loading", "reason": message}
    else:
        body = {"error": {"message": message, "type": "service_unavailable", "param": None,
                          "code": "loading"}}
    data = json.dumps(body, separators=(",", ":")).encode("ascii")
    headers = (f"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
               f"content-length: {len(data)}\r\nretry-after: {RETRY_AFTER_S}\r\n"
               "connection: close\r\n\r\n").encode("ascii")
    return headers if method == b"HEAD" else headers + data
