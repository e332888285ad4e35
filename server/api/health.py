"""GET /health: 200 while every rank answers, 503 with status "unhealthy" when one is gone."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

router = APIRouter()

FIELDS = ("ranks", "streams_busy", "streams_total", "pages_free", "pages_kept", "pages_total",
          "queue", "context")


@router.head("/health", include_in_schema=False)
@router.get("/health")
async def health(request: Request):
    state = request.app.state.foldserve
    try:
        stats = state.scheduler.stats()
    except Exception as e:
        return JSONResponse({"status": "unhealthy", "reason": f"{type(e).__name__}: {e}"},
                            status_code=503)
    body = {"status": "ok" if stats.get("ranks_ok", True) else "unhealthy",
            "model": state.model_name, "tp": state.tp}
    body.update({k: stats.get(k) for k in FIELDS})
    if body["context"] is None:
        body["context"] = state.context
    if body["status"] != "ok":
        body["reason"] = "a rank is gone; restart the server"
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


PING = {"response_class": Response,
        "responses": {200: {"description": "healthy (an empty body)"},
                      503: {"description": "a rank is gone (an empty body)"}}}


@router.post("/ping", **PING)           # two routes, two operation ids (ping_ping_post/_get)
@router.get("/ping", **PING)
async def ping(request: Request):
    """vLLM's (and SageMaker's) liveness probe, GET or POST: /health's status, an empty body.
    (errors.py's 405 names every method a path takes, whichever route the router tried.)"""
    r = await health(request)
    return Response(status_code=r.status_code)


@router.get("/version")
async def version():
    from server import __version__
    return {"version": __version__}
