"""GLM's chat side (GLM-4.5 / 4.6 / 4.7 / 5.x) through the official `openai` client: its
tool calls (`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`,
server/text/glm_tools.py) as tool_calls, whole and streamed (the fake scheduler sends the
reply a byte at a time, so every marker is cut across pieces), nothing of the markup in
content; `<think>` as reasoning_content, whether the reply opens it or the prompt does;
the format chosen from the chat template (tests/data/glm45/chat_template.jinja, the form
of GLM-4.5's own template); a forced call's grammar over GLM's markup
(server/text/glm_grammar.py), which must take the right reply token by token and then
only a stop, and refuse wrong names and arguments."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from api_fakes import BYTE0, FakeScheduler, default_tokenizer, make_state
from test_harmony import client, streamed
from server.api.tools import ToolStream, tool_format
from server.text import glm_tools
from server.text.glm_grammar import call_grammar
from server.text.reasoning import resolve_parser
from server.text.tool_calls import Call

TEMPLATE = (Path(__file__).resolve().parents[1] / "data" / "glm45"
            / "chat_template.jinja").read_text()
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "flags": {"type": "object", "properties": {"wind": {"type": "boolean"}}}},
        "required": ["city", "days"]}}}
NOW = {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
                                                                      "properties": {}}}}
TOOLS = [WEATHER, NOW]
CALL = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>")
CALL2 = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Lyon</arg_value>\n"
         "<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n<arg_key>flags</arg_key>\n"
         "<arg_value>{\"wind\": true}</arg_value>\n</tool_call>")
PARIS = ("get_weather", {"city": "Paris", "days": 3})
LYON = ("get_weather", {"city": "Lyon", "days": 1, "flags": {"wind": True}})


def calls_of(calls):
    return [(c.name, json.loads(c.arguments)) for c in calls]


# -- the parser ---------------------------------------------------------------------------

def test_values_typed_by_the_schema_as_glm_and_vllm_read_them():
    body = ("get_weather\n<arg_key> city </arg_key>\n<arg_value> 42 </arg_value>\n"
            "<arg_key>days</arg_key> <arg_value> 7 </arg_value>"
            "<arg_key>flags</arg_key><arg_value>{'wind': True}</arg_value>"
            "<arg_key>extra</arg_key><arg_value>not json</arg_value>"
            "<arg_key>n</arg_key><arg_value>[1, 2.5, null]</arg_value>")
    c = glm_tools.parse_body(body, TOOLS)
    # a string parameter: raw, whitespace kept, never parsed ("42" stays a string);
    # others: JSON, else a Python literal, else the raw text
    assert json.loads(c.arguments) == {"city": " 42 ", "days": 7, "flags": {"wind": True},
                                       "extra": "not json", "n": [1, 2.5, None]}
    assert c.name == "get_weather"
    assert json.loads(glm_tools.parse_body(body, ()).arguments)["city"] == 42   # no schema: JSON


def test_several_calls_and_content_whole():
    text = "Let me check.\n" + CALL + "\n" + CALL2
    content, calls = glm_tools.parse(text, TOOLS)
    assert content == "Let me check." and calls_of(calls) == [PARIS, LYON]
    # GLM-4.7's layout (no newlines), and a call without arguments
    content, calls = glm_tools.parse("<tool_call>get_weather<arg_key>city</arg_key>"
                                     "<arg_value>Rome</arg_value></tool_call>"
                                     "<tool_call>now</tool_call>", TOOLS)
    assert content is None and calls_of(calls) == [("get_weather", {"city": "Rome"}), ("now", {})]
    assert glm_tools.parse("No call here: <tool_c", TOOLS) == ("No call here: <tool_c", [])


def test_a_cut_reply_keeps_its_calls_and_no_markup():
    content, calls = glm_tools.parse("Hi " + CALL + CALL2[:CALL2.index("<arg_key>flags")],
                                     TOOLS, cut=True)
    assert content == "Hi" and calls[0] == Call("get_weather", json.dumps(PARIS[1]))
    assert calls[1] == Call("get_weather", '{"city": "Lyon", "days": 1')   # a JSON prefix
    assert glm_tools.parse("Hi <tool_call>get_w", TOOLS, cut=True) == ("Hi", [])
    assert glm_tools.parse("Hi <tool_c", TOOLS, cut=True) == ("Hi", [])


@pytest.mark.parametrize("text", ["Sure. " + CALL + "\n" + CALL2, CALL, "Plain <b>text</b>.",
                                  "a<tool_call>\n</tool_call>b"])
def test_the_stream_joins_to_the_whole_parse(text):
    s = ToolStream(["get_weather", "now"], fmt="glm", tools=TOOLS)
    out = []
    for ch in text:
        out += s.push(ch)
    out += s.finish()
    content = "".join(d.get("content", "") for d in out)
    names = [d["tool_calls"][0]["function"]["name"] for d in out
             if "tool_calls" in d and "id" in d["tool_calls"][0]]
    args = [d["tool_calls"][0]["function"]["arguments"] for d in out
            if "tool_calls" in d and "id" not in d["tool_calls"][0]]
    whole_content, whole = glm_tools.parse(text, TOOLS)
    assert [Call(n, a) for n, a in zip(names, args)] == whole
    assert content.strip() == (whole_content or "").strip()
    assert "<arg_key>" not in content and ("<tool_call>" not in content or not whole)


def test_the_format_is_chosen_from_the_template():
    assert glm_tools.resolve("auto", TEMPLATE) == "glm"
    assert glm_tools.resolve("auto", "{{ messages }} <tool_call>") == "hermes"
    assert glm_tools.resolve("glm45", None) == "glm" and glm_tools.resolve("hermes", TEMPLATE) == "hermes"
    with pytest.raises(ValueError, match="glm45"):
        glm_tools.resolve("glm4", TEMPLATE)
    state = make_state(FakeScheduler(reply="x"))
    state.render_chat, state.chat_template = None, TEMPLATE
    assert tool_format(state) == "glm"
    state.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert tool_format(state) == "hermes"
    state.tool_call_parser = "glm45"
    assert tool_format(state) == "glm"


def test_a_glm_template_and_glm_names_think():
    assert resolve_parser("auto", TEMPLATE) == "think"
    for name in ("GLM-4.5-Air", "glm-4.7-flash", "GLM-5.1", "GLM-5.3-Flash"):
        assert resolve_parser("auto", None, name) == "think", name


# -- through the openai client ------------------------------------------------------------

def state_for(reply: str):
    sched = FakeScheduler(reply=reply, eos_after=len(reply.encode()))
    state = make_state(sched, context=8192)
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    return sched, state


def prompt_text(req) -> str:
    return bytes(i - BYTE0 for i in req.prompt_ids).decode()


@pytest.mark.parametrize("reply, kwargs, content, want", [
    # GLM-4.5: the reply opens <think> itself
    ("<think>Need the tool.</think>\n" + CALL, {}, None, [PARIS]),
    ("<think>Need the tool.</think>\nChecking both.\n" + CALL + "\n" + CALL2, {},
     "Checking both.", [PARIS, LYON]),
    # GLM-4.7 / 5: the prompt opens <think>
    ("Need the tool.</think>" + CALL, {"open_think": True}, None, [PARIS]),
])
def test_calls_and_reasoning_whole_and_streamed(reply, kwargs, content, want):
    sched, state = state_for(reply)
    c = client(state)
    extra = {"extra_body": {"chat_template_kwargs": kwargs}} if kwargs else {}
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS,
                                  max_tokens=400, **extra)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.content == content and msg.model_extra["reasoning_content"] == "Need the tool."
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == want
    assert all(t.id.startswith("call_") and t.type == "function" for t in msg.tool_calls)
    assert prompt_text(sched.started[-1]).endswith("<|assistant|>" + ("<think>" if kwargs else ""))
    reasoning, text, calls, finish = streamed(c, tools=TOOLS, max_tokens=400, **extra)
    assert (reasoning, text.strip() or None, finish) == ("Need the tool.", content, "tool_calls")
    assert [(k["name"], json.loads(k["arguments"])) for k in calls] == want
    assert len({k["id"] for k in calls}) == len(want)


def test_thinking_off_and_plain_answers():
    reply = "It is sunny in Paris."
    sched, state = state_for(reply)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS, max_tokens=400,
                                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].message.content == reply and r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "stop"
    assert prompt_text(sched.started[-1]).endswith("/nothink<|assistant|>\n<think></think>")
    assert streamed(c, tools=TOOLS, max_tokens=400) == ("", reply, [], "stop")


def test_a_tool_round_renders_in_glm_markup():
    sched, state = state_for("It is sunny.")
    msgs = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(PARIS[1])}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
    r = client(state).chat.completions.create(model="fake-model", messages=msgs, tools=TOOLS,
                                              max_tokens=400)
    assert r.choices[0].message.content == "It is sunny."
    text = prompt_text(sched.started[-1])
    assert ("<|assistant|>\n<think></think>\n" + CALL + "<|observation|>\n<tool_response>\n"
            "sunny, 21 C\n</tool_response><|assistant|>") in text
    assert '"name": "get_weather"' in text.split("</tools>")[1]


def test_a_cut_reply_streams_its_cut_call():
    reply = CALL + "\n" + CALL2[:CALL2.index("<arg_key>flags")]
    _, state = state_for(reply + "more")
    c = client(state)
    n = len(reply.encode())
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS, max_tokens=n)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "length" and msg.content is None
    assert [t.function.arguments for t in msg.tool_calls] == \
        [json.dumps(PARIS[1]), '{"city": "Lyon", "days": 1']
    _, text, calls, finish = streamed(c, tools=TOOLS, max_tokens=n)
    assert finish == "length" and text == ""
    assert [k["arguments"] for k in calls] == [t.function.arguments for t in msg.tool_calls]


# -- forced calls: the grammar over GLM's markup ------------------------------------------

MARKUP = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
          "<arg_value>", "</arg_value>")


@pytest.fixture(scope="module", params=["text", "added"])
def tok(request):
    """The default model's tokenizer; "added": with GLM's markup as added tokens that are
    not special (as GLM's tokenizer.json has them: kept in the decoded text)."""
    return default_tokenizer(MARKUP if request.param == "added" else (), special=False)


def ask(tok, reply: str, **body):
    """-> (the reply's message, its finish reason, the request's grammar)."""
    ids = tok.encode(reply, add_special_tokens=False)
    sched = FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1], eos_after=len(ids))
    state = make_state(sched, context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS,
                                              max_tokens=400, **body)
    return r.choices[0].message, r.choices[0].finish_reason, sched.started[0].grammar


