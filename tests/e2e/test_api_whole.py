"""Issue 19 with the real model and the real openai client: logit_bias, min_tokens,
ignore_eos without <|im_end|> in the text, n > 1 equal to single requests with the
derived seeds and prefilled once, prompt_logprobs equal to the prefix requests' logprobs, echo, structured outputs (random schemas, streamed and not, solo ==
concurrent), tools (required / named, a follow-up turn, streamed deltas), refusals.

FOLDSERVE_E2E_SCHEMA_EXAMPLES (default 2) sets how many random schemas go through the
real model (FOLDSERVE_E2E_SCHEMA_LOG: a file that gets one JSON line per request);
tests/model/test_grammar_walk.py runs the same strategy for 200 on the sampler alone. FOLDSERVE_E2E_URL points these tests at a server already running.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os

import httpx
import jsonschema
import openai
import pytest
from hypothesis import HealthCheck, given, settings

try:
    from model.schemas import max_reply_bytes, schemas   # tests/ on sys.path (rootdir insert)
except ImportError:
    from tests.model.schemas import max_reply_bytes, schemas

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("FOLDSERVE_E2E_SCHEMA_EXAMPLES", "2"))
SCHEMA_LOG = os.environ.get("FOLDSERVE_E2E_SCHEMA_LOG")   # a JSON line per schema request
TWO = [{"role": "user", "content": "What is 2+2? Answer with a number only."}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"],
        "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string", "maxLength": 8}},
        "required": ["tz"], "additionalProperties": False}}}]
WEATHER = [{"role": "user", "content": "What's the weather like in Paris today?"}]


class _Url:
    def __init__(self, url):
        self.url = url
        self.model = httpx.get(url + "/v1/models").json()["data"][0]["id"]


@pytest.fixture(scope="module")
def srv(request):
    url = os.environ.get("FOLDSERVE_E2E_URL")
    return _Url(url) if url else request.getfixturevalue("paged")


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=300)


def ids_of(srv, text: str) -> list[int]:
    return httpx.post(srv.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]


def test_logit_bias_removes_and_forces(srv, client):
    kw = dict(model=srv.model, prompt="The capital of France is", max_tokens=3, temperature=0)
    paris = ids_of(srv, " Paris")[0]
    r = client.completions.create(**kw, logprobs=0)
    assert r.choices[0].text.startswith(" Paris")
    r = client.completions.create(**kw, logit_bias={str(paris): -100})
    assert not r.choices[0].text.startswith(" Paris")
    hello = ids_of(srv, "hello")[0]
    r = client.completions.create(**{**kw, "temperature": 1.0}, logit_bias={str(hello): 100}, seed=3)
    assert r.choices[0].text == "hello" * 3


def test_min_tokens_holds_off_eos_and_ignore_eos_keeps_specials_out(srv, client):
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=30, temperature=0)
    n = r.usage.completion_tokens
    assert r.choices[0].finish_reason == "stop" and n < 20
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=30, temperature=0,
                                       extra_body={"min_tokens": n + 4})
    assert r.usage.completion_tokens >= n + 4
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=n + 3, temperature=0,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == n + 3 and "<|im_end|>" not in r.choices[0].message.content
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=n + 3, temperature=0,
                                       extra_body={"ignore_eos": True, "skip_special_tokens": False})
    assert "<|im_end|>" in r.choices[0].message.content
    # a stop string inside the first min_tokens does not stop the reply
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=n + 4, temperature=0,
                                       stop=["2"], extra_body={"min_tokens": n})
    assert r.usage.completion_tokens >= n


def test_n_equals_single_requests_with_derived_seeds(srv, client):
    kw = dict(model=srv.model, messages=[{"role": "user", "content": "Tell me a word."}],
              max_tokens=6, temperature=1.0)
    r = client.chat.completions.create(**kw, n=3, seed=41)
    singles = [client.chat.completions.create(**kw, seed=s).choices[0].message.content
               for s in (41, 42, 43)]
    assert [c.message.content for c in r.choices] == singles
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == 18 and len(set(singles)) > 1


def metric(srv, name: str) -> float:
    text = httpx.get(srv.url + "/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def test_n_prefills_the_prompt_once(srv, client):
    """Choices 1.. resume from choice 0's kept prompt pages: the prefix cache's hit counter
    grows by their full pages (choice 0 prefilled all of it, nothing cached before)."""
    words = " ".join(f"w{i}" for i in range(40))            # a prompt no one sent before
    kw = dict(model=srv.model, prompt=f"Count these: {words}.", max_tokens=4, temperature=1.0)
    hits = metric(srv, "vllm:prefix_cache_hits_total")
    r = client.completions.create(**kw, n=3, seed=7)
    n = r.usage.prompt_tokens
    assert n > 32 and len(r.choices) == 3
    kept = (n - 1) // 16 * 16                               # page rows 16: full pages, one left
    assert metric(srv, "vllm:prefix_cache_hits_total") - hits == 2 * kept
    singles = [client.completions.create(**kw, seed=s).choices[0].text for s in (7, 8, 9)]
    assert [c.text for c in r.choices] == singles


def test_prompt_logprobs_equal_the_prefix_requests_logprobs(srv, client):
    """Each prompt token's logprob (and top alternatives) is, to the bit, the logprob the
    server reports for that token drawn after the prefix alone (forced by logit_bias: the
    reported logprobs are the raw model's)."""
    text = "The capital of France is Paris"
    ids = httpx.post(srv.url + "/tokenize", json={"prompt": text}).json()["tokens"]
    r = client.completions.create(model=srv.model, prompt=text, max_tokens=1, temperature=0,
                                  extra_body={"prompt_logprobs": 3})
    plp = r.choices[0].prompt_logprobs
    assert len(plp) == len(ids) and plp[0] is None
    for j in range(len(ids) - 3, len(ids)):
        entry = plp[j]
        assert list(entry)[0] == str(ids[j])
        mine = entry[str(ids[j])]
        one = client.completions.create(model=srv.model, prompt=ids[:j], max_tokens=1, temperature=0,
                                        logprobs=3, logit_bias={str(ids[j]): 100})
        lp = one.choices[0].logprobs
        assert lp.token_logprobs[0] == mine["logprob"]
        # the alternatives: the prompt token, then the top 3 (the token once if among them)
        best = sorted((v["logprob"] for v in entry.values()), reverse=True)[:3]
        assert sorted(lp.top_logprobs[0].values(), reverse=True) == best
    assert plp[-1][str(ids[-1])]["decoded_token"] == " Paris" and plp[-1][str(ids[-1])]["rank"] == 1
    # echo + logprobs (OpenAI's legacy form): the same numbers, in the logprobs block
    e = client.completions.create(model=srv.model, prompt=text, max_tokens=1, temperature=0,
                                  echo=True, logprobs=3)
    lp = e.choices[0].logprobs
    assert e.choices[0].text.startswith(text) and lp.token_logprobs[0] is None
    assert lp.token_logprobs[1:len(ids)] == [plp[j][str(ids[j])]["logprob"] for j in range(1, len(ids))]
    assert len(lp.tokens) == len(ids) + 1
    c = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=1,
                                       extra_body={"prompt_logprobs": 0})
    assert len(c.prompt_logprobs) == c.usage.prompt_tokens and c.prompt_logprobs[0] is None
    assert all(len(d) == 1 for d in c.prompt_logprobs[1:])
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=srv.model, prompt=text, max_tokens=1, stream=True,
                                  extra_body={"prompt_logprobs": 1})
    assert e.value.body["param"] == "prompt_logprobs"


