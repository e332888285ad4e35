"""gpt-oss's harmony format through the official `openai` client: the analysis channel as
reasoning_content, final as content, commentary calls to functions.X as tool_calls, whole
and streamed (the fake scheduler sends the reply a byte at a time, so every marker is cut
across pieces); reasoning_effort low / medium / high written into the system message by a
harmony template (tests/data/gptoss/harmony_chat_template.jinja, the format gpt-oss's own
template renders); nothing of the markup in content; the parser chosen from the template
or the model's name; the Messages / Responses blocks (constrained replies:
test_harmony_constraint.py)."""
from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient

from api_fakes import BYTE0, FakeScheduler, default_tokenizer, make_state
from server.api import create_app
from server.text.harmony import MARKERS, HarmonyStream, parse
from server.text.reasoning import resolve_parser
from server.text.tool_calls import Call

TEMPLATE = (Path(__file__).resolve().parents[1] / "data" / "gptoss"
            / "harmony_chat_template.jinja").read_text()
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
ANSWER = ("<|channel|>analysis<|message|>The user asks about Paris. Answer briefly.<|end|>"
          "<|start|>assistant<|channel|>final<|message|>It is sunny in Paris.")
CALL = ("<|channel|>analysis<|message|>Need the weather tool.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        "<|message|>{\"city\": \"Paris\"}")
TWO_CALLS = (CALL + "<|call|><|start|>assistant to=functions.get_weather<|channel|>commentary "
             "json<|message|>{\"city\":\"Lyon\"}<|call|>")


def state_for(reply: str, template: str = TEMPLATE, parser: str = "auto"):
    sched = FakeScheduler(reply=reply, eos_after=len(reply.encode()))
    state = make_state(sched, context=8192)
    state.render_chat, state.chat_template, state.reasoning_parser = None, template, parser
    return sched, state


def client(state) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key="x", max_retries=0,
                         http_client=TestClient(create_app(state)))


def prompt_text(req) -> str:
    return bytes(i - BYTE0 for i in req.prompt_ids).decode()


def no_markup(text):
    assert text is None or not any(m in text for m in MARKERS), text


def streamed(c, **kw):
    reasoning, content, calls, finish = "", "", {}, None
    for ch in c.chat.completions.create(model="fake-model", messages=MSGS, stream=True, **kw):
        d = ch.choices[0].delta
        reasoning += (d.model_extra or {}).get("reasoning_content") or ""
        content += d.content or ""
        for tc in d.tool_calls or ():
            slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            if tc.function is not None:
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    return reasoning, content, [calls[i] for i in sorted(calls)], finish


def test_analysis_is_reasoning_and_final_is_content_whole_and_streamed():
    _, state = state_for(ANSWER)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=400)
    msg = r.choices[0].message
    assert msg.content == "It is sunny in Paris."
    assert msg.model_extra["reasoning_content"] == "The user asks about Paris. Answer briefly."
    assert msg.tool_calls is None and r.choices[0].finish_reason == "stop"
    got = streamed(c, max_tokens=400)
    assert got == ("The user asks about Paris. Answer briefly.", "It is sunny in Paris.", [], "stop")
    no_markup(got[1])


@pytest.mark.parametrize("reply, want", [
    (CALL, [("get_weather", {"city": "Paris"})]),
    (CALL + "<|call|>", [("get_weather", {"city": "Paris"})]),
    (TWO_CALLS, [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]),
])
def test_commentary_calls_are_tool_calls_whole_and_streamed(reply, want):
    _, state = state_for(reply)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS, max_tokens=400)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.content is None and msg.model_extra["reasoning_content"] == "Need the weather tool."
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == want
    assert all(t.id.startswith("call_") and t.type == "function" for t in msg.tool_calls)
    reasoning, content, calls, finish = streamed(c, tools=TOOLS, max_tokens=400)
    assert (reasoning, content, finish) == ("Need the weather tool.", "", "tool_calls")
    assert [(k["name"], json.loads(k["arguments"])) for k in calls] == want
    assert all(k["id"] and k["id"].startswith("call_") for k in calls)


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_reasoning_effort_reaches_the_system_message(effort):
    sched, state = state_for(ANSWER)
    client(state).chat.completions.create(model="fake-model", messages=MSGS, max_tokens=1,
                                          reasoning_effort=effort)
    text = prompt_text(sched.started[-1])
    system = text[text.index("<|start|>system<|message|>"):text.index("<|end|>")]
    assert f"\nReasoning: {effort}\n" in system
    assert text.endswith("<|start|>user<|message|>What is the weather in Paris?<|end|>"
                         "<|start|>assistant")


