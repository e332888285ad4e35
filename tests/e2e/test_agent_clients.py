"""The official `anthropic` client on /v1/messages and the `openai` client on /v1/responses,
against a real server with the real model: greedy replies equal the chat route's golden
reply (one machinery), streamed equal whole, forced tool calls come back as tool_use blocks
and function_call items with valid arguments, and previous_response_id continues from the
prompt cache."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

pytestmark = pytest.mark.slow

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
HELLO = "Hello! Who are you?"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def golden_reply(golden) -> str:
    c = next(c for c in golden["cases"] if c["name"] == "chat-hello")
    return c["greedy_text"].removesuffix("<|im_end|>")


def anthropic_for(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=60)


def openai_for(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=60)


def test_messages_greedy_whole_and_streamed_equal_the_chat_golden(paged, golden):
    client = anthropic_for(paged)
    msgs = [{"role": "user", "content": HELLO}]
    r = client.messages.create(model=paged.model, max_tokens=64, system=SYSTEM, messages=msgs,
                               extra_body={"temperature": 0})
    assert r.content[0].text == golden_reply(golden) and r.stop_reason == "end_turn"
    n = client.messages.count_tokens(model=paged.model, system=SYSTEM, messages=msgs)
    assert n.input_tokens == 36 == r.usage.input_tokens + r.usage.cache_read_input_tokens
    assert r.usage.output_tokens == 22
    with client.messages.stream(model=paged.model, max_tokens=64, system=SYSTEM,
                                messages=msgs, extra_body={"temperature": 0}) as s:
        assert "".join(s.text_stream) == golden_reply(golden)
        assert s.get_final_message().stop_reason == "end_turn"


def test_messages_forced_tool_use(paged):
    client = anthropic_for(paged)
    tools = [{"name": "get_weather", "description": "The weather in a city",
              "input_schema": WEATHER}]
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.messages.create(model=paged.model, max_tokens=60, messages=msgs, tools=tools,
                               tool_choice={"type": "tool", "name": "get_weather"},
                               extra_body={"temperature": 0})
    assert r.stop_reason == "tool_use", r
    use = next(b for b in r.content if b.type == "tool_use")
    assert use.name == "get_weather" and isinstance(use.input.get("city"), str)
    # and the result goes back in for the next turn
    r2 = client.messages.create(model=paged.model, max_tokens=20, tools=tools, messages=[
        *msgs, {"role": "assistant", "content": r.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                      "content": "Sunny, 21 C"}]}],
        extra_body={"temperature": 0})
    assert r2.content and r2.usage.output_tokens > 0


def test_responses_greedy_whole_and_streamed_equal_the_chat_golden(paged, golden):
    client = openai_for(paged)
    r = client.responses.create(model=paged.model, instructions=SYSTEM, input=HELLO,
                                max_output_tokens=64, temperature=0)
    assert r.status == "completed" and r.output_text == golden_reply(golden)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (36, 22)
    with client.responses.stream(model=paged.model, instructions=SYSTEM, input=HELLO,
                                 max_output_tokens=64, temperature=0) as s:
        final = s.get_final_response()
    assert final.output_text == golden_reply(golden)


def test_responses_forced_function_call(paged):
    client = openai_for(paged)
    tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
              "parameters": WEATHER, "strict": True}]
    r = client.responses.create(model=paged.model, input="What is the weather in Paris?",
                                tools=tools, tool_choice="required", max_output_tokens=60,
                                temperature=0, parallel_tool_calls=False)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert isinstance(json.loads(calls[0].arguments)["city"], str)


def test_previous_response_id_continues_from_the_prompt_cache(paged):
    client = openai_for(paged)
    first = client.responses.create(model=paged.model, instructions=SYSTEM, max_output_tokens=24,
                                    input="Name three colours.", temperature=0)
    paged.wait_idle()
    second = client.responses.create(model=paged.model, previous_response_id=first.id,
                                     input="And three fruits?", max_output_tokens=8,
                                     temperature=0)
    assert second.status in ("completed", "incomplete") and second.output_text
    # the first turn's prompt is the second's prefix (less its instructions: OpenAI's rule,
    # so the prefix differs from the system message on) - the cache holds what matches
    assert second.usage.input_tokens > first.usage.input_tokens
    third = client.responses.create(model=paged.model, previous_response_id=second.id,
                                    input="And three animals?", max_output_tokens=4,
                                    temperature=0)
    assert third.usage.input_tokens_details.cached_tokens > 0, third.usage
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=paged.model, previous_response_id="resp_gone", input="x")
    assert e.value.body["code"] == "previous_response_not_found"


def test_langchain_structured_output_by_function_calling_returns_the_object(paged):
    """langchain-openai's with_structured_output(method="function_calling") forces a call of a
    tool named after the schema and parses its arguments: the object comes back, not None."""
    from langchain_openai import ChatOpenAI
    schema = {"title": "Trip", "description": "A trip to plan",
              "type": "object",
              "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                             "days": {"type": "integer"}},
              "required": ["city", "days"]}
    llm = ChatOpenAI(base_url=paged.url + "/v1", api_key="x", model=paged.model, temperature=0,
                     max_tokens=80, max_retries=0, timeout=60)
    got = llm.with_structured_output(schema, method="function_calling").invoke(
        "Plan a three-day trip to Rome.")
    assert isinstance(got, dict), got
    assert got["city"] in ("Paris", "Rome", "Oslo") and isinstance(got["days"], int), got