def follows(tok, grammar, reply: str, then=()) -> bool:
    """The grammar takes every token of the reply, and then a stop token and nothing else
    (but the tokens `then`)."""
    c = grammar.constraint()
    n = c.vocab
    for t in tok.encode(reply, add_special_tokens=False):
        if not c.allowed(n)[t]:
            return False
        c.consume(t)
    allowed = c.allowed(n)
    want = sorted(set(tok.eos_ids) | set(then))
    return bool(allowed[want].all()) and int(allowed.sum()) == len(want)


THOUGHT = "<think>Need the weather tool.</think>\n"


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "get_weather"}}])
def test_a_forced_call_follows_the_grammar(tok, choice):
    msg, finish, g = ask(tok, THOUGHT + CALL, tools=TOOLS, tool_choice=choice,
                         parallel_tool_calls=False)
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == [PARIS]
    assert msg.model_extra["reasoning_content"] == "Need the weather tool."
    assert msg.content is None and finish == "tool_calls"
    assert follows(tok, g, THOUGHT + CALL) and follows(tok, g, CALL)
    assert follows(tok, g, CALL2)                                       # an optional object
    assert follows(tok, g, CALL.replace("Paris", "Saint-<Denis>\n& co"))   # free string text
    unit = CALL.replace("</arg_value>\n</tool_call>", "</arg_value>\n<arg_key>unit</arg_key>\n"
                        "<arg_value>F</arg_value>\n</tool_call>")
    assert follows(tok, g, unit) and not follows(tok, g, unit.replace(">F<", ">K<"))   # enum
    assert not follows(tok, g, CALL.replace(">3<", ">three<"))          # an integer's value
    assert not follows(tok, g, CALL.replace("<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n", ""))
    assert not follows(tok, g, CALL.replace("get_weather", "get_time"))  # an unknown tool
    assert not follows(tok, g, CALL.replace("city</arg_key>", "town</arg_key>"))  # a wrong key
    assert not follows(tok, g, "Sure. " + CALL)                          # content first
    assert not follows(tok, g, CALL + "\nDone.")                         # text after
    now = "<tool_call>now\n</tool_call>"
    assert follows(tok, g, now) == (choice == "required")               # the named one only
    assert not follows(tok, g, CALL + "\n" + now)                       # one call


