"""Body size limit (pure ASGI middleware): 413 past --max-body-bytes, judged by the
Content-Length header and by the bytes that really arrive (chunked bodies too).

The body is read here once and replayed to the app; after it, receive() passes
through, so the app still hears http.disconnect when the client leaves. While the app
handles a body past LARGE_BODY, Python's full garbage collections are held off
(server/api/gchold.py): its objects go by reference counting, not in a GIL-holding pass."""
from __future__ import annotations

from .errors import ApiError, invalid
from .gchold import LargeBody
from .request_checks import LARGE_BODY


def too_large(limit: int, size: int | None) -> ApiError:
    got = f"{size} bytes" if size is not None else "more"
    return ApiError(413, f"The request body is too large: {got}; this server takes at most "
                    f"{limit} bytes (--max-body-bytes)", code="request_too_large")


class BodyLimit:
    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            if not length.strip().isdigit():
                return await invalid("Content-Length is not a number").response()(scope, receive, send)
            if int(length) > self.max_bytes:
                return await too_large(self.max_bytes, int(length)).response()(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await too_large(self.max_bytes, None).response()(scope, receive, send)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if len(body) <= LARGE_BODY:
            return await self.app(scope, replay, send)
        with LargeBody():
            await self.app(scope, replay, send)
