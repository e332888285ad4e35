"""Where the server's pp512 TTFT goes: the engine on 512 tokens in one round vs two of 256
(the server's --prefill-chunk), fresh process, before any llama-bench; wall clock each."""
import sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, ".")
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path("/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"), 2)
rng = np.random.default_rng(0)
for rep in range(2):
    for chunk in (512, 256):
        toks = tuple(int(t) for t in rng.integers(0, f.spec.vocab, 512))
        f._begin(0)
        t = time.perf_counter()
        for a in range(0, 512, chunk):
            f.eng.apply(RoundStep((Chunk(0, a, toks[a:a + chunk]),)))
        dt = time.perf_counter() - t
        f._end(1)
        print(f"rep {rep} chunk {chunk}: {dt:.2f} s, {512 / dt:.1f} tok/s", flush=True)
