"""The body of OpenAI's `POST /v1/responses`, as strict pydantic models: every field
OpenAI documents that this server serves is here; a field nobody defines is a 400 naming it
(extra="forbid", errors.validation_error), and the fields OpenAI defines that ask for what
this server cannot do are refused by name (REFUSED, code unsupported_field) unless sent with
a value that asks for nothing.

Input items: messages (roles user, system, developer, assistant; text parts), function_call
and function_call_output items; images, files, audio, reasoning items, item references and
hosted tools' items are refused by name (ITEMS_REFUSED, PARTS_REFUSED).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from .errors import invalid
from .unsupported import refuse_unsupported_fields, refused_first

Closed = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

# top-level fields OpenAI defines that this server does not serve, unless sent with a value
# that asks for nothing: field -> (those values, why)
REFUSED: dict[str, tuple[tuple, str]] = {
    "reasoning": ((None, {}), "reasoning settings are not served by this route"),
    "include": ((None, []), "no extra output data (logprobs, reasoning, sources) to include"),
    "background": ((None, False), "no background responses; send stream or wait"),
    "conversation": ((None,), "no stored conversations; send previous_response_id"),
    "prompt": ((None,), "no stored prompt templates"),
    "max_tool_calls": ((None,), "no hosted tools to limit"),
    "top_logprobs": ((None, 0), "logprobs are not returned by this route; use "
                     "/v1/chat/completions"),
    "truncation": ((None, "disabled"), "the context is never truncated; shorten the input"),
    "service_tier": ((None, "auto", "default"), "one tier"),
    "prompt_cache_retention": ((None, "in_memory"), "the prompt cache lives in memory"),
    "context_management": ((None, []), "context management (compaction) is not served"),
    "moderation": ((None,), "no moderation"),
    "access_programs": ((None,), "no access programs"),
    "background_options": ((None,), "no background responses"),
    "image": ((None,), "no image output"),
    "prompt_cache_options": ((None,), "the prompt cache keeps every prefix; no options"),
}

# input item types and content part types OpenAI defines that this server does not take
ITEMS_REFUSED: dict[str, str] = {
    "reasoning": "reasoning items are not taken (this route does not return them)",
    "item_reference": "item references are not taken; send the items, or previous_response_id",
    "file_search_call": "no hosted tools", "web_search_call": "no hosted tools",
    "computer_call": "no hosted tools", "computer_call_output": "no hosted tools",
    "image_generation_call": "no hosted tools", "code_interpreter_call": "no hosted tools",
    "local_shell_call": "no hosted tools", "local_shell_call_output": "no hosted tools",
    "shell_call": "no hosted tools", "shell_call_output": "no hosted tools",
    "apply_patch_call": "no hosted tools", "apply_patch_call_output": "no hosted tools",
    "mcp_list_tools": "no MCP servers", "mcp_approval_request": "no MCP servers",
    "mcp_approval_response": "no MCP servers", "mcp_call": "no MCP servers",
    "custom_tool_call": "only function tools", "custom_tool_call_output": "only function tools",
    "compaction": "no compaction",
}
PARTS_REFUSED: dict[str, str] = {
    "input_image": "text is the only input", "input_file": "text is the only input",
    "input_audio": "text is the only input",
}
TOOLS_REFUSED = ("file_search", "web_search", "web_search_preview", "computer_use_preview",
                 "computer", "mcp", "code_interpreter", "image_generation", "local_shell",
                 "shell", "custom", "apply_patch", "namespace", "tool_search")


def _refuse_types(values, table: dict, where: str) -> None:
    if not isinstance(values, list):
        return
    for i, v in enumerate(values):
        kind = v.get("type") if isinstance(v, dict) else None
        if isinstance(kind, str) and kind in table:
            raise invalid(f"{where}[{i}].type {kind!r} is not supported by this server: "
                          f"{table[kind]}", param=f"{where}[{i}].type",
                          code="unsupported_field")


def refuse_unserved(data) -> None:
    """The fields (REFUSED), input items, content parts and hosted tools this server does
    not serve: a 400 naming the first, code unsupported_field."""
    if not isinstance(data, dict):
        return
    refuse_unsupported_fields(data, REFUSED)
    items = data.get("input")
    _refuse_types(items, ITEMS_REFUSED, "input")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict):
            _refuse_types(item.get("content"), PARTS_REFUSED, f"input[{i}].content")
            _refuse_types(item.get("output"), PARTS_REFUSED, f"input[{i}].output")
    _refuse_types(data.get("tools"), dict.fromkeys(TOOLS_REFUSED, "only function tools are "
                                                   "served (no hosted tools)"), "tools")


class InputText(BaseModel):
    model_config = Closed
    type: Literal["input_text"]
    text: str


class OutputText(BaseModel):
    """An assistant's earlier text, as this route returned it."""
    model_config = Closed
    type: Literal["output_text"]
    text: str
    annotations: Annotated[list[Any], Field(max_length=0)] | None = None   # none to keep
    logprobs: list[Any] | None = None       # of the earlier reply: not part of the prompt


