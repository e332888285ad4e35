"""Text around the token stream: chat rendering, token-id checks, and the text layer's
streaming pieces (server.text: IncrementalDetokenizer, StopMatcher)."""
from __future__ import annotations

import json

from server.text import ChatTemplateError, IncrementalDetokenizer, StopMatcher, StopSet, render_chat

from .errors import ApiError, invalid


def detokenizer(tok, prompt_ids=(), skip_special_tokens: bool = True) -> IncrementalDetokenizer:
    return IncrementalDetokenizer(tok, skip_special_tokens=skip_special_tokens,
                                  context=list(prompt_ids)[-1:])


def stop_matcher(stops: StopSet | list[str], include_stop: bool = False) -> StopMatcher:
    return StopMatcher(stops, include_stop=include_stop)


# Stops of more characters than this are compiled on a text worker (32 stops of 512
# characters, the most sampling.py takes, take tens of ms); fewer cost microseconds.
INLINE_STOP_CHARS = 1024


async def stop_set(work, stops: list[str]) -> StopSet:
    """The request's stop automaton, shared by its choices; `work`: the TextWork pool."""
    if sum(map(len, stops)) <= INLINE_STOP_CHARS:
        return StopSet(stops)
    return await work.run(StopSet, stops)


def message_dicts(messages) -> list[dict]:
    """pydantic Messages -> the plain dicts a chat template expects; parts joined."""
    out = []
    for i, m in enumerate(messages):
        if isinstance(m.content, list):
            texts = []
            for j, part in enumerate(m.content):
                if part.type != "text" or part.text is None:
                    raise invalid(f"messages[{i}].content[{j}]: only parts of type 'text' "
                                  f"with a 'text' string are supported, got type {part.type!r}",
                                  param=f"messages[{i}].content[{j}].type")
                texts.append(part.text)
            content = "".join(texts)
        else:
            content = m.content if m.content is not None else ""
        d = {"role": m.role, "content": content}
        if m.name is not None:
            d["name"] = m.name
        if m.tool_calls:        # arguments as objects, as HF templates (and vLLM) take them
            d["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.function.name, "arguments": _arguments(c.function.arguments, i)}}
                for c in m.tool_calls]
        if m.role == "tool":
            if not m.tool_call_id:
                raise invalid(f"messages[{i}]: a 'tool' message needs 'tool_call_id' (the id "
                              "of the assistant's tool call it answers)",
                              param=f"messages[{i}].tool_call_id")
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


def _arguments(args, i: int):
    if isinstance(args, dict):
        return args
    try:
        value = json.loads(args)
    except json.JSONDecodeError as e:
        raise invalid(f"messages[{i}].tool_calls: arguments is not JSON: {e}",
                      param=f"messages[{i}].tool_calls") from None
    if not isinstance(value, dict):
        raise invalid(f"messages[{i}].tool_calls: arguments must be a JSON object",
                      param=f"messages[{i}].tool_calls")
    return value


def chat_template(state) -> str | None:
    """--chat-template's, else the model's own (None: the default ChatML)."""
    return getattr(state, "chat_template", None) or getattr(state.tokenizer, "chat_template", None)


def render_chat_prompt(state, messages: list[dict], add_generation_prompt: bool = True,
                       **extra) -> str:
    if state.render_chat is not None:
        try:
            return state.render_chat(messages)
        except ValueError as e:
            raise invalid(str(e), param="messages") from e
    tok = state.tokenizer
    try:
        return render_chat(chat_template(state), messages,
                           add_generation_prompt=add_generation_prompt,
                           bos_token=getattr(tok, "bos_token", "") or "",
                           eos_token=getattr(tok, "eos_token", "") or "",
                           literal=getattr(tok, "literal", None), **extra)
    except ChatTemplateError as e:
        raise invalid(str(e), param="messages", code="chat_template_error") from e


def check_token_ids(tok, ids, param: str) -> None:
    vocab = getattr(tok, "vocab_size", None)
    if isinstance(vocab, int) and vocab > 0:
        bad = [t for t in ids if t >= vocab]
        if bad:
            raise invalid(f"token id {bad[0]} is out of range; this model's vocabulary has "
                          f"{vocab} tokens (ids 0..{vocab - 1})", param=param)


def encode_chat(tok, text: str) -> list[int]:
    """A rendered chat prompt: the template's markers are control tokens, special tokens'
    text from the messages is text (server.text.literal); no BOS added."""
    literal = getattr(tok, "literal", None)
    if literal is None:
        return encode(tok, text, add_special_tokens=False)
    try:
        return literal.encode(text)
    except ValueError as e:
        raise invalid(f"could not tokenize the text: {e}") from e


def encode(tok, text: str, add_special_tokens: bool) -> list[int]:
    try:
        return list(tok.encode(text, add_special_tokens=add_special_tokens))
    except ApiError:
        raise
    except (ValueError, TypeError) as e:
        raise invalid(f"could not tokenize the text: {e}") from e
