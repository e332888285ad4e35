"""The editing set's plain greedy replies through the server (as bench/drafts.py asks them,
"draft": false, 400 tokens), and how far each copies its file: the reply's longest prefix
equal to the source's text after its first (changed) line, in characters and in tokens.
  PYTHONPATH=$PWD python docs/receipts/2026-12-06-edit38/record.py OUT.json"""
import json
import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import drafts as B  # noqa: E402
from editing import EDIT_SET  # noqa: E402
from server.engine.locate import resolve  # noqa: E402
from server.text.tokenizer import Tokenizer  # noqa: E402

tok = Tokenizer.from_gguf(resolve(None))
proc, url = B.start_server(8131, ["--draft", "ngram"])
out = {}
try:
    for t in EDIT_SET:
        r = B.streamed(url, "/v1/completions", {"prompt": t.prompt(), "max_tokens": 400,
                                                "temperature": 0, "draft": False})
        want = t.text().split("\n", 1)[1]
        n = 0
        while n < min(len(want), len(r["text"])) and want[n] == r["text"][n]:
            n += 1
        out[t.name] = {"text": r["text"], "finish": r["finish"], "tokens": r["tokens"],
                       "copied_chars": n, "copied_tokens": len(tok.encode(r["text"][:n])),
                       "source_rest_chars": len(want), "source_rest_tokens": len(tok.encode(want))}
        print(t.name, {k: v for k, v in out[t.name].items() if k != "text"}, flush=True)
finally:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
json.dump(out, open(sys.argv[1], "w"), indent=1)
