"""CORS (pure ASGI middleware, outermost): which other sites' pages may read this server.

`--allowed-origins` lists them (vLLM's flag): origins such as `http://localhost:3000`,
comma-separated or the flag repeated (or vLLM's JSON list), `*` for every site. With none
(the default) no response carries Access-Control-Allow-Origin, so a browser lets no other
site read a reply: a keyless server on 127.0.0.1 is not readable by whatever page its
user has open (vLLM's default is every origin).

For an allowed origin: a preflight (OPTIONS with Access-Control-Request-Method) is
answered 204 here, before the key check (a preflight never carries the key), with
Access-Control-Allow-Origin, -Methods (GET, POST, OPTIONS), -Headers (ALLOW_HEADERS and
whatever the preflight asks for) and -Max-Age; every other response gets
Access-Control-Allow-Origin and Vary: Origin. A preflight from any other origin is a 403
in OpenAI's error shape; its other requests pass on untouched (no header: the browser
keeps the reply from the page).
"""
from __future__ import annotations

import json

from .errors import ApiError

ALLOW_METHODS = "GET, POST, OPTIONS"
ALLOW_HEADERS = ("authorization", "content-type", "x-api-key", "anthropic-version",
                 "anthropic-beta", "openai-organization", "openai-project")
MAX_AGE = "600"


def parse_origins(values) -> tuple[str, ...]:
    """--allowed-origins as given (each a comma list, or a JSON list) -> the origins."""
    out: list[str] = []
    for v in values or ():
        v = v.strip()
        if v.startswith("["):
            try:
                items = json.loads(v)
            except ValueError:
                raise ValueError(f"--allowed-origins {v!r}: not a JSON list") from None
            if not all(isinstance(x, str) for x in items):
                raise ValueError(f"--allowed-origins {v!r}: a list of origin strings")
        else:
            items = v.split(",")
        for o in items:
            o = o.strip().rstrip("/")
            if not o:
                continue
            if o != "*" and "://" not in o:
                raise ValueError(f"--allowed-origins: {o!r} is not an origin "
                                 "(scheme://host[:port]) or *")
            if o not in out:
                out.append(o)
    return tuple(out)


class Cors:
    def __init__(self, app, origins: tuple[str, ...]):
        self.app = app
        self.any = "*" in origins
        self.origins = frozenset(o.lower() for o in origins)

    def allowed(self, origin: str) -> bool:
        return self.any or origin.lower() in self.origins

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not (self.any or self.origins):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        origin = headers.get(b"origin", b"").decode("latin-1")
        if not origin:
            return await self.app(scope, receive, send)
        ok = self.allowed(origin)
        allow = b"*" if self.any else origin.encode("latin-1")
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            if not ok:
                err = ApiError(403, f"origin {origin!r} may not call this server; start it "
                               "with --allowed-origins to allow it", code="origin_not_allowed")
                return await err.response()(scope, receive, send)
            asked = headers.get(b"access-control-request-headers", b"").decode("latin-1")
            names = list(ALLOW_HEADERS) + [h.strip().lower() for h in asked.split(",")
                                           if h.strip() and h.strip().lower() not in ALLOW_HEADERS]
            await send({"type": "http.response.start", "status": 204, "headers": [
                (b"access-control-allow-origin", allow),
                (b"access-control-allow-methods", ALLOW_METHODS.encode()),
                (b"access-control-allow-headers", ", ".join(names).encode("latin-1")),
                (b"access-control-max-age", MAX_AGE.encode()),
                (b"vary", b"Origin")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if not ok:
            return await self.app(scope, receive, send)

        async def send_with_cors(message):
            if message["type"] == "http.response.start":
                extra = [(b"access-control-allow-origin", allow), (b"vary", b"Origin")]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return await self.app(scope, receive, send_with_cors)
