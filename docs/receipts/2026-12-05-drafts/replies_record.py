import sys, json
sys.path.insert(0,"tests/drafts")
from server.engine.build import open_model
from server.generate import generate
from server.requests import SamplingParams
from editing import editing_prompt, PROSE, chat_ids
m = open_model(None, progress=False); tok=m.tokenizer
e = tok.encode(editing_prompt()); 
eo = generate(m, e, SamplingParams(max_tokens=400, temperature=0.0))
p = chat_ids(tok, PROSE)
po = generate(m, p, SamplingParams(max_tokens=256, temperature=0.0))
json.dump({"edit":[e,eo],"prose":[p,po]}, open("/tmp/replies.json","w"))