def test_echo(srv, client):
    r = client.completions.create(model=srv.model, prompt="The capital of France is",
                                  max_tokens=2, temperature=0, echo=True)
    assert r.choices[0].text.startswith("The capital of France is Paris")


def check_schema_reply(client, srv, schema, stream: bool, seed: int = 0):
    """One constrained reply: it stops (never "length": max_tokens is the most tokens a
    reply following the schema can take, and one for eos), parses and validates."""
    budget = max_reply_bytes(schema) + 1
    kw = dict(model=srv.model, max_tokens=budget, temperature=0.7, seed=seed,
              messages=[{"role": "user", "content": "Fill in this JSON object."}],
              response_format={"type": "json_schema",
                               "json_schema": {"name": "x", "schema": schema, "strict": True}})
    tokens = None
    if stream:
        chunks = list(client.chat.completions.create(**kw, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
    else:
        r = client.chat.completions.create(**kw)
        text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        tokens = r.usage.completion_tokens
    verdict = "invalid"
    try:
        jsonschema.validate(json.loads(text), schema)
        verdict = "valid"
    except (ValueError, jsonschema.ValidationError) as e:
        verdict = f"invalid: {str(e)[:200]}"
    if SCHEMA_LOG:                       # one line a request, for the acceptance receipt
        with open(SCHEMA_LOG, "a") as f:
            f.write(json.dumps({"schema": schema, "stream": stream, "seed": seed,
                                "max_tokens": budget, "completion_tokens": tokens,
                                "finish": finish, "verdict": verdict, "text": text}) + "\n")
    assert finish == "stop", (finish, budget, text)
    assert verdict == "valid", (verdict, text)
    return text, finish


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(schema=schemas())
def test_random_schemas_validate_streamed_and_not(srv, client, schema):
    whole = check_schema_reply(client, srv, schema, stream=False)
    streamed = check_schema_reply(client, srv, schema, stream=True)
    assert whole == streamed            # same seed, same constrained reply either way


def test_constrained_solo_equals_concurrent(srv, client):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                               "n": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["name", "n"], "additionalProperties": False}
    solo = check_schema_reply(client, srv, schema, False, seed=5)
    with cf.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(check_schema_reply, client, srv, schema, False, 5)] + [
            ex.submit(client.chat.completions.create, model=srv.model, messages=WEATHER,
                      max_tokens=24, temperature=0.9, seed=s) for s in range(3)]
        assert futs[0].result() == solo


