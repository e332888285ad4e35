"""create_app: the FastAPI app over one AppState (scheduler, tokenizer, limits)."""
from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from . import chat, completions, health, messages, models, responses_api, tokenize
from .anthropic_errors import AnthropicErrors
from .auth import BearerAuth
from .bodylimit import BodyLimit
from .cors import Cors
from .docs_page import install_docs
from .errors import install_handlers
from .metrics import Metrics
from .openapi import install_openapi
from .response_store import ResponseStore
from .state import AppState
from .textwork import TextWork


def create_app(state: AppState) -> FastAPI:
    app = FastAPI(title="foldserve", summary="OpenAI-compatible LLM server",
                  version="0.1.0", docs_url=None, redoc_url=None)
    install_docs(app)                           # Swagger UI from local files, not a CDN
    app.state.foldserve = state
    app.state.text_work = TextWork()        # tokenizing and templates, off the event loop
    app.state.response_store = ResponseStore()  # previous_response_id's conversations
    app.state.metrics = metrics = Metrics(state.model_name, state.scheduler.stats)
    if getattr(state.scheduler, "metrics", False) is None:
        state.scheduler.metrics = metrics       # queue time is known only to the scheduler
    install_handlers(app)
    for module in (completions, chat, messages, responses_api, models, health, tokenize):
        app.include_router(module.router)

    @app.get("/metrics", include_in_schema=False)
    async def prometheus():
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    install_openapi(app)

    # each one added wraps those before: the key is checked before a large body is read
    app.add_middleware(BodyLimit, max_bytes=state.max_body_bytes)
    app.add_middleware(BearerAuth, api_keys=state.api_keys)
    app.add_middleware(AnthropicErrors)         # every refusal on /v1/messages in its shape
    app.add_middleware(Cors, origins=tuple(state.allowed_origins))  # preflights carry no key
    return app