class Refusal(BaseModel):
    model_config = Closed
    type: Literal["refusal"]
    refusal: str


Part = Annotated[Union[InputText, OutputText, Refusal], Field(discriminator="type")]


class MessageItem(BaseModel):
    model_config = Closed
    type: Literal["message"] | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[Part]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FunctionCallItem(BaseModel):
    model_config = Closed
    type: Literal["function_call"]
    call_id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    arguments: str                              # a JSON object, as text
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FunctionCallOutputItem(BaseModel):
    model_config = Closed
    type: Literal["function_call_output"]
    call_id: Annotated[str, Field(min_length=1)]
    output: str | list[InputText]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


def _item_kind(v) -> str | None:
    if isinstance(v, dict):
        return v.get("type") or "message"
    return getattr(v, "type", None) or "message"


Item = Annotated[Union[Annotated[MessageItem, Tag("message")],
                       Annotated[FunctionCallItem, Tag("function_call")],
                       Annotated[FunctionCallOutputItem, Tag("function_call_output")]],
                 Discriminator(_item_kind)]


class FunctionTool(BaseModel):
    model_config = Closed
    type: Literal["function"]
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionChoice(BaseModel):
    model_config = Closed
    type: Literal["function"]
    name: str


class JsonSchemaText(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False,
                              populate_by_name=True)
    type: Literal["json_schema"]
    name: str
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


class PlainText(BaseModel):
    model_config = Closed
    type: Literal["text", "json_object"]


class TextConfig(BaseModel):
    model_config = Closed
    format: Annotated[Union[PlainText, JsonSchemaText], Field(union_mode="left_to_right")] | None = None
    verbosity: Literal["medium"] | None = None      # the model's own length: "medium"


class ResponsesStreamOptions(BaseModel):
    model_config = Closed
    include_obfuscation: bool | None = None         # no padding is ever added


class ResponsesRequest(BaseModel):
    model_config = Closed

    _refuse = refused_first(refuse_unserved)

    model: str | None = None
    input: str | Annotated[list[Item], Field(min_length=1)]
    instructions: str | None = None
    previous_response_id: Annotated[str, Field(min_length=1)] | None = None
    store: bool | None = True
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | FunctionChoice | None = None
    parallel_tool_calls: bool | None = True
    text: TextConfig | None = None
    stream: bool | None = False
    stream_options: ResponsesStreamOptions | None = None
    metadata: Annotated[dict[str, Annotated[str, Field(max_length=512)]],
                        Field(max_length=16)] | None = None     # echoed back
    user: str | None = None                 # informational
    safety_identifier: str | None = None    # informational
    prompt_cache_key: str | None = None     # the prompt cache matches prefixes without it
    # refused (REFUSED) unless they ask for nothing; here so the OpenAPI document has them
    reasoning: dict[str, Any] | None = None
    include: list[Any] | None = None
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None
    max_tool_calls: Any = None
    top_logprobs: Any = None
    truncation: Any = None
    service_tier: Any = None
    prompt_cache_retention: Any = None
    context_management: Any = None
    moderation: Any = None
    access_programs: Any = None
    background_options: Any = None
    image: Any = None
    prompt_cache_options: Any = None
