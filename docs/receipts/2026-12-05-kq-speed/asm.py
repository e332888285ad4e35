import sys, re
import kernels; kernels.init()
import numpy as np
from kernels import kquant_cpu as KQ, blocks_vec as V
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
rng = np.random.default_rng(0)
kind = sys.argv[1]
w = random_rows(rng, kind, 64, 2048); x = rng.standard_normal((8, 2048)).astype(np.float32)
KQ.matmul(x, kind, w)
rows = V._made("q8rows", kind, KQ.VNNI)
for sig, asm in rows.inspect_asm().items():
    open(f"/tmp/kq-bench/rows_{kind}.s", "w").write(asm)
    print(sig, len(asm.splitlines()))
