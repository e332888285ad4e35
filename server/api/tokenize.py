"""POST /tokenize and POST /detokenize, as vLLM serves them.

/tokenize: `prompt` (a completions prompt) or `messages` (a chat: with `tools` rendered as
a chat with those tools renders them, and `chat_template_kwargs`); `return_token_strs`
adds `token_strs`, each token's vocabulary string (byte-level BPE's `Ġ` for a space, as
vLLM's convert_ids_to_tokens gives them)."""
from __future__ import annotations

import json
import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .request_checks import check_model, parse_body
from . import tools as toolmod
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
    for name in ("tools", "chat_template_kwargs"):
        if body.prompt is not None and getattr(body, name) is not None:
            raise invalid(f"{name} go with messages (a chat), not with prompt", param=name)
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
    rest = {"count": len(ids), "max_model_len": state.context}
    if getattr(body, "return_token_strs", False):
        rest["token_strs"] = token_strs(state.tokenizer, ids)
    tail = json.dumps(rest, separators=(",", ":"), ensure_ascii=False)
    return ('{"tokens":[' + ",".join(pieces) + "]," + tail[1:]).encode()


def token_strs(tok, ids) -> list[str]:
    """Each id's string in the vocabulary (the tokenizer's own piece; a tokenizer without
    one: the id's decoded text)."""
    hf = getattr(tok, "hf", None)
    if hf is not None:
        return [hf.id_to_token(int(t)) or "" for t in ids]
    return [tok.decode([int(t)]) for t in ids]


def _token_ids(state, body: TokenizeRequest) -> list[int]:
    if body.prompt is not None:
        return encode(state.tokenizer, body.prompt, add_special_tokens=body.add_special_tokens
                      is not False)
    if not body.messages:
        raise invalid("messages is empty", param="messages")
    names = [t.function.name for t in body.tools or ()]
    if len(set(names)) != len(names):
        raise invalid("two tools have the same function name", param="tools")
    plan = toolmod.ToolPlan("auto", [t.model_dump(exclude_none=True) for t in body.tools]) \
        if body.tools else None
    ids = chat_prompt_ids(state, body.messages, body.add_generation_prompt is not False, plan,
                          body.chat_template_kwargs)
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
