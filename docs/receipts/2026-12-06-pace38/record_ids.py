"""The editing set's plain greedy replies in process (ids, 400 tokens; the prompt's ids too),
for the pace replays (replay.py): PYTHONPATH=$PWD python .../record_ids.py OUT.json"""
import json
import os
import sys

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "drafts"))
import drafts_profile as DP  # noqa: E402
from editing import EDIT_SET, PROSE, chat_ids  # noqa: E402
from server.engine.build import open_model  # noqa: E402

m = open_model(None, progress=False)
tok = m.tokenizer
out = {}
for name, prompt, n in [(t.name, tok.encode(t.prompt()), 400) for t in EDIT_SET] + [
        ("prose", chat_ids(tok, PROSE), 256)]:
    ids, _ = DP.one(m.engine, prompt, n, False, None, 8)
    out[name] = [prompt, ids]
    print(name, len(prompt), len(ids), flush=True)
json.dump(out, open(sys.argv[1], "w"))