def test_parallel_required_calls(tok):
    _, _, g = ask(tok, CALL, tools=TOOLS, tool_choice="required")
    newline = tok.encode("\n", add_special_tokens=False)
    now = "<tool_call>now\n</tool_call>"
    # after each whole call: a stop, or the newline that opens the next call
    assert follows(tok, g, CALL, then=newline) and follows(tok, g, now, then=newline)
    assert follows(tok, g, THOUGHT + CALL + "\n" + now + "\n" + CALL2, then=newline)
    assert not follows(tok, g, CALL + now, then=newline)
    assert not follows(tok, g, CALL + "\nDone.", then=newline)


def test_a_forced_reply_streams_as_calls(tok):
    reply = THOUGHT + CALL + "\n" + CALL2
    ids = tok.encode(reply, add_special_tokens=False)
    state = make_state(FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1],
                                     eos_after=len(ids)), context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    reasoning, content, calls, finish = streamed(client(state), tools=TOOLS,
                                                 tool_choice="required", max_tokens=400)
    assert (reasoning, content, finish) == ("Need the weather tool.", "", "tool_calls")
    assert [(k["name"], json.loads(k["arguments"])) for k in calls] == [PARIS, LYON]


def test_the_grammar_text_names_each_value_type():
    g = call_grammar([WEATHER], many=False)
    assert "sval" in g and '%json {"type": "integer"}' in g
    assert '("C" | "F") "</arg_value>"' in g                  # markers as text without a tok
    assert "calls: call\n" in g and '("\\n" call)*' not in g
    assert '("\\n" call)*' in call_grammar([WEATHER], many=True)


