"""Recent responses of /v1/responses, for `previous_response_id`: each stored response's
conversation (its input, after the conversation it continued, and its output, as chat
messages; never its instructions, which OpenAI does not carry over), in memory.

Bounded: at most MAX_RESPONSES responses and MAX_CHARS characters of messages (as JSON)
in all; the least recently stored or used goes first. A response past the bounds is
forgotten and an id not held is answered with a 400 (responses_api.py): a client can always
resend the items themselves. The continued conversation renders the same prompt prefix,
which the prompt cache (server/planner/prompt_cache.py) holds while it can.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict

MAX_RESPONSES = 1024
MAX_CHARS = 64 << 20


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_chars: int = MAX_CHARS):
        self.max_responses, self.max_chars = max_responses, max_chars
        self._items: OrderedDict[str, tuple[list[dict], int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, response_id: str, messages: list[dict]) -> None:
        size = len(json.dumps(messages, ensure_ascii=False))
        with self._lock:
            old = self._items.pop(response_id, None)
            if old is not None:
                self._chars -= old[1]
            if size > self.max_chars:
                return                              # larger than the whole store: not kept
            self._items[response_id] = (messages, size)
            self._chars += size
            while len(self._items) > self.max_responses or self._chars > self.max_chars:
                _, (_, n) = self._items.popitem(last=False)
                self._chars -= n

    def get(self, response_id: str) -> list[dict] | None:
        """The conversation through that response (a copy of the list), or None."""
        with self._lock:
            entry = self._items.get(response_id)
            if entry is None:
                return None
            self._items.move_to_end(response_id)
            return list(entry[0])
