"""Structured-output requests through the real API app and the real tokenizer, in a
process of its own (tests/api/test_grammar_crash.py): a grammar that crashes the grammar
engine takes this process down, not the test run.

    python tests/api/grammar_child.py [nolimits] < bodies.json
posts each body of the JSON list in turn and prints a line {"status": ..., "body": ...}
for each; `nolimits` turns grammar_limits' checks off, to show what the compiler thread
alone survives.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fastapi.testclient import TestClient  # noqa: E402

from api_fakes import make_state  # noqa: E402
from server.api import create_app  # noqa: E402
from server.engine.locate import default_gguf  # noqa: E402
from server.text.tokenizer import Tokenizer  # noqa: E402


def main() -> None:
    if "nolimits" in sys.argv[1:]:
        import server.engine.grammar_limits as limits
        limits.problem = lambda kind, spec: None
    bodies = json.loads(sys.stdin.read())
    state = make_state()
    state.tokenizer = Tokenizer.from_gguf(default_gguf())
    with TestClient(create_app(state)) as client:
        for body in bodies:
            r = client.post("/v1/chat/completions", json=body)
            print(json.dumps({"status": r.status_code, "body": r.json()}), flush=True)


if __name__ == "__main__":
    main()