def test_refs_and_unicode_names_compile_and_follow(tok):
    from server.engine.grammar import compile_grammar, engine_schema
    tool = {"type": "function", "function": {"name": "réserver", "parameters": {
        "type": "object", "$defs": {"n": {"type": "integer", "minimum": 1}},
        "properties": {"ville": {"type": "string"}, "nuits": {"$ref": "#/$defs/n"}},
        "required": ["ville", "nuits"]}}}
    g = compile_grammar(tok, "lark", call_grammar([tool], False, engine_schema, tok))
    call = ("<tool_call>réserver\n<arg_key>ville</arg_key>\n<arg_value>Besançon</arg_value>\n"
            "<arg_key>nuits</arg_key>\n<arg_value>2</arg_value>\n</tool_call>")
    assert follows(tok, g, call)
    assert not follows(tok, g, call.replace(">2<", ">0<"))             # the $ref's minimum
    assert calls_of(glm_tools.parse(call, [tool])[1]) == [("réserver", {"ville": "Besançon", "nuits": 2})]


def test_messages_and_responses_blocks():
    from server.api import tools as toolmod
    from server.api.reasoning_plan import ReasoningPlan
    from server.api.reply_blocks import ReplyBlocks
    plan = toolmod.ToolPlan("auto", TOOLS, fmt="glm")
    blocks = ReplyBlocks(plan, ReasoningPlan("think")).whole(
        "<think>Think.</think>\nLet me look.\n" + CALL + "\n" + CALL2)
    assert [(b.kind, b.name, b.text) for b in blocks] == [
        ("text", None, "Let me look.\n"),
        ("call", "get_weather", json.dumps(PARIS[1])), ("call", "get_weather", json.dumps(LYON[1]))]


def test_anthropic_messages_route_gives_tool_use_blocks():
    from fastapi.testclient import TestClient
    from server.api import create_app
    _, state = state_for("<think>Need the tool.</think>\n" + CALL)
    tool = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}
    with TestClient(create_app(state)) as c:
        r = c.post("/v1/messages", json={"model": "fake-model", "max_tokens": 400,
                                         "messages": MSGS, "tools": [tool]})
    assert r.status_code == 200, r.text
    content = r.json()["content"]
    assert [b["type"] for b in content] == ["tool_use"]     # thinking: only when asked
    assert content[0]["name"] == "get_weather" and content[0]["input"] == PARIS[1]
    assert r.json()["stop_reason"] == "tool_use"


