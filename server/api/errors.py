"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.

Every refusal the API layer makes is an ApiError; the exception handlers installed by
`install_handlers` turn it (and FastAPI's own validation and routing errors) into a
JSON body of that shape. A 500 is only ever a real bug in this server.
"""
from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("foldserve.api")

TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    431: "invalid_request_error",
    500: "server_error",
    503: "service_unavailable",
}


class ApiError(Exception):
    """A refusal a client can act on: the HTTP status, the field (param) and a code."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, type: str | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or TYPE_BY_STATUS.get(status, "invalid_request_error")
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type,
                          "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return ErrorResponse(self.body(), status_code=self.status, headers=self.headers)


class ErrorResponse(JSONResponse):
    """ASCII JSON: a message that quotes the client's text stays encodable whatever it held."""

    def render(self, content) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def invalid(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def context_exceeded(context: int, prompt_tokens: int, max_tokens: int) -> ApiError:
    return ApiError(
        400,
        f"This server's maximum context length is {context} tokens; the prompt has "
        f"{prompt_tokens} tokens and max_tokens asks for {max_tokens}",
        param="max_tokens" if prompt_tokens < context else "prompt",
        code="context_length_exceeded")


def from_exception(exc: BaseException) -> ApiError:
    """Adopt an exception raised by the scheduler's check() (or any ValueError)."""
    if isinstance(exc, ApiError):
        return exc
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    code = getattr(exc, "code", None)
    if isinstance(code, int) and status is None:
        status, code = code, None
    if not isinstance(status, int) or not 400 <= status < 600:
        status = 400
    return ApiError(status, str(exc) or type(exc).__name__,
                    param=getattr(exc, "param", None),
                    code=code if isinstance(code, str) else None)


TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "bytes"}


def _is_type_tag(part: str) -> bool:
    # pydantic names union branches in loc ('str', 'list[int]', 'constrained-int', ...)
    return part in TYPE_TAGS or "[" in part or "-" in part


def pydantic_param(loc) -> str | None:
    """('body', 'messages', 0, 'content') -> 'messages[0].content'."""
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p != "body" and not _is_type_tag(p):
            out += ("." if out else "") + p
    return out or None


def validation_error(errors) -> ApiError:
    """The first pydantic error, as a 400 naming the field; the branches of a union
    that all failed on that field are listed together."""
    if not errors:
        return invalid("Invalid request body")
    first = errors[0]
    if first.get("type") == "json_invalid":
        return invalid(f"The request body is not valid JSON: {first.get('msg')}")
    param = pydantic_param(first.get("loc", ()))
    if first.get("type") == "extra_forbidden":     # the Responses and Messages routes' bodies
        return invalid(f"Unknown field '{param}': this route does not take it (docs/api.md "
                       "lists the fields it takes)", param=param, code="unknown_field")
    msgs = []
    for e in errors:
        if pydantic_param(e.get("loc", ())) == param and e.get("msg") not in msgs:
            msgs.append(e.get("msg"))
    where = f"'{param}'" if param else "the request body"
    got = first.get("input")
    shown = "" if isinstance(got, (dict, list)) else f" (got {got!r:.60})"
    return invalid(f"Invalid value for {where}{shown}: {'; or '.join(msgs)}", param=param)


def allowed_methods(request: Request) -> str:
    """Every method some route of the app serves on this path: Starlette's own 405 names
    only the first route whose path matched, so GET /health's route hid HEAD. (The routers
    are included without a prefix, so a route's own pattern is its path.)"""
    path, methods = request.url.path, set()

    def walk(routes):
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:
                walk(inner.routes)
            elif getattr(route, "path_regex", None) is not None and route.path_regex.match(path):
                methods.update(getattr(route, "methods", None) or ())

    walk(request.app.router.routes)
    return ", ".join(sorted(methods))


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        return validation_error(exc.errors()).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        message = {404: f"No route {request.url.path}",
                   405: f"Method {request.method} is not allowed on {request.url.path}"}.get(
            exc.status_code, str(exc.detail))
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:          # several routes may serve one path (GET + HEAD)
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return ApiError(exc.status_code, message, headers=headers).response()

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return ApiError(500, f"Internal server error ({type(exc).__name__}); this is a bug "
                        "in foldserve, please report it", code="internal_error").response()
