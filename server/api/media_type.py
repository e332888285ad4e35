"""The JSON routes take JSON bodies only: a request's Content-Type must be application/json
or application/*+json (any case; parameters allowed, a charset only UTF-8's). Anything else,
or no Content-Type at all, is a 415 in OpenAI's shape naming the type it got.

Why a missing type is refused too: a web page may POST to any origin, with no CORS
preflight, a body typed text/plain, a form, or a Blob with no type at all (no Content-Type
header). Served, any page the user visits could make a keyless server on their machine
generate. The openai client, httpx's and requests' `json=` and `curl --json` send
application/json; `curl -d` alone sends application/x-www-form-urlencoded, refused."""
from __future__ import annotations

from fastapi import Request

from .errors import ApiError

UTF8 = ("utf-8", "utf8")


def require_json(request: Request) -> None:
    raw = request.headers.get("content-type")
    if raw is None or not raw.strip():
        raise unsupported("The request has no Content-Type; send the JSON body with "
                          "'Content-Type: application/json'")
    media, *params = (part.strip() for part in raw.split(";"))
    kind, _, sub = media.lower().partition("/")
    if kind != "application" or not (sub == "json" or sub.endswith("+json")):
        raise unsupported(f"Unsupported Content-Type {media!r}: this route takes a JSON "
                          "body; send it with 'Content-Type: application/json'")
    for param in params:
        name, _, value = param.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in UTF8:
            raise unsupported(f"Unsupported charset {value.strip()!r} in Content-Type "
                              f"{raw.strip()!r}: a JSON body is UTF-8")


def unsupported(message: str) -> ApiError:
    return ApiError(415, message, code="unsupported_media_type")
