"""Text around the token stream: chat rendering, token-id checks, and the text layer's
streaming pieces (server.text: IncrementalDetokenizer, StopMatcher)."""
from __future__ import annotations

from server.text import ChatTemplateError, IncrementalDetokenizer, StopMatcher, render_chat

from .errors import ApiError, invalid


def detokenizer(tok, prompt_ids=()) -> IncrementalDetokenizer:
    return IncrementalDetokenizer(tok, context=list(prompt_ids)[-1:])


def stop_matcher(stops: list[str]) -> StopMatcher:
    return StopMatcher(stops)


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
        if m.role == "tool":
            if not m.tool_call_id:
                raise invalid(f"messages[{i}]: a 'tool' message needs 'tool_call_id' (the id "
                              "of the assistant's tool call it answers)",
                              param=f"messages[{i}].tool_call_id")
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


def render_chat_prompt(state, messages: list[dict], add_generation_prompt: bool = True) -> str:
    if state.render_chat is not None:
        try:
            return state.render_chat(messages)
        except ValueError as e:
            raise invalid(str(e), param="messages") from e
    tok = state.tokenizer
    try:
        return render_chat(getattr(tok, "chat_template", None), messages,
                           add_generation_prompt=add_generation_prompt,
                           bos_token=getattr(tok, "bos_token", "") or "",
                           eos_token=getattr(tok, "eos_token", "") or "",
                           literal=getattr(tok, "literal", None))
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
