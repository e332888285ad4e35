"""Render a chat through the model's jinja2 template, as transformers' apply_chat_template does.

Templates come from model files, so they run in jinja2's immutable sandbox: no
attribute access to python internals, no mutation of the messages we pass in.
trim_blocks/lstrip_blocks and the loopcontrols extension match HF, which every
published template is written against. Any failure inside a template, including the
template's own raise_exception("..."), becomes a ChatTemplateError: the request was
bad (or the template is), never a 500.
"""
from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Used when a model ships no template: plain ChatML, which most small chat models speak.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class ChatTemplateError(ValueError):
    pass


def _raise_exception(message):
    raise ChatTemplateError(f"chat template refused the messages: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # HF's tojson keeps non-ASCII as is (jinja's own escapes it and HTML-quotes '<')
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


@lru_cache(maxsize=16)
def _compile(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(template)


def check(template: str) -> jinja2.Template:
    """`template` compiled (cached), or a ChatTemplateError if it does not parse; serve calls
    it on --chat-template at startup, before any weight is read."""
    try:
        return _compile(template)
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(f"chat template does not parse (line {e.lineno}): {e.message}") from e


def render_chat(template: str | None, messages: list[dict], add_generation_prompt: bool = True,
                bos_token: str = "", eos_token: str = "", literal=None, **extra) -> str:
    """The prompt text for `messages`; `template` None means DEFAULT_CHAT_TEMPLATE.

    `extra` reaches the template as variables (tools, documents, enable_thinking, ...).
    `literal` (a text.literal.Literal): special tokens' text in the messages and extra
    stays text; encode the result with literal.encode, not a plain encode.
    """
    if literal is not None:
        messages, extra = literal.protect(messages), literal.protect(extra)
    compiled = check(template if template is not None else DEFAULT_CHAT_TEMPLATE)
    try:
        return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=bos_token, eos_token=eos_token, **extra)
    except ChatTemplateError:
        raise
    except Exception as e:  # a template is foreign code: any failure is the template's or the input's
        raise ChatTemplateError(f"chat template failed on these messages: {type(e).__name__}: {e}") from e
