"""The OpenAPI document, with the request bodies the routes parse themselves (they read
raw bytes so that malformed JSON and wrong types get OpenAI-shaped 400s)."""
from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .schemas import ChatRequest, CompletionRequest, DetokenizeRequest, TokenizeRequest

BODIES = {"/v1/completions": CompletionRequest, "/v1/chat/completions": ChatRequest,
          "/tokenize": TokenizeRequest, "/detokenize": DetokenizeRequest}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(title=app.title, version=app.version, summary=app.summary,
                          routes=app.routes)
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        for path, model in BODIES.items():
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
            doc["paths"][path]["post"]["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
        app.openapi_schema = doc
        return doc

    app.openapi = openapi
