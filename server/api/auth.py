"""API-key check (pure ASGI middleware): with API keys set (server/api/keys.py), the OpenAI
and Anthropic routes and /tokenize, /detokenize need `Authorization: Bearer KEY` or (as
Anthropic's clients send it) `x-api-key: KEY`, with any one of the keys; /health, /ping,
/version and /metrics stay open for probes and scrapers.

The check takes the same time whichever key matched, or none: the given key and every
served key are compared as SHA-256 digests (equal lengths, so hmac.compare_digest's time
says nothing of a key's length), each of them, with no early exit."""
from __future__ import annotations

import hashlib
import hmac

from .errors import ApiError

OPEN_PATHS = ("/health", "/metrics", "/docs", "/openapi.json", "/ping", "/version")


def needs_key(path: str) -> bool:
    return not path.startswith(OPEN_PATHS)


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()


class BearerAuth:
    def __init__(self, app, api_keys: tuple[str, ...] = ()):
        self.app = app
        self.digests = tuple(_digest(k.encode()) for k in api_keys)

    def accepts(self, given: bytes) -> bool:
        d, ok = _digest(given), False
        for key in self.digests:
            ok |= hmac.compare_digest(d, key)
        return ok

    async def __call__(self, scope, receive, send):
        if not self.digests or scope["type"] != "http" or not needs_key(scope["path"]):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        header = headers.get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        x_key = headers.get(b"x-api-key")
        if self.accepts(given.strip()) and scheme.lower() == b"bearer":
            return await self.app(scope, receive, send)
        if x_key is not None and self.accepts(x_key.strip()):
            return await self.app(scope, receive, send)
        message = ("Missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                   if not header and x_key is None else "Incorrect API key provided")
        err = ApiError(401, message, code="invalid_api_key",
                       headers={"WWW-Authenticate": "Bearer"})
        await err.response()(scope, receive, send)
