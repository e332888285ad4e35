"""Running the app under uvicorn, with the startup lines the issue asks for."""
from __future__ import annotations

import sys

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def exposure_warning(host: str, api_keys: tuple[str, ...]) -> str | None:
    if host in LOCAL_HOSTS or api_keys:
        return None
    return (f"warning: binding {host} without an API key: anyone who can reach this port "
            "can use the model; set FOLDSERVE_API_KEY (or --api-key-file PATH) or bind "
            "127.0.0.1")


def startup_line(state, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return (f"serving {state.model_name} at http://{shown}:{port}/v1 (TP {state.tp}, "
            f"context {state.context}, {state.kv_mode}, loaded in {state.load_s:.1f} s)")


def default_max_connections() -> int:
    """Raise the soft file-descriptor limit to the hard one, and leave an eighth of it (at
    least 64) for everything but client connections: model files, rank links, logs."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return max(16, soft - max(64, soft // 8))


def timed_log_config() -> dict:
    """uvicorn's own log config with the time in front of each line, as foldserve's."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    from server.log_format import LOG_DATE, LOG_PREFIX
    config = copy.deepcopy(LOGGING_CONFIG)
    for f in config["formatters"].values():
        f["fmt"] = LOG_PREFIX + f["fmt"]
        f["datefmt"] = LOG_DATE
    return config


def run_uvicorn(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
                out=None, header_timeout: float = 10.0, max_connections: int | None = None,
                sock=None, body_timeout: float = 60.0) -> None:
    """Print the plan line, the exposure warning (if any) and the serving line, then serve
    until interrupted, with header and body deadlines and a connection cap (server/api/protocol.py).
    `sock`: a listening socket to serve on (serve claims it before the model loads:
    server/api/http_socket.py); its port is the one the serving line names."""
    import uvicorn

    from .gchold import freeze_startup
    from .logthrottle import throttle_floods
    from .protocol import ConnectionLimits, guarded_protocol

    out = out or sys.stderr
    state = app.state.foldserve
    if state.plan_line:
        print(state.plan_line, file=out, flush=True)
    warning = exposure_warning(host, state.api_keys)
    if warning:
        print(warning, file=out, flush=True)
    limits = ConnectionLimits(header_timeout, max_connections or default_max_connections(),
                              body_timeout)
    if sock is not None:
        port = sock.getsockname()[1]
    print(startup_line(state, host, port), file=out, flush=True)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=5, http=guarded_protocol(limits),
                            log_config=timed_log_config())
    throttle_floods("asyncio", "uvicorn.error")     # after Config has set up logging
    freeze_startup()        # start-up's objects out of every later full collection (gchold.py)
    uvicorn.Server(config).run(sockets=[sock] if sock is not None else None)