def test_a_tool_round_renders_through_the_template():
    sched, state = state_for(ANSWER)
    msgs = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
    r = client(state).chat.completions.create(model="fake-model", messages=msgs, tools=TOOLS,
                                              max_tokens=400)
    assert r.choices[0].message.content == "It is sunny in Paris."
    text = prompt_text(sched.started[-1])
    assert "namespace functions {" in text and "type get_weather = (_: {" in text
    assert ("<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
            "{\"city\": \"Paris\"}<|call|><|start|>functions.get_weather to=assistant"
            "<|channel|>commentary<|message|>sunny, 21 C<|end|><|start|>assistant") in text


def test_include_reasoning_false_and_parser_none():
    _, state = state_for(ANSWER)
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS, max_tokens=400,
                                              extra_body={"include_reasoning": False})
    assert r.choices[0].message.content == "It is sunny in Paris."
    assert "reasoning_content" not in (r.choices[0].message.model_extra or {})
    _, state = state_for(ANSWER, parser="none")
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS, max_tokens=400)
    assert r.choices[0].message.content == ANSWER        # raw, as asked


def test_the_parser_is_chosen_by_template_or_family():
    assert resolve_parser("auto", TEMPLATE) == "harmony"
    assert resolve_parser("auto", None, "gpt-oss-20b-MXFP4") == "harmony"
    assert resolve_parser("openai_gptoss", None) == "harmony"
    assert resolve_parser("harmony", "{{ messages }}") == "harmony"
    assert resolve_parser("auto", "{{ messages }}", "SmolLM2") is None


@pytest.mark.parametrize("text", [ANSWER, CALL, TWO_CALLS, ANSWER + "<|return|>",
                                  "plain words, no markup", "<|channel|>analysis<|message|>cut",
                                  "<|channel|>commentary<|message|>A preamble.<|end|>"
                                  "<|start|>assistant<|channel|>final<|message|>Done.", "<|chan", ""])
@pytest.mark.parametrize("step", [1, 2, 3, 7])
def test_streamed_parts_join_to_the_whole(text, step):
    s, parts = HarmonyStream(), []
    for i in range(0, len(text), step):
        parts += s.push(text[i:i + step])
    parts += s.finish()
    reasoning = "".join(v for p, v in parts if p == "reasoning") or None
    content = "".join(v for p, v in parts if p == "content") or None
    assert (reasoning, content, [v for p, v in parts if p == "call"]) == parse(text)
    no_markup(reasoning)
    no_markup(content)


def test_parse_cases():
    assert parse("plain words") == (None, "plain words", [])
    assert parse("<|channel|>analysis<|message|>cut") == ("cut", None, [])
    assert parse("<|channel|>commentary<|message|>A preamble.<|end|><|start|>assistant"
                 "<|channel|>final<|message|>Done.") == (None, "A preamble.Done.", [])
    assert parse("<|chan") == (None, None, [])
    # a call cut by max_tokens keeps its arguments as written
    assert parse("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ") == \
        (None, None, [Call("f", "{\"a\": ")])


def test_messages_and_responses_blocks():
    from server.api import tools as toolmod
    from server.api.reasoning_plan import ReasoningPlan
    from server.api.reply_blocks import ReplyBlocks
    plan = toolmod.ToolPlan("auto", TOOLS)
    blocks = ReplyBlocks(plan, ReasoningPlan("harmony")).whole(
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary"
        "<|message|>Let me look.<|end|>" + TWO_CALLS[len("<|channel|>analysis<|message|>Need "
                                                         "the weather tool.<|end|>"):])
    assert [(b.kind, b.name, b.text) for b in blocks] == [
        ("text", None, "Let me look."), ("call", "get_weather", "{\"city\": \"Paris\"}"),
        ("call", "get_weather", "{\"city\": \"Lyon\"}")]


