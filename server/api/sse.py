"""Server-sent events as OpenAI's chat and completions stream them: `data: {json}\\n\\n` per
chunk, `data: [DONE]` last; an error after the stream opened is one `data: {"error": {...}}`
event, then [DONE]. And as the Responses and Messages APIs stream them (`typed_sse_response`):
`event: TYPE\\ndata: {json}\\n\\n`, the event's name its data's "type", no [DONE]; an error
after the stream opened is the events the route's `on_error` makes of it, then the end."""
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


def typed_event(obj: dict) -> bytes:
    return b"event: " + obj["type"].encode() + b"\n" + event(obj)


async def _typed_events(events, on_error):
    try:
        async for obj in events:
            yield typed_event(obj)
    except ApiError as e:
        for obj in on_error(e):
            yield typed_event(obj)
    except Exception as e:  # a bug: still close the stream the way clients expect
        log.exception("error inside a stream")
        for obj in on_error(ApiError(500, f"Internal server error ({type(e).__name__}) inside "
                                     "the stream; this is a bug in foldserve",
                                     code="internal_error")):
            yield typed_event(obj)


def typed_sse_response(events, on_error) -> StreamingResponse:
    """events: an async iterator of dicts, each with a "type"; on_error(ApiError) -> the
    dicts that end the stream when it raises."""
    return StreamingResponse(_typed_events(events, on_error), media_type="text/event-stream",
                             headers=HEADERS)


def sse_response(chunks) -> StreamingResponse:
    """chunks: an async iterator of dicts; raising ApiError ends it with an error event."""
    return StreamingResponse(_events(chunks), media_type="text/event-stream", headers=HEADERS)
