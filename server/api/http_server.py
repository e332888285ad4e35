"""Running the app under uvicorn, with the startup lines the issue asks for, and a drain
on the first SIGTERM or SIGINT (server/api/drain.py) before it stops."""
from __future__ import annotations

import asyncio
import logging
import signal
import sys

import uvicorn

log = logging.getLogger("foldserve.api")

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


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose first SIGTERM or SIGINT drains the API before it stops.

    The listening socket stays open during the drain, so a new client hears a 503
    `shutting_down`, not a refused connection. After the drain the replies still being
    written get FLUSH_S seconds, then their connections are dropped, and uvicorn stops
    with nothing left to cancel (no CancelledError traceback). A second signal ends the
    running requests at once; a third stops without waiting for anything. The signal is
    not raised again once the server has stopped (uvicorn's own habit), so the process
    exits as its caller decides: 0 after a clean run."""

    FLUSH_S = 2.0

    def __init__(self, config, state):
        super().__init__(config)
        self.state = state
        self.signals = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Future | None = None

    async def serve(self, sockets=None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame) -> None:
        """uvicorn's signal handler, run on the main thread (the event loop's) between
        two of its steps; also callable from any thread."""
        if self._loop is None or self._loop.is_closed():
            self.should_exit = True
            return
        self._loop.call_soon_threadsafe(self._on_signal, sig)

    def _on_signal(self, sig: int) -> None:
        self.signals += 1
        name = signal.Signals(sig).name
        if self.signals == 1:
            log.info("%s: shutting down (--shutdown-timeout %g s)", name,
                     self.state.shutdown_timeout)
            self._drain_task = asyncio.ensure_future(self._drain_then_stop())
        elif self.signals == 2:
            log.warning("%s again: ending the running requests now", name)
            self.state.drain.hurry()
        else:
            log.warning("%s a third time: stopping without waiting", name)
            self.force_exit = self.should_exit = True

    async def _drain_then_stop(self) -> None:
        try:
            await self.state.drain.run(self.state, self.state.shutdown_timeout)
            await self._flush(self.FLUSH_S)
        except Exception:                       # a bug: still stop
            log.exception("the drain failed; stopping")
        finally:
            self.should_exit = True

    async def _flush(self, within_s: float) -> None:
        """Wait until no connection is in the middle of a reply, `within_s` at most; then
        drop the ones that are (a client that does not read)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while True:
            busy = [c for c in self.server_state.connections
                    if getattr(c, "cycle", None) is not None and not c.cycle.response_complete]
            if not busy or loop.time() >= deadline:
                break
            await asyncio.sleep(0.05)
        if busy:
            log.warning("shutting down: %d replies not written within %g s; their "
                        "connections are dropped", len(busy), within_s)
            for c in busy:
                c.transport.abort()


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
                sock=None, body_timeout: float = 60.0, write_timeout: float = 30.0) -> None:
    """Print the plan line, the exposure warning (if any) and the serving line, then serve
    until a signal, with header, body and write deadlines and a connection cap
    (server/api/protocol.py); the first SIGTERM or SIGINT drains (DrainingServer).
    `sock`: a listening socket to serve on (serve claims it before the model loads:
    server/api/http_socket.py); its port is the one the serving line names."""
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
                              body_timeout, write_timeout)
    if sock is not None:
        port = sock.getsockname()[1]
    print(startup_line(state, host, port), file=out, flush=True)
    # the drain has ended every request and dropped what was not written before uvicorn's
    # own shutdown begins; its graceful wait is a last resort
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=2, http=guarded_protocol(limits),
                            log_config=timed_log_config())
    throttle_floods("asyncio", "uvicorn.error")     # after Config has set up logging
    freeze_startup()        # start-up's objects out of every later full collection (gchold.py)
    DrainingServer(config, state).run(sockets=[sock] if sock is not None else None)
