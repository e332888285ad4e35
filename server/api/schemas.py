"""Request bodies, as pydantic models: strict types (no "1" for 1), unknown fields ignored.

Ranges follow OpenAI's documentation; the checks pydantic cannot express (n > 1,
logprobs without top_logprobs...) live in `sampling.py`.
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

Strict = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)

TokenIds = list[Annotated[int, Field(ge=0)]]


class StreamOptions(BaseModel):
    model_config = Strict
    include_usage: bool | None = False


class SamplingFields(BaseModel):
    """The fields completions and chat share."""
    model_config = Strict

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
    draft: bool | None = None          # accepted; False = plain decoding
    user: str | None = None


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


class Message(BaseModel):
    model_config = Strict
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None     # required on a tool message (textflow.message_dicts)


class ChatRequest(SamplingFields):
    messages: Annotated[list[Message], Field(min_length=1)]
    logprobs: bool | None = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    add_generation_prompt: bool | None = True


class TokenizeRequest(BaseModel):
    model_config = Strict
    model: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool | None = True


class DetokenizeRequest(BaseModel):
    model_config = Strict
    model: str | None = None
    tokens: TokenIds
