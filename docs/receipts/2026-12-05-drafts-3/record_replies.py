import json, sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, "bench"); sys.path.insert(0, "tests/drafts")
import drafts_profile as D
from editing import PROSE, chat_ids, editing_prompt
from server.engine.build import open_model
m = open_model(None, progress=False)
tok = m.tokenizer
out = {}
for name, prompt, n in (("edit", tok.encode(editing_prompt()), 400), ("prose", chat_ids(tok, PROSE), 256)):
    ids, r = D.one(m.engine, prompt, n, True, None, 8)
    out[name] = (prompt, ids)
    print(name, r["rounds"], r["draft_tokens"], r["accepted"])
json.dump(out, open("docs/receipts/2026-12-05-drafts-3/replies.json", "w"))