@pytest.mark.parametrize("form", [
    {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objectx"}}}},
    {"extra_body": {"guided_regex": "(("}}, {"extra_body": {"grammar": "root ::= nope"}}])
def test_bad_schema_or_grammar_is_a_400(srv, client, form):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=4, **form)
    assert "does not compile" in e.value.body["message"] and e.value.body["param"]


def test_choice_regex_and_json_object(srv, client):
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=8, temperature=0,
                                       extra_body={"guided_choice": ["four", "five"]})
    assert r.choices[0].message.content in ("four", "five")
    r = client.completions.create(model=srv.model, prompt="Date:", max_tokens=12, temperature=0,
                                  extra_body={"guided_regex": r"[0-9]{4}-[0-9]{2}-[0-9]{2}"})
    import re
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", r.choices[0].text)
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=60, temperature=0,
                                       response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)


def _params_of(name):
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "get_weather"}}, "required"])
def test_forced_tool_call_validates_and_follow_up_answers(srv, client, choice):
    kw = dict(model=srv.model, messages=WEATHER, tools=TOOLS, tool_choice=choice, max_tokens=60,
              temperature=0, parallel_tool_calls=False)
    r = client.chat.completions.create(**kw)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    calls = ch.message.tool_calls
    assert len(calls) == 1 and calls[0].id.startswith("call_")
    args = json.loads(calls[0].function.arguments)
    jsonschema.validate(args, _params_of(calls[0].function.name))
    if isinstance(choice, dict):
        assert calls[0].function.name == "get_weather"

    if isinstance(choice, dict):
        follow_up(srv, client, ch.message, calls[0])
        return
    # streamed: the deltas reassemble into the same call
    name, arguments, finish = "", "", None
    for chunk in client.chat.completions.create(**kw, stream=True):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        for tc in d.tool_calls or []:
            name += tc.function.name or ""
            arguments += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert (name, json.loads(arguments), finish) == (calls[0].function.name, args, "tool_calls")


@pytest.mark.parametrize("parallel", [False, True])
def test_forced_call_cut_by_max_tokens_is_a_tool_call(srv, client, parallel):
    """The issue's leak: a forced call cut by max_tokens came back as markup in content.
    Now: tool_calls (the cut one's arguments as far as written), content null, "length";
    streamed, the same call and no content."""
    kw = dict(model=srv.model, messages=WEATHER, tools=TOOLS, max_tokens=14, temperature=0,
              tool_choice={"type": "function", "function": {"name": "get_weather"}},
              parallel_tool_calls=parallel)
    ch = client.chat.completions.create(**kw).choices[0]
    assert ch.finish_reason == "length" and ch.message.content is None, ch
    (call,) = ch.message.tool_calls
    assert call.function.name == "get_weather" and "<" not in call.function.arguments
    content, arguments, finish = "", "", None
    for chunk in client.chat.completions.create(**kw, stream=True):
        d = chunk.choices[0].delta
        content += d.content or ""
        arguments += "".join(t.function.arguments or "" for t in d.tool_calls or [])
        finish = chunk.choices[0].finish_reason or finish
    assert (content, arguments, finish) == ("", call.function.arguments, "length")


def follow_up(srv, client, message, call):
    """The next turn, with the assistant's tool call and the tool's result, renders and answers."""
    follow = WEATHER + [message.model_dump(exclude_none=True),
                        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"}]
    r = client.chat.completions.create(model=srv.model, messages=follow, tools=TOOLS,
                                       max_tokens=12, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r.choices[0].message.content or r.choices[0].message.tool_calls


def test_unknown_field_ignored_known_unsupported_refused(srv, client):
    r = client.chat.completions.create(model=srv.model, messages=TWO, max_tokens=2,
                                       extra_body={"top_a": 0.2})
    assert r.choices[0].message.content is not None
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=srv.model, prompt="x", max_tokens=2,
                                  extra_body={"use_beam_search": True})
    assert e.value.body["param"] == "use_beam_search"
