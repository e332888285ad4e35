"""What the Messages routes answer (messages.py), as pydantic models for the OpenAPI
document; tests/api/test_schemathesis.py holds every reply against them."""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict


class TextOut(BaseModel):
    type: Literal["text"]
    text: str


class ToolUseOut(BaseModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class MessageUsage(BaseModel):
    """input_tokens: the prompt's tokens the prompt cache did not hold; cache_read: those
    it held."""
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class AnthropicMessage(BaseModel):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[Union[TextOut, ToolUseOut]]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]
    stop_sequence: str | None
    usage: MessageUsage


class MessageStreamEvent(BaseModel):
    """One streamed event; its data's type is the SSE event's name."""
    model_config = ConfigDict(extra="allow")
    type: Literal["message_start", "content_block_start", "content_block_delta",
                  "content_block_stop", "message_delta", "message_stop", "error"]


class TokenCount(BaseModel):
    input_tokens: int


class AnthropicErrorDetail(BaseModel):
    type: str
    message: str


class AnthropicErrorBody(BaseModel):
    """Every refusal on the Messages routes, in Anthropic's shape."""
    type: Literal["error"]
    error: AnthropicErrorDetail
