"""How much of each recorded reply (replies.json, record.py) is the file: the reply's
tokens in runs of at least 8 tokens that also occur in the source (difflib's matching
blocks, token ids by the default model's tokenizer), and its exact prefix (record.py).
  PYTHONPATH=$PWD python docs/receipts/2026-12-06-edit38/copied.py replies.json"""
import difflib
import json
import sys

from editing import EDIT_SET
from server.engine.locate import resolve
from server.text.tokenizer import Tokenizer

tok = Tokenizer.from_gguf(resolve(None))
d = json.load(open(sys.argv[1]))
for t in EDIT_SET:
    r = d[t.name]
    a, b = tok.encode(r["text"]), tok.encode(t.text())
    blocks = [m for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
              if m.size >= 8]
    in_file = sum(m.size for m in blocks)
    last = max((m.a + m.size for m in blocks), default=0)
    print(f"{t.name}: {len(a)} reply tokens; exact prefix {r['copied_tokens']} tokens; "
          f"in 8+-token runs of the file {in_file} ({in_file / len(a):.0%}), the last ending at "
          f"reply token {last}")
