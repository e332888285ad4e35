"""GET /health: 200 while every rank answers; 503 with status "unhealthy" when one is gone
(the reason names it, and the pool's fields are null: a group that lost a rank has no pool
to speak of), or with status "stopping" while the server shuts down (server/api/drain.py)."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .drain import RETRY_AFTER

router = APIRouter()

FIELDS = ("ranks", "streams_busy", "streams_total", "pages_free", "pages_kept", "pages_total",
          "queue", "context")
LIVE = ("streams_busy", "pages_free", "pages_kept", "pages_total", "queue")   # null once lost


@router.head("/health", include_in_schema=False)
@router.get("/health")
async def health(request: Request):
    state = request.app.state.foldserve
    try:
        stats = state.scheduler.stats()
    except Exception as e:
        return JSONResponse({"status": "unhealthy", "reason": f"{type(e).__name__}: {e}"},
                            status_code=503)
    ok = stats.get("ranks_ok", True)
    body = {"status": "ok" if ok else "unhealthy", "model": state.model_name, "tp": state.tp}
    body.update({k: stats.get(k) for k in FIELDS})
    if body["context"] is None:
        body["context"] = state.context
    headers = None
    if not ok:
        body.update({k: None for k in LIVE})
        body["reason"] = f"{stats.get('lost') or 'a rank is gone'}; restart the server"
    elif state.drain.started:
        body["status"] = "stopping"
        body["reason"] = "this server is shutting down and takes no new requests"
        headers = {"Retry-After": RETRY_AFTER}
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503,
                        headers=headers)


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
