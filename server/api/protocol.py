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
- A bound on a request's head (the request line and headers): past `max_head_bytes`
  (16 KiB) a 431 in OpenAI's shape, then a close. h11 raises at that size only while the
  head is incomplete in its buffer; a whole head that arrived in one read is measured as
  the request starts (`HeadLimit`), so the bound does not depend on how the bytes came.
- uvicorn's own 400 for a request h11 cannot parse (`Content-Length: abc`) is sent in
  OpenAI's error shape instead of plain text.
- A refusal sent before the request was read (that 400, the 431) closes without a reset:
  the write side is shut and what the client still sends is read and dropped, for at most
  `LINGER_S` (a close with unread bytes in the socket makes the kernel send a reset, which
  may reach the client before the reply does: a 200 KB header line got only the reset).

`guarded_protocol(limits)` makes the class handed to uvicorn.Config(http=...); every
connection of one server shares the `ConnectionLimits`.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("foldserve.api")

MAX_HEAD_BYTES = 16384      # h11's own default bound on an incomplete event
LINGER_S = 2.0              # a refused connection reads and drops the client's bytes this long
DRAIN_BYTES = 1 << 20       # a body read and dropped before a 431 that came as a response


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
    max_head_bytes: int = MAX_HEAD_BYTES            # request line and headers, at most


def error_body(status: int, message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error"
                                 if status < 500 else "service_unavailable",
                                 "param": None, "code": code}}).encode("ascii")


def head_too_large(limit: int, size: int | None = None) -> bytes:
    got = (f"are {size} bytes" if size is not None
           else f"passed {limit} bytes before their end arrived")
    return error_body(431, f"The request line and headers {got}; this server takes at most "
                      f"{limit} bytes of them", "request_header_too_large")


def head_size(scope) -> int:
    """The bytes of a request's head as sent, from its ASGI scope: the request line
    (`GET /path?q HTTP/1.1` and CRLF), then `name: value` and CRLF a header."""
    target = len(scope["raw_path"]) + (len(scope["query_string"]) + 1
                                       if scope["query_string"] else 0)
    return (len(scope["method"]) + target + 12
            + sum(len(k) + len(v) + 4 for k, v in scope["headers"]))


class HeadLimit:
    """A whole head past the bound (it arrived in one read, so h11 never held it incomplete):
    a 431 and a close, its body (up to DRAIN_BYTES, for at most LINGER_S) read and dropped
    first, so the close leaves no unread bytes to reset the reply."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        size = head_size(scope) if scope["type"] == "http" else 0
        if size <= self.limit:
            return await self.app(scope, receive, send)
        try:
            await asyncio.wait_for(_drain(receive), LINGER_S)
        except asyncio.TimeoutError:
            pass
        body = head_too_large(self.limit, size)
        await send({"type": "http.response.start", "status": 431, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


async def _drain(receive) -> None:
    left = DRAIN_BYTES
    while left > 0:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return
        left -= len(message.get("body", b""))


class HintedConnection(h11.Connection):
    """h11's connection, keeping the status its last protocol error hinted (431 for a head
    past max_incomplete_event_size): uvicorn catches the error and drops it."""
    error_hint: int | None = None

    def next_event(self):
        try:
            return super().next_event()
        except h11.RemoteProtocolError as e:
            self.error_hint = e.error_status_hint
            raise


def raw_error(status: int, reason: str, message: str, code: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 error response with an OpenAI-shaped body, for moments when h11
    holds no request to answer (it would refuse to send a response)."""
    return raw_reply(status, reason, error_body(status, message, code), extra)


def raw_reply(status: int, reason: str, body: bytes, extra: str = "") -> bytes:
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n")
    return head.encode("ascii") + body


def guarded_protocol(limits: ConnectionLimits) -> type:
    class GuardedH11Protocol(H11Protocol):
        _limits = limits

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.conn = HintedConnection(h11.SERVER, self._limits.max_head_bytes)
            self.app = HeadLimit(self.app, self._limits.max_head_bytes)
            self._lingering = False
            self._linger_timer = None

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
            if self._linger_timer is not None:
                self._linger_timer.cancel()
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
            if self._lingering:                 # refused: read and dropped (_linger)
                return
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
            """What uvicorn calls when h11 cannot parse the request: a 431 where h11's hint
            says the head grew past the bound, else a 400."""
            self._request_started()
            if self.conn.error_hint == 431:
                self.transport.write(raw_reply(431, "Request Header Fields Too Large",
                                               head_too_large(self._limits.max_head_bytes)))
            else:
                self.transport.write(raw_error(400, "Bad Request", f"{msg} (malformed HTTP: "
                                               "request line or headers)", "invalid_http"))
            if self.cycle is not None and not self.cycle.response_complete:
                self.transport.close()          # mid-request: the app's reply is cut short
            else:
                self._linger()

        def _linger(self) -> None:
            """Close without resetting the reply just written: shut the write side (the
            client reads the reply, then EOF), read and drop what it still sends, and close
            at its EOF (uvicorn's eof_received) or after LINGER_S. Evictable meanwhile, like
            a connection waiting for a request."""
            self._lingering = True
            if not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()
            self._limits.waiting[self] = None
            self._linger_timer = self.loop.call_later(LINGER_S, self._close_waiting)

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
