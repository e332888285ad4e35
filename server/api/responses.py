"""What the routes answer, as pydantic models for the OpenAPI document (the routes build
plain dicts; tests/api/test_schemathesis.py holds every reply against these)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    """Every refusal, in OpenAI's shape."""
    error: ErrorDetail


class CachedTokens(BaseModel):
    cached_tokens: int


class ReasoningTokens(BaseModel):
    reasoning_tokens: int


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: CachedTokens | None = None
    # with a reasoning parser: the completion's tokens written inside the reasoning
    completion_tokens_details: ReasoningTokens | None = None


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: str | None
    logprobs: dict | None
    # vLLM's: each prompt token's logprob, rank and alternatives (the first None)
    prompt_logprobs: list[dict | None] | None = None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


class FunctionOut(BaseModel):
    name: str
    arguments: str          # a JSON object as text; a call cut by max_tokens: as far as written


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"]
    function: FunctionOut


class ChatMessageOut(BaseModel):
    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ToolCallOut] | None = None
    # a reasoning model's reasoning (server/api/reasoning_plan.py), under vLLM's two names
    reasoning_content: str | None = None
    reasoning: str | None = None


class ChatChoice(BaseModel):
    index: int
    message: ChatMessageOut
    finish_reason: str | None
    logprobs: dict | None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    prompt_logprobs: list[dict | None] | None = None       # vLLM's, as on completions


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class Health(BaseModel):
    """200 with status "ok"; 503 with status "unhealthy" (a rank is gone) or "stopping" (the
    server shuts down) and a reason."""
    status: Literal["ok", "unhealthy", "stopping"]
    reason: str | None = None
    model: str | None = None
    tp: int | None = None


class Tokens(BaseModel):
    tokens: list[int]
    count: int
    max_model_len: int
    token_strs: list[str] | None = None     # with return_token_strs


class Detokenized(BaseModel):
    prompt: str


class CompletionChunk(BaseModel):
    """One streamed event of /v1/completions (the last one, with include_usage: no
    choices and the usage)."""
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ToolCallDelta(BaseModel):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: dict | None = None        # {name?, arguments?}


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChatDelta
    finish_reason: str | None
    logprobs: dict | None


class ChatChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None
