"""The OpenAI-compatible HTTP front end (rank 0): create_app(AppState) -> FastAPI."""
from .app import create_app
from .errors import ApiError
from .state import AppState, SchedulerLike

__all__ = ["create_app", "AppState", "SchedulerLike", "ApiError"]
