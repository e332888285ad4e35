"""The checks every generating request passes before it reaches the scheduler."""
from __future__ import annotations

import json

from fastapi import Request
from pydantic import BaseModel, ValidationError

from .errors import ApiError, invalid, validation_error


async def parse_body(request: Request, model: type[BaseModel]) -> BaseModel:
    """Malformed JSON, a non-object body and wrong types are 400s naming the field."""
    raw = await request.body()
    if not raw.strip():
        raise invalid("The request body is empty; send a JSON object")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise invalid(f"The request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise invalid(f"The request body must be a JSON object, not {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise validation_error(e.errors(include_url=False)) from None


def check_model(state, model: str | None) -> None:
    if model is not None and model not in getattr(state, "names", (state.model_name,)):
        raise ApiError(404, f"The model '{model}' does not exist; this server serves "
                       f"'{state.model_name}'", param="model", code="model_not_found")


def admit(state) -> dict:
    """503 while a rank is gone or the queue is full: refuse now rather than hang."""
    try:
        stats = state.scheduler.stats()
    except Exception as e:
        raise ApiError(503, f"the scheduler is not answering ({type(e).__name__}: {e})",
                       code="scheduler_unavailable") from e
    if not stats.get("ranks_ok", True):
        raise ApiError(503, f"a rank is gone (ranks: {stats.get('ranks')}); this server "
                       "cannot generate until it is restarted", code="rank_lost")
    queue = int(stats.get("queue", 0) or 0)
    if queue >= state.max_queue:
        raise ApiError(503, f"the queue is full ({queue} requests waiting, --max-queue "
                       f"{state.max_queue}); retry shortly", code="queue_full",
                       headers={"Retry-After": "1"})
    return stats
