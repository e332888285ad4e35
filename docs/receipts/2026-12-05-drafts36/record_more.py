"""More greedy replies of the default model for the drafter replay (held out from the one
it was tuned on): the editing prompt cut at other lengths, and chat prompts (the 16
streams' topics, and two more prose asks). Ids via bench/drafts_profile.one (drafted ==
plain, so the drafted run's ids are the plain reply).

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-drafts36/record_more.py
"""
import json
import sys

sys.argv = [sys.argv[0]]
sys.path.insert(0, "bench")
sys.path.insert(0, "tests/drafts")
import drafts_profile as D  # noqa: E402
from editing import chat_ids, editing_prompt  # noqa: E402

from server.engine.build import open_model  # noqa: E402

TOPICS = ["the moon", "a river", "bread", "winter", "a violin", "trains"]
m = open_model(None, progress=False)
tok = m.tokenizer
asks = [(f"edit{c}", tok.encode(editing_prompt(c)), 300) for c in (1200, 2000, 2800, 3600)]
asks += [(f"chat:{t}", chat_ids(tok, [{"role": "user", "content": f"Write a few sentences about {t}."}]), 160)
         for t in TOPICS]
asks += [("prose2", chat_ids(tok, [{"role": "user", "content": "Explain how a bicycle works, step by step."}]), 256),
         ("code", chat_ids(tok, [{"role": "user", "content": "Write a Python function that parses a CSV file "
                                  "and returns a list of dicts, with a docstring and a test."}]), 300)]
out = {}
for name, prompt, n in asks:
    ids, r = D.one(m.engine, prompt, n, True, None, 8)
    out[name] = (prompt, ids)
    print(name, len(prompt), len(ids), r["rounds"], r["draft_tokens"], r["accepted"], flush=True)
json.dump(out, open("docs/receipts/2026-12-05-drafts36/replies_more.json", "w"))
