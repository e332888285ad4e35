"""The checks every generating request passes before it reaches the scheduler."""
from __future__ import annotations

import json
import time

from fastapi import Request
from pydantic import BaseModel, ValidationError

from . import slicedjson
from .backlog import Ticket
from .drain import shutting_down
from .errors import ApiError, invalid, validation_error
from .media_type import require_json


LARGE_BODY = 256 << 10     # bodies past this are decoded on a text worker, not the loop


async def parse_body(request: Request, model: type[BaseModel]) -> BaseModel:
    """A body not typed JSON is a 415 (media_type.py); malformed JSON, a non-object body and
    wrong types are 400s naming the field."""
    require_json(request)
    raw = await request.body()
    if not raw.strip():
        raise invalid("The request body is empty; send a JSON object")
    if len(raw) > LARGE_BODY:   # megabytes of JSON, or a chat of 100,000 messages
        return await request.app.state.text_work.run(decode_body, raw, model)
    return decode_body(raw, model)


def decode_body(raw: bytes, model: type[BaseModel]) -> BaseModel:
    try:                        # a large body's long arrays parsed a slice at a time
        data = slicedjson.loads(raw) if len(raw) > LARGE_BODY else json.loads(raw)
    except RecursionError:
        raise invalid("The request body is nested too deeply") from None
    except ValueError as e:     # bad JSON, bad UTF-8, an integer past Python's digit limit
        raise invalid(f"The request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise invalid(f"The request body must be a JSON object, not {type(data).__name__}")
    check_text(data)
    try:
        return _validate(model, data)
    except RecursionError:
        raise invalid("The request body is nested too deeply") from None
    except ValidationError as e:
        raise validation_error(e.errors(include_url=False)) from None


MESSAGES_AT_ONCE = 2048    # a chat's messages validated in slices of this many


def _validate(model: type[BaseModel], data: dict) -> BaseModel:
    """model.model_validate(data); a chat of many messages is validated a slice at a time.
    pydantic validates in one call that holds the GIL (0.37 s for 110,000 messages here),
    which would stall the event loop's thread beside this worker; between slices the loop
    runs. The same errors (locations offset to the whole list), the same model."""
    msgs = data.get("messages")
    if ("messages" not in model.model_fields or not isinstance(msgs, list)
            or len(msgs) <= MESSAGES_AT_ONCE):
        return model.model_validate(data)
    from pydantic import TypeAdapter
    # the model's own message list (chat's Message, Anthropic's MessageIn), its bounds
    # (min_length) left to the last call below
    adapter = TypeAdapter(model.model_fields["messages"].annotation)
    parts: list = []
    for i in range(0, len(msgs), MESSAGES_AT_ONCE):
        try:
            parts.extend(adapter.validate_python(msgs[i:i + MESSAGES_AT_ONCE]))
        except ValidationError as e:
            errs = [{**err, "loc": ("messages", err["loc"][0] + i, *err["loc"][1:])}
                    for err in e.errors(include_url=False)]
            raise validation_error(errs) from None
        time.sleep(0)           # let the event loop's thread take the GIL
    body = model.model_validate({**data, "messages": msgs[:1]})   # the other fields, the validators
    return body.model_copy(update={"messages": parts})


def check_text(data, where: str = "") -> None:
    """Every string (keys too) must be encodable as UTF-8: JSON lets a body carry a lone
    surrogate ("\\ud800"), which no tokenizer, template or reply can hold."""
    stack = [(data, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise invalid(f"Invalid value for '{at or 'the request body'}': the text "
                                  f"holds a lone surrogate ({value[e.start]!a} at character "
                                  f"{e.start}); send valid Unicode", param=at or None) from None
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, at))
                stack.append((v, f"{at}.{k}" if at else str(k)))
        elif isinstance(value, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(value))


def check_model(state, model: str | None) -> None:
    if model is not None and model not in getattr(state, "names", (state.model_name,)):
        raise ApiError(404, f"The model '{model}' does not exist; this server serves "
                       f"'{state.model_name}'", param="model", code="model_not_found")


def admit(state) -> Ticket:
    """503 while the server shuts down (server/api/drain.py), a rank is gone or the queue
    is full: refuse now rather than hang.

    The queue is the API's own count (server/api/backlog.py): requests accepted and not yet
    finished, beyond the streams that can run. A request is admitted while the accepted
    ones, itself included, fit the streams plus `--max-queue` (0: no waiting room, admitted
    while a stream is free). The returned ticket holds the place until released."""
    if state.drain.started:
        raise shutting_down()
    try:
        stats = state.scheduler.stats()
    except Exception as e:
        raise ApiError(503, f"the scheduler is not answering ({type(e).__name__}: {e})",
                       code="scheduler_unavailable") from e
    if not stats.get("ranks_ok", True):
        raise ApiError(503, f"a rank is gone (ranks: {stats.get('ranks')}); this server "
                       "cannot generate until it is restarted", code="rank_lost")
    streams = int(stats.get("streams_total", 0) or 0)
    queue = state.backlog.waiting(streams)
    if state.backlog.count >= streams + state.max_queue:   # this one would wait past the room
        raise ApiError(503, f"the queue is full ({queue} requests waiting beside {streams} "
                       f"streams, --max-queue {state.max_queue}); retry shortly",
                       code="queue_full", headers={"Retry-After": "1"})
    return state.backlog.enter()
