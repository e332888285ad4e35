"""Running the app under uvicorn, with the startup lines the issue asks for."""
from __future__ import annotations

import sys

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def exposure_warning(host: str, api_key: str | None) -> str | None:
    if host in LOCAL_HOSTS or api_key:
        return None
    return (f"warning: binding {host} without --api-key: anyone who can reach this port "
            "can use the model; set --api-key or bind 127.0.0.1")


def startup_line(state, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return (f"serving {state.model_name} at http://{shown}:{port}/v1 (TP {state.tp}, "
            f"context {state.context}, {state.kv_mode}, loaded in {state.load_s:.1f} s)")


def run_uvicorn(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
                out=None) -> None:
    """Print the plan line, the exposure warning (if any) and the serving line, then serve
    until interrupted."""
    import uvicorn

    out = out or sys.stderr
    state = app.state.foldserve
    if state.plan_line:
        print(state.plan_line, file=out, flush=True)
    warning = exposure_warning(host, state.api_key)
    if warning:
        print(warning, file=out, flush=True)
    print(startup_line(state, host, port), file=out, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
