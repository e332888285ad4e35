"""Chat templates render as transformers does, and bad templates fail as ChatTemplateError."""
from __future__ import annotations

import pytest

from server.text.chat_template import DEFAULT_CHAT_TEMPLATE, ChatTemplateError, render_chat

from .cases import CHAT_MESSAGES


def test_golden_chats_render_from_the_gguf_template(smollm, golden_cases):
    cases = {c["name"]: c for c in golden_cases}
    for name, messages in CHAT_MESSAGES.items():
        text = render_chat(smollm.chat_template, messages, add_generation_prompt=True,
                           bos_token=smollm.bos_token, eos_token=smollm.eos_token)
        assert text == cases[name]["text"], name
        assert smollm.encode(text) == cases[name]["prompt_ids"], name


def test_gguf_template_adds_default_system_prompt(smollm):
    text = render_chat(smollm.chat_template, [{"role": "user", "content": "Hi"}])
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_default_template_is_chatml():
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert render_chat(None, msgs, add_generation_prompt=False) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n")
    assert render_chat(DEFAULT_CHAT_TEMPLATE, msgs[:1]).endswith("<|im_start|>assistant\n")


def test_hf_conventions():
    # trim_blocks/lstrip_blocks: block tags leave no newline or indent behind
    t = "{% for m in messages %}\n    {% if m.content %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}"
    assert render_chat(t, [{"content": "a"}, {"content": "b"}]) == "a\nb\n"
    # loop controls, extra variables, tojson keeping non-ASCII
    t = "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m.content }}{% endfor %}"
    assert render_chat(t, [{"content": "x"}, {"content": "y"}]) == "x"
    assert render_chat("{{ tools | tojson }}", [], tools=[{"n": "東京"}]) == '[{"n": "東京"}]'
    assert render_chat("{{ bos_token }}|{{ eos_token }}", [], bos_token="<s>", eos_token="</s>") == "<s>|</s>"
    assert len(render_chat("{{ strftime_now('%Y-%m-%d') }}", [])) == 10


def test_raise_exception_reaches_the_caller_with_its_message():
    t = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first message must be user') }}{% endif %}"
    with pytest.raises(ChatTemplateError, match="first message must be user"):
        render_chat(t, [{"role": "assistant", "content": "x"}])


@pytest.mark.parametrize("template, messages, match", [
    ("{% for %}", [], "does not parse"),
    (DEFAULT_CHAT_TEMPLATE, [{"role": "user", "content": None}], "TypeError"),
    (DEFAULT_CHAT_TEMPLATE, [{"role": "user"}], "failed"),
    ("{{ messages.__class__.__mro__ }}", [], "unsafe"),
    ("{{ messages.append(1) }}", [], "unsafe"),
])
def test_template_failures_are_chat_template_errors(template, messages, match):
    with pytest.raises(ChatTemplateError, match=match):
        render_chat(template, messages)
