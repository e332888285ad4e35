"""Bearer-key check (pure ASGI middleware): with API keys set (server/api/keys.py), the
OpenAI routes and /tokenize, /detokenize need `Authorization: Bearer KEY` with any one of
them; /health, /ping, /version and /metrics stay open for probes and scrapers.

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
        header = dict(scope.get("headers") or ()).get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        if self.accepts(given.strip()) and scheme.lower() == b"bearer":
            return await self.app(scope, receive, send)
        message = ("Missing API key: send 'Authorization: Bearer KEY'" if not header
                   else "Incorrect API key provided")
        err = ApiError(401, message, code="invalid_api_key",
                       headers={"WWW-Authenticate": "Bearer"})
        await err.response()(scope, receive, send)
