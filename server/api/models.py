"""GET /v1/models: the one model this server serves."""
from __future__ import annotations

from fastapi import APIRouter, Request

from .errors import ApiError

router = APIRouter()


def card(state, name: str | None = None) -> dict:
    return {"id": name or state.model_name, "object": "model", "created": state.created,
            "owned_by": "foldserve", "root": state.model_name, "parent": None,
            "max_model_len": state.context}


@router.get("/v1/models")
async def list_models(request: Request):
    state = request.app.state.foldserve
    return {"object": "list", "data": [card(state, n) for n in state.names]}


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, request: Request):
    state = request.app.state.foldserve
    if model_id not in state.names:
        raise ApiError(404, f"The model '{model_id}' does not exist; this server serves "
                       f"'{state.model_name}'", param="model", code="model_not_found")
    return card(state, model_id)