def test_a_harmony_vocabulary_stops_at_return_and_call_not_end(tmp_path):
    """An HF folder whose tokenizer has the harmony tokens (gpt-oss's eos <|return|>, its
    generation_config's [<|return|>, <|endoftext|>, <|call|>]): the stops are those three,
    and <|end|> (END_OF_TURN elsewhere) is not one: the final channel follows it."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HF
    from tokenizers.models import WordLevel
    from server.text.tokenizer import Tokenizer, harmony_stops
    specials = ["<|endoftext|>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>",
                "<|return|>", "<|call|>", "<|constrain|>"]
    hf = HF(WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    hf.save(str(tmp_path / "tokenizer.json"))
    ids = {t: hf.token_to_id(t) for t in specials}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|return|>"}))
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [ids["<|return|>"], ids["<|endoftext|>"], ids["<|call|>"]]}))
    tok = Tokenizer.from_hf_dir(tmp_path)
    assert tok.eos_ids == {ids["<|return|>"], ids["<|endoftext|>"], ids["<|call|>"]}
    # without the generation_config's list the vocabulary still says so
    (tmp_path / "generation_config.json").write_text("{}")
    tok = Tokenizer.from_hf_dir(tmp_path)
    assert tok.eos_ids == {ids["<|return|>"], ids["<|call|>"], ids["<|endoftext|>"]}
    # another vocabulary's <|end|> (Phi-3's end of turn) stays a stop
    assert harmony_stops({"<|end|>": 7}, {7}) == {7}


@pytest.fixture(scope="module")
def harmony_tok():
    """The default model's tokenizer with the harmony markers added as special tokens (as
    gpt-oss's vocabulary has them: control tokens, which skip_special_tokens drops)."""
    return default_tokenizer(MARKERS)


@pytest.mark.parametrize("reply", [ANSWER, CALL])
def test_the_markers_as_special_tokens_reach_the_parser(harmony_tok, reply):
    """skip_special_tokens (true by default) would drop the markup before the parser: a
    harmony reply keeps its special tokens in its text, the parser takes them out."""
    ids = harmony_tok.encode(reply, add_special_tokens=False)
    for m in ("<|channel|>", "<|message|>"):
        assert harmony_tok.encode(m, add_special_tokens=False) == [harmony_tok._hf.token_to_id(m)]
    assert "<|channel|>" not in harmony_tok.decode(ids, skip_special_tokens=True)
    sched = FakeScheduler(reply_ids=ids + [0], eos_after=len(ids))
    state = make_state(sched, context=8192)
    state.tokenizer = harmony_tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    c = client(state)
    want = parse(reply)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS, max_tokens=400)
    msg = r.choices[0].message
    assert (msg.model_extra["reasoning_content"], msg.content) == want[:2]
    assert [(t.function.name, t.function.arguments) for t in msg.tool_calls or ()] == \
        [(k.name, k.arguments) for k in want[2]]
    reasoning, content, calls, _ = streamed(c, tools=TOOLS, max_tokens=400)
    assert (reasoning, content or None) == want[:2]
    assert [(k["name"], k["arguments"]) for k in calls] == [(k.name, k.arguments) for k in want[2]]


@pytest.mark.parametrize("reply,analysis", [
    (ANSWER, "<|channel|>analysis<|message|>The user asks about Paris. Answer briefly.<|end|>"),
    (CALL, "<|channel|>analysis<|message|>Need the weather tool.<|end|>"),
    ("<|channel|>final<|message|>Just this.", "")])
def test_usage_counts_the_analysis_tokens(reply, analysis):
    """completion_tokens_details.reasoning_tokens: the analysis messages' tokens, their
    headers and end markers included (one byte a token here), whole and on /v1/responses."""
    _, state = state_for(reply)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS, max_tokens=400)
    assert r.usage.completion_tokens_details.reasoning_tokens == len(analysis.encode())
    resp = c.responses.create(model="fake-model", input="Hi", max_output_tokens=400)
    assert resp.usage.output_tokens_details.reasoning_tokens == len(analysis.encode())