def test_responses_route_gives_function_calls_whole_and_streamed():
    _, state = state_for("<think>Need the tool.</think>\n" + CALL + "\n" + CALL2)
    c = client(state)
    tools = [{"type": "function", "name": "get_weather",
              "parameters": WEATHER["function"]["parameters"]}]
    r = c.responses.create(model="fake-model", input="weather?", tools=tools)
    assert [o.type for o in r.output] == ["function_call", "function_call"]
    assert [(o.name, json.loads(o.arguments)) for o in r.output] == [PARIS, LYON]
    with c.responses.stream(model="fake-model", input="weather?", tools=tools) as s:
        list(s)
        final = s.get_final_response()
    assert [(o.name, json.loads(o.arguments)) for o in final.output
            if o.type == "function_call"] == [PARIS, LYON]


def test_a_forced_call_after_reasoning_the_prompt_opened(tok):
    reply = "Need the weather tool.</think>\n" + CALL
    msg, finish, g = ask(tok, reply, tools=TOOLS, tool_choice="required",
                         parallel_tool_calls=False,
                         extra_body={"chat_template_kwargs": {"open_think": True}})
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == [PARIS]
    assert msg.model_extra["reasoning_content"] == "Need the weather tool." and finish == "tool_calls"
    assert follows(tok, g, reply) and follows(tok, g, "</think>" + CALL)
    assert not follows(tok, g, CALL)                    # the reasoning must end first
    assert not follows(tok, g, "Hm.</think>\nSure. " + CALL)


def test_markers_are_written_as_the_vocabularys_tokens(tok):
    from server.text.glm_grammar import markers
    added = tok.token_to_id("<arg_key>") is not None and \
        tok.encode("<arg_key>", add_special_tokens=False) == [tok.token_to_id("<arg_key>")]
    m = markers(tok)
    assert m["<arg_key>"] == ("<arg_key>" if added else '"<arg_key>"')
    assert m["<think>"] == ("<think>" if added else '"<think>"')


def test_structured_output_after_think_as_an_added_token(tok):
    """server/engine/grammar.py's after_reasoning writes <think> / </think> as the
    vocabulary's tokens where they are added tokens (GLM's, Qwen3's: llguidance takes an
    added token as a special one, which text never spells), else as text; either way the
    reasoning is free and the schema holds after it."""
    reply = '<think>Give JSON.</think>\n{"a": 1}'
    _, _, g = ask(tok, reply, response_format={"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                "required": ["a"]}}})
    assert follows(tok, g, reply)
    assert not follows(tok, g, '<think>Give JSON.</think>\n{"a": "one"}')


def test_a_forced_reply_cut_by_max_tokens_keeps_its_cut_call(tok):
    reply = CALL + "\n" + CALL2
    ids = tok.encode(reply, add_special_tokens=False)
    n = len(tok.encode(CALL + "\n" + CALL2[:CALL2.index("<arg_key>flags")],
                       add_special_tokens=False))
    state = make_state(FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1],
                                     eos_after=len(ids)), context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, tools=TOOLS,
                                  tool_choice="required", max_tokens=n)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "length" and msg.content is None
    got = [(t.function.name, t.function.arguments) for t in msg.tool_calls]
    assert got[0] == ("get_weather", json.dumps(PARIS[1]))
    assert got[1][0] == "get_weather" and got[1][1].startswith('{"city": "Lyon"')
    _, content, calls, finish = streamed(c, tools=TOOLS, tool_choice="required", max_tokens=n)
    assert (content, finish) == ("", "length")
    assert [(k["name"], k["arguments"]) for k in calls] == got


def test_serve_takes_the_tool_call_parser_flag():
    """`foldserve serve --tool-call-parser` reaches the state the routes read; a name it does
    not know is refused by argparse."""
    import argparse
    from server import serve
    p = argparse.ArgumentParser()
    serve.add_arguments(p)
    assert p.parse_args([]).tool_call_parser == "auto"
    assert p.parse_args(["--tool-call-parser", "glm45"]).tool_call_parser == "glm45"
    with pytest.raises(SystemExit):
        p.parse_args(["--tool-call-parser", "mistral"])
