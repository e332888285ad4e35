"""The body of Anthropic's `POST /v1/messages` (and `/v1/messages/count_tokens`), as strict
pydantic models: every field Anthropic documents that this server serves is here; a field
nobody defines is a 400 naming it (extra="forbid", errors.validation_error), and the fields
Anthropic defines that ask for what this server cannot do are refused by name
(REFUSED, code unsupported_field) unless sent with a value that asks for nothing.

Content blocks: text, tool_use (assistant) and tool_result (user); images, documents,
thinking and the server tools' blocks are refused by name (BLOCKS_REFUSED). `cache_control`
is taken wherever Anthropic takes it: this server's prompt cache keeps every prompt's
prefix without being asked, so the marker asks for nothing more.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .errors import invalid
from .unsupported import refuse_unsupported_fields, refused_first

Closed = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

# Anthropic's tool names (the chat route's FunctionDef is no stricter)
TOOL_NAME = r"^[A-Za-z0-9_\-]+$"

# top-level fields Anthropic defines that this server does not serve, unless sent with a
# value that asks for nothing: field -> (those values, why)
REFUSED: dict[str, tuple[tuple, str]] = {
    "thinking": ((None, {"type": "disabled"}), "extended thinking is not served; send "
                 "{\"type\": \"disabled\"} or leave it out"),
    "container": ((None,), "no code-execution containers"),
    "mcp_servers": ((None, []), "no MCP servers"),
    "context_management": ((None,), "context management (editing) is not served"),
    "inference_geo": ((None,), "one machine: no inference geography"),
    "speed": ((None, "standard"), "one speed"),
    "diagnostics": ((None,), "no diagnostics"),
    "user_profile_id": ((None,), "no user profiles"),
    "workspace_id": ((None,), "no workspaces"),
}

# content block types Anthropic defines that this server does not take -> why
BLOCKS_REFUSED: dict[str, str] = {
    "image": "text is the only input",
    "document": "text is the only input (no documents)",
    "search_result": "no search results as input",
    "thinking": "thinking blocks are not taken (this server does not return them)",
    "redacted_thinking": "thinking blocks are not taken (this server does not return them)",
    "server_tool_use": "no server tools",
    "web_search_tool_result": "no server tools",
    "container_upload": "no code-execution containers",
}


def _refuse_blocks(blocks, where: str) -> None:
    if not isinstance(blocks, list):
        return
    for j, b in enumerate(blocks):
        kind = b.get("type") if isinstance(b, dict) else None
        if isinstance(kind, str) and kind in BLOCKS_REFUSED:
            raise invalid(f"content blocks of type {kind!r} are not supported by this "
                          f"server: {BLOCKS_REFUSED[kind]}", param=f"{where}[{j}].type",
                          code="unsupported_field")
        if kind == "tool_result" and isinstance(b, dict):
            _refuse_blocks(b.get("content"), f"{where}[{j}].content")


def refuse_unserved(data) -> None:
    """The fields (REFUSED), content blocks (BLOCKS_REFUSED) and server tools this server
    does not serve: a 400 naming the first, code unsupported_field."""
    if not isinstance(data, dict):
        return
    refuse_unsupported_fields(data, REFUSED)
    messages = data.get("messages")
    for i, m in enumerate(messages if isinstance(messages, list) else ()):
        if isinstance(m, dict):
            _refuse_blocks(m.get("content"), f"messages[{i}].content")
    for i, t in enumerate(data.get("tools") if isinstance(data.get("tools"), list) else ()):
        kind = t.get("type") if isinstance(t, dict) else None
        if isinstance(kind, str) and kind != "custom":
            raise invalid(f"tools of type {kind!r} (Anthropic's server tools) are not "
                          "served; send custom tools (name, description, input_schema)",
                          param=f"tools[{i}].type", code="unsupported_field")


class CacheControl(BaseModel):
    """Taken and needs nothing: the prompt cache keeps every prefix (docs/api.md)."""
    model_config = Closed
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextBlock(BaseModel):
    model_config = Closed
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None
    citations: Annotated[list[Any], Field(max_length=0)] | None = None   # none to cite


class ToolUseBlock(BaseModel):
    model_config = Closed
    type: Literal["tool_use"]
    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class ToolResultBlock(BaseModel):
    model_config = Closed
    type: Literal["tool_result"]
    tool_use_id: Annotated[str, Field(min_length=1)]
    content: str | list[TextBlock] | None = None
    is_error: bool | None = None
    cache_control: CacheControl | None = None


Block = Annotated[Union[TextBlock, ToolUseBlock, ToolResultBlock], Field(discriminator="type")]


class MessageIn(BaseModel):
    model_config = Closed
    role: Literal["user", "assistant"]
    content: str | list[Block]


class ToolDef(BaseModel):
    model_config = Closed
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=TOOL_NAME)]
    description: str | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None
    cache_control: CacheControl | None = None
    strict: bool | None = None          # the arguments always validate (a grammar) when forced


class ToolChoice(BaseModel):
    model_config = Closed
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None                          # with type "tool"
    disable_parallel_tool_use: bool | None = None


class Metadata(BaseModel):
    """Informational, as OpenAI's `user`: recorded nowhere, changes nothing."""
    model_config = Closed
    user_id: str | None = None


class JsonOutputFormat(BaseModel):
    model_config = Closed
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False,
                              populate_by_name=True)
    format: JsonOutputFormat | None = None
    effort: None = None          # reasoning effort: this server's models do not think here


class CountTokensRequest(BaseModel):
    """What a prompt is made of: the body of /v1/messages/count_tokens."""
    model_config = Closed

    _refuse = refused_first(refuse_unserved)

    model: str | None = None
    messages: Annotated[list[MessageIn], Field(min_length=1)]
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: ToolChoice | None = None
    output_config: OutputConfig | None = None
    cache_control: CacheControl | None = None
    # refused (REFUSED) unless they ask for nothing; here so the OpenAPI document has them
    thinking: dict[str, Any] | None = None
    container: Any = None
    mcp_servers: list[Any] | None = None
    context_management: Any = None
    inference_geo: Any = None
    speed: Any = None
    diagnostics: Any = None
    user_profile_id: Any = None
    workspace_id: Any = None


class MessagesRequest(CountTokensRequest):
    max_tokens: Annotated[int, Field(ge=1)]
    stop_sequences: list[Annotated[str, Field(min_length=1)]] | None = None
    stream: bool | None = False
    temperature: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None          # 0: off
    metadata: Metadata | None = None
    service_tier: Literal["auto", "standard_only"] | None = None   # one tier: both are it
