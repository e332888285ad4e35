"""What /v1/responses answers (responses_api.py), as pydantic models for the OpenAPI
document; tests/api/test_schemathesis.py holds every reply against them."""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict

Status = Literal["in_progress", "completed", "incomplete"]


class OutputTextPart(BaseModel):
    type: Literal["output_text"]
    text: str
    annotations: list[Any]
    logprobs: list[Any]


class MessageOutItem(BaseModel):
    type: Literal["message"]
    id: str
    status: Status
    role: Literal["assistant"]
    content: list[OutputTextPart]


class FunctionCallOutItem(BaseModel):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: Status


class InputTokensDetails(BaseModel):
    cached_tokens: int


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"]


class ResponseError(BaseModel):
    code: str
    message: str


class ResponseObject(BaseModel):
    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["in_progress", "completed", "incomplete", "failed"]
    completed_at: int | None
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    instructions: str | None
    max_output_tokens: int | None
    model: str
    output: list[Union[MessageOutItem, FunctionCallOutItem]]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: None
    store: bool
    temperature: float
    text: dict[str, Any]
    tool_choice: Union[Literal["none", "auto", "required"], dict[str, Any]]
    tools: list[dict[str, Any]]
    top_p: float
    truncation: Literal["disabled"]
    usage: ResponseUsage | None
    user: str | None
    metadata: dict[str, str]


class ResponseStreamEvent(BaseModel):
    """One streamed event; its data's type is the SSE event's name."""
    model_config = ConfigDict(extra="allow")
    type: Literal["response.created", "response.in_progress", "response.output_item.added",
                  "response.content_part.added", "response.output_text.delta",
                  "response.output_text.done", "response.content_part.done",
                  "response.function_call_arguments.delta",
                  "response.function_call_arguments.done", "response.output_item.done",
                  "response.completed", "response.incomplete", "response.failed", "error"]
    sequence_number: int
