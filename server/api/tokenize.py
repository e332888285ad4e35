"""POST /tokenize and POST /detokenize, as vLLM serves them."""
from __future__ import annotations

import json
import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .request_checks import check_model, parse_body
from .chat import chat_prompt_ids
from .errors import invalid
from .schemas import DetokenizeRequest, TokenizeRequest
from .textflow import check_token_ids, encode
from .textwork import text_work

router = APIRouter()


@router.post("/tokenize")
async def tokenize(request: Request):
    state = request.app.state.foldserve
    body = await parse_body(request, TokenizeRequest)
    check_model(state, body.model)
    if (body.prompt is None) == (body.messages is None):
        raise invalid("send exactly one of 'prompt' (text) or 'messages' (a chat)",
                      param="prompt")
    # a 4 MB prompt's reply is a million ids: rendered on the worker too, not the loop
    return Response(await text_work(request).run(_reply, state, body),
                    media_type="application/json")


IDS_AT_ONCE = 50_000       # ids rendered a slice at a time (json.dumps holds the GIL)


def _reply(state, body: TokenizeRequest) -> bytes:
    """The same bytes as json.dumps({"tokens", "count", "max_model_len"}, compact), built a
    slice of ids at a time: a million ids in one call held the GIL ~0.1 s, stalling the event
    loop's thread beside this worker."""
    ids = _token_ids(state, body)
    pieces = []
    for i in range(0, len(ids), IDS_AT_ONCE):
        pieces.append(",".join(map(str, (int(t) for t in ids[i:i + IDS_AT_ONCE]))))
        time.sleep(0)
    tail = json.dumps({"count": len(ids), "max_model_len": state.context}, separators=(",", ":"))
    return ('{"tokens":[' + ",".join(pieces) + "]," + tail[1:]).encode()


def _token_ids(state, body: TokenizeRequest) -> list[int]:
    if body.prompt is not None:
        return encode(state.tokenizer, body.prompt, add_special_tokens=body.add_special_tokens
                      is not False)
    if not body.messages:
        raise invalid("messages is empty", param="messages")
    ids = chat_prompt_ids(state, body.messages, body.add_generation_prompt is not False)
    if body.add_special_tokens:     # chat templates write their own specials
        bos = getattr(state.tokenizer, "bos_id", None)
        ids = ([bos] if bos is not None else []) + ids
    return ids


@router.post("/detokenize")
async def detokenize(request: Request):
    state = request.app.state.foldserve
    body = await parse_body(request, DetokenizeRequest)
    check_model(state, body.model)
    check_token_ids(state.tokenizer, body.tokens, "tokens")
    return {"prompt": state.tokenizer.decode(list(body.tokens))}
