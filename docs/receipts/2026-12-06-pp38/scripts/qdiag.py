import server, sys, time, os
from pathlib import Path
from collections import defaultdict
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path(sys.argv[1]), 2)
from kernels import kquant_cpu as K
SER = int(os.environ.get("SER", "0"))
acc = defaultdict(lambda: [0.0, 0.0, 0])
def quantize(x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    M, Kd = x.shape
    t = time.perf_counter(); c = time.process_time()
    q = np.empty((M, Kd), np.int8); dx = np.empty((M, Kd // 256), np.float32); gs = np.empty((M, Kd // 256, 16), np.int32)
    if M >= 64 and M * Kd > SER:
        K.halves.pair(lambda a, b: K.quantize_rows(x[a:b], q[a:b], dx[a:b], gs[a:b]), M // 2, M)
    else:
        K.quantize_rows(x, q, dx, gs)
    r = acc[f"quantize {x.shape}"]; r[0] += time.perf_counter() - t; r[1] += time.process_time() - c; r[2] += 1
    return q, dx, gs
K.quantize = quantize
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
for rep in range(3):
    acc.clear()
    t = time.perf_counter()
    f._begin(0); f.eng.apply(RoundStep((Chunk(0, 0, toks),))); f._end(1)
    print("SER", SER, "prefill", round((time.perf_counter() - t) * 1e3, 1), " ".join(f"{k}: {w*1e3:.2f} ms {c/max(w,1e-9):.2f} cores {n}" for k, (w, c, n) in sorted(acc.items())))
