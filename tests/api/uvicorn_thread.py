"""A real uvicorn serving an app on a free port, in a thread: for the official clients
(openai, anthropic, langchain), which speak HTTP, not ASGI."""
from __future__ import annotations

import contextlib
import threading
import time

import uvicorn

from free_ports import free_port


@contextlib.contextmanager
def serving(app):
    """-> the base URL while the server runs; stopped on exit."""
    port = free_port("127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
