"""uvicorn's h11 protocol with what it lacks against slow or many clients.

- A header deadline (`--header-timeout`): from a connection's start, or from the end of
  its previous response, a request's headers must have arrived within the deadline, or
  the connection gets a 408 and is closed. uvicorn has no such setting: its
  `timeout_keep_alive` is cancelled by the first byte that arrives, so a client that
  trickles one header byte a second holds its connection (and a file descriptor) forever.
- A body deadline (`--body-timeout`): once a request's headers are in, its body must have
  arrived within the deadline, or the connection gets a 408 and is closed (the app, still
  reading the body, hears a disconnect). Without it a client that trickles the body a byte
  at a time holds a connection, busy and so never evicted, for as long as it likes.
- A write deadline (`--write-timeout`): a connection whose client reads nothing for that
  long while a reply waits to be written (the transport's buffer is past its high-water
  mark and does not shrink) is dropped. The app hears a disconnect, so a stream's
  generation is cancelled and its stream freed; without it a client that stopped reading
  held its stream, and its connection, until the generation's end, however long.
- A connection cap (`--max-connections`): past it, the oldest connection that is waiting
  for a request (slow headers, or idle between keep-alive requests) is closed to make room,
  so held-open connections cannot lock out a client that sends its request at once; when
  every connection is busy with a request the newcomer gets a 503 and is closed.
- uvicorn's own 400 for a request h11 cannot parse (`Content-Length: abc`) is sent in
  OpenAI's error shape instead of plain text.

`guarded_protocol(limits)` makes the class handed to uvicorn.Config(http=...); every
connection of one server shares the `ConnectionLimits`.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("foldserve.api")


@dataclass
class ConnectionLimits:
    header_timeout: float
    max_connections: int
    body_timeout: float = 60.0
    write_timeout: float = 30.0
    waiting: dict = field(default_factory=dict)   # protocol -> None, oldest first
    closed_late: int = 0                            # connections past the header deadline
    body_late: int = 0                              # connections past the body deadline
    write_late: int = 0                             # connections whose client read nothing
    evicted: int = 0                                # waiting ones closed to make room
    refused: int = 0                                # newcomers refused (every one busy)


def raw_error(status: int, reason: str, message: str, code: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 error response with an OpenAI-shaped body, for moments when h11
    holds no request to answer (it would refuse to send a response)."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"
                                 if status < 500 else "service_unavailable",
                                 "param": None, "code": code}}).encode("ascii")
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n")
    return head.encode("ascii") + body


def guarded_protocol(limits: ConnectionLimits) -> type:
    class GuardedH11Protocol(H11Protocol):
        _limits = limits

        def connection_made(self, transport) -> None:
            self._header_timer = self._body_timer = self._write_timer = None
            super().connection_made(transport)
            lim = self._limits
            if len(self.connections) > lim.max_connections:
                victim = next(iter(lim.waiting), None)
                if victim is None:
                    lim.refused += 1
                    self.transport.write(raw_error(
                        503, "Service Unavailable", f"this server holds its most connections "
                        f"({lim.max_connections}, --max-connections), every one busy; retry "
                        "shortly", "too_many_connections", "retry-after: 1\r\n"))
                    self.transport.close()
                    return
                lim.evicted += 1
                victim._close_waiting()
            self._await_request()

        def connection_lost(self, exc) -> None:
            self._request_started()
            self._body_done()
            self._writes_flow()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._write_timer is None:
                self._write_left = self.transport.get_write_buffer_size()
                self._write_since = self.loop.time()
                self._write_timer = self.loop.call_later(self._write_tick(), self._write_check)

        def resume_writing(self) -> None:
            self._writes_flow()
            super().resume_writing()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self._request_started()
                if self.conn.their_state is h11.SEND_BODY:
                    self._await_body()
                else:
                    self._body_done()

        def on_response_complete(self) -> None:
            self._body_done()
            super().on_response_complete()
            if not self.transport.is_closing() and (
                    self.cycle is None or self.cycle.response_complete):
                self._await_request()       # the next request's headers have a deadline too

        def send_400_response(self, msg: str) -> None:
            self._request_started()
            self.transport.write(raw_error(400, "Bad Request", f"{msg} (malformed HTTP: "
                                           "request line or headers)", "invalid_http"))
            self.transport.close()

        # ---- the waiting list and the deadline ----
        def _await_request(self) -> None:
            lim = self._limits
            lim.waiting[self] = None
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(lim.header_timeout, self._headers_late)

        def _request_started(self) -> None:
            self._limits.waiting.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self not in self._limits.waiting:
                return
            self._limits.closed_late += 1
            self._limits.waiting.pop(self, None)
            self.transport.write(raw_error(
                408, "Request Timeout", f"the request's headers did not arrive within "
                f"{self._limits.header_timeout:g} s (--header-timeout)", "request_timeout"))
            self.transport.close()

        def _await_body(self) -> None:
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self._limits.body_timeout, self._body_late)

        def _body_done(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _body_late(self) -> None:
            self._body_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
                return
            self._limits.body_late += 1
            if self.cycle is None or not self.cycle.response_started:   # nothing sent yet
                self.transport.write(raw_error(
                    408, "Request Timeout", f"the request's body did not arrive within "
                    f"{self._limits.body_timeout:g} s of its headers (--body-timeout)",
                    "request_timeout"))
            self.transport.close()

        # ---- the write deadline: paused writes must make progress ----
        def _write_tick(self) -> float:
            return min(1.0, self._limits.write_timeout / 4)

        def _writes_flow(self) -> None:
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None

        def _write_check(self) -> None:
            """Every tick while writing is paused: a shrinking buffer is the client reading;
            none for --write-timeout seconds, and the connection is dropped (abort: a close
            would wait for the buffer to drain, which it never will)."""
            self._write_timer = None
            if self.transport.is_closing():
                return
            now, left = self.loop.time(), self.transport.get_write_buffer_size()
            if left < self._write_left:         # less than at the last tick: it reads
                self._write_since = now
            self._write_left = left
            if now - self._write_since >= self._limits.write_timeout:
                self._limits.write_late += 1
                log.warning("a client read nothing of its reply for %g s (--write-timeout); "
                            "its connection is dropped and its request ended",
                            self._limits.write_timeout)
                self.transport.abort()
                return
            self._write_timer = self.loop.call_later(self._write_tick(), self._write_check)

        def _close_waiting(self) -> None:
            self._request_started()
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
