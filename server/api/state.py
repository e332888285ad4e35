"""What the API layer is built from: the scheduler, the tokenizer and the served limits."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Protocol

from server.requests import GenRequest, TokenEvent

from .backlog import Backlog
from .drain import Drain


class SchedulerLike(Protocol):
    def generate(self, req: GenRequest) -> AsyncIterator[TokenEvent]: ...
    def cancel(self, req_id: str) -> None: ...
    def check(self, prompt_len: int, max_tokens: int) -> None: ...
    def stats(self) -> dict: ...
    def stop_admitting(self, message: str) -> None: ...
    def end_running(self, message: str) -> None: ...


@dataclass
class AppState:
    """Everything `create_app` needs. The serve command builds one on rank 0.

    tokenizer is duck-typed: encode(text, add_special_tokens) -> ids, decode(ids) -> str,
    eos_ids, bos_id, chat_template, and optionally vocab_size / bos_token / eos_token.
    render_chat, when given, replaces the default template rendering
    (server.text.render_chat over tokenizer.chat_template): messages -> prompt text.
    """
    scheduler: SchedulerLike
    tokenizer: Any
    model_name: str
    context: int
    api_keys: tuple[str, ...] = ()  # any of them serves (server/api/keys.py); none: keyless
    max_body_bytes: int = 4 * 1024 * 1024
    max_queue: int = 256
    tp: int = 1
    plan_line: str = ""
    kv_mode: str = "pages"          # pages | windows, for the startup line
    load_s: float = 0.0
    render_chat: Callable[[list], str] | None = None
    served_names: tuple = ()        # --served-model-name: every name a request may use
    chat_template: str | None = None    # --chat-template: replaces the tokenizer's
    reasoning_parser: str = "auto"      # --reasoning-parser (server/text/reasoning.py)
    tool_call_parser: str = "auto"      # the tool-call format (server/text/glm_tools.py: auto,
    #                                     hermes, glm45, glm47; the --tool-call-parser value)
    allowed_origins: tuple = ()         # --allowed-origins (server/api/cors.py); * = any

    @property
    def names(self) -> tuple:
        return self.served_names or (self.model_name,)
    created: int = field(default_factory=lambda: int(time.time()))
    backlog: Backlog = field(default_factory=Backlog)   # admitted, not finished (--max-queue)
    drain: Drain = field(default_factory=Drain)         # the shutdown, once it begins
    shutdown_timeout: float = 5.0       # --shutdown-timeout: the drain's wait for running requests
