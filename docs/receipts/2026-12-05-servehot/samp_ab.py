"""ms a call of server/engine/sampler.sample on a 151,936-id row: peaked rows (N(0,3)) and
flat ones (N(0,0.5), as a random-weight model's), per sampling setting."""
import sys, time, json, numpy as np
from server.engine.sampler import SamplerState, sample
from server.requests import SamplingParams
V = 151936
rng = np.random.default_rng(0)
CASES = [dict(temperature=0.0), dict(temperature=0.0, logprobs=5), dict(temperature=0.7),
         dict(temperature=0.7, top_p=0.95), dict(temperature=0.7, top_k=40),
         dict(temperature=0.6, top_p=0.95, top_k=20)]
out = {}
for name, scale in (("peaked", 3.0), ("flat", 0.5)):
    rows = (rng.standard_normal((8, V)) * scale).astype(np.float32)
    for kw in CASES:
        st = SamplerState(SamplingParams(max_tokens=10**6, seed=1, **kw), list(range(100, 164)))
        for i in range(3): sample(rows[i % 8], st)
        N = 30; t = time.perf_counter()
        for i in range(N): sample(rows[i % 8], st)
        out[f"{name} {json.dumps(kw)}"] = round((time.perf_counter()-t)/N*1e3, 3)
print(json.dumps(out))
