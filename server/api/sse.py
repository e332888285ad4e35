"""Server-sent events as OpenAI streams them: `data: {json}\\n\\n` per chunk, `data: [DONE]`
last. An error after the stream opened is one `data: {"error": {...}}` event, then [DONE]."""
from __future__ import annotations

import json
import logging

from fastapi.responses import StreamingResponse

from .errors import ApiError

log = logging.getLogger("foldserve.api")

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def _events(chunks):
    try:
        async for obj in chunks:
            yield event(obj)
    except ApiError as e:
        yield event(e.body())
    except Exception as e:  # a bug: still close the stream the way clients expect
        log.exception("error inside a stream")
        yield event(ApiError(500, f"Internal server error ({type(e).__name__}) inside the "
                             "stream; this is a bug in foldserve", code="internal_error").body())
    yield DONE


def sse_response(chunks) -> StreamingResponse:
    """chunks: an async iterator of dicts; raising ApiError ends it with an error event."""
    return StreamingResponse(_events(chunks), media_type="text/event-stream", headers=HEADERS)
