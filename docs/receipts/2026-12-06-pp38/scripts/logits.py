import server, sys, hashlib
from pathlib import Path
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
out = sys.argv[1]
res = {}
for f in sys.argv[2:]:
    fs = Foldserve(Path(f), 2)
    toks = tuple(int(t) for t in np.random.default_rng(7).integers(0, fs.spec.vocab, 512))
    fs._begin(0)
    lg = np.asarray(fs.eng.apply(RoundStep((Chunk(0, 0, toks),))), np.float32)
    nxt = int(np.argmax(lg[0]))
    steps = [lg.copy()]
    for k in range(4):
        lg = np.asarray(fs.eng.apply(RoundStep((Chunk(0, 512 + k, (nxt,)),))), np.float32)
        nxt = int(np.argmax(lg[0])); steps.append(lg.copy())
    fs._end(1)
    h = hashlib.sha256(b"".join(s.tobytes() for s in steps)).hexdigest()
    res[Path(f).name] = h
    print(Path(f).name, h, flush=True)
Path(out).write_text("\n".join(f"{k} {v}" for k, v in res.items()) + "\n")
