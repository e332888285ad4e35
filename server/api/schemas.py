"""Request bodies, as pydantic models: strict types (no "1" for 1), unknown fields ignored.

Ranges follow OpenAI's documentation; the checks pydantic cannot express (n > 1,
logprobs without top_logprobs...) live in `sampling.py`.
"""
from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .unsupported import CHAT_UNSUPPORTED, refuse_unsupported_fields, refused_first

Strict = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)

TokenIds = list[Annotated[int, Field(ge=0)]]


class StreamOptions(BaseModel):
    model_config = Strict
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False     # vLLM: the usage so far in every chunk


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False,
                              populate_by_name=True)
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    model_config = Strict
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputs(BaseModel):
    """vLLM's `structured_outputs`: one of these."""
    model_config = Strict
    json_: dict[str, Any] | str | None = Field(None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None


class SamplingFields(BaseModel):
    """The fields completions and chat share."""
    model_config = Strict

    _refuse_unsupported = refused_first(refuse_unsupported_fields)   # an ApiError (400)

    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    top_k: Annotated[int, Field(ge=-1)] | None = None          # -1 or 0: off
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    seed: Annotated[int, Field(ge=-2**63, lt=2**64)] | None = None
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    # at least 0.01, so penalised logits (divided by it) stay finite in float32
    repetition_penalty: Annotated[float, Field(ge=0.01, le=2.0)] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: Annotated[int, Field(ge=1)] | None = 1
    ignore_eos: bool | None = False
    draft: bool | None = None          # False: this request is never drafted (server/drafts/)
    user: str | None = None
    # issue 19: sampling shapes and structured outputs (server/api/structured.py)
    logit_bias: dict[str, Annotated[float, Field(ge=-100.0, le=100.0)]] | None = None
    min_tokens: Annotated[int, Field(ge=0)] | None = None
    include_stop_str_in_output: bool | None = False
    skip_special_tokens: bool | None = True
    response_format: ResponseFormat | None = None
    guided_json: dict[str, Any] | str | None = None       # vLLM
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    structured_outputs: StructuredOutputs | None = None
    json_schema: dict[str, Any] | None = None               # llama-server
    grammar: str | None = None                               # llama-server, GBNF
    prompt_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None   # vLLM


class CompletionRequest(SamplingFields):
    # a string, a list of token ids, or a list holding one of those
    prompt: Union[str, TokenIds, list[str], list[TokenIds]]
    logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    echo: bool | None = False
    best_of: Annotated[int, Field(ge=1)] | None = None
    suffix: str | None = None


class TextPart(BaseModel):
    model_config = Strict
    type: str
    text: str | None = None


class FunctionCall(BaseModel):
    model_config = Strict
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolCall(BaseModel):
    model_config = Strict
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    model_config = Strict
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None     # required on a tool message (textflow.message_dicts)


class FunctionDef(BaseModel):
    model_config = Strict
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(BaseModel):
    model_config = Strict
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(BaseModel):
    model_config = Strict
    name: str


class NamedToolChoice(BaseModel):
    model_config = Strict
    type: Literal["function"]
    function: NamedFunction


class ChatRequest(SamplingFields):
    _refuse_chat_unsupported = refused_first(partial(refuse_unsupported_fields,
                                                     table=CHAT_UNSUPPORTED))

    messages: Annotated[list[Message], Field(min_length=1)]
    logprobs: bool | None = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    add_generation_prompt: bool | None = True
    chat_template_kwargs: dict[str, Any] | None = None      # vLLM / llama-server
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = True
    # reasoning (server/api/reasoning_plan.py)
    include_reasoning: bool | None = True                    # vLLM
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    reasoning_format: Literal["none", "auto", "deepseek"] | None = None   # llama-server


class TokenizeRequest(BaseModel):
    model_config = Strict
    model: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool | None = True
    tools: list[Tool] | None = None                         # vLLM: the chat with its tools
    chat_template_kwargs: dict[str, Any] | None = None
    return_token_strs: bool | None = False                  # vLLM: each token's string too


class DetokenizeRequest(BaseModel):
    model_config = Strict
    model: str | None = None
    tokens: TokenIds
