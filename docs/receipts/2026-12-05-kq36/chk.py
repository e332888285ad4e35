import sys
sys.path.insert(0, "/tmp/kq36")
import server  # noqa
import numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
from kernels.blocks_cpu import F16
from gb import groups
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
import os; KIND = os.environ.get("KIND", "Q4_K"); rng = np.random.default_rng(0)
E = 8
ex, offs = groups(40, E, 2, rng)
R = int(offs[-1]); N, K = 64, 768
st = np.stack([random_rows(rng, KIND, N, K) for _ in range(E)])
x = rng.standard_normal((R, K)).astype(np.float32)
q, dx, gs = KQ.quantize(x)
y = KQ.grouped_quantized(q, dx, gs, KIND, st, ex, offs)
ref = np.empty_like(y)
for g in range(len(ex)):
    a, b = offs[g], offs[g + 1]
    KQ.matmul_ref_rows(KIND == "Q6_K", q[a:b], dx[a:b], gs[a:b], st[ex[g]], F16, ref[a:b])
bad = np.nonzero((y != ref).any(1))[0]
print("offs", offs, "bad rows", bad[:20], len(bad))
aux = KQ._aux(KIND, True, gs, dx, offs)
g16 = gs.astype(np.int16).view(np.uint16).astype(np.uint32)
exp = (g16[:, :, 0::2] | (g16[:, :, 1::2] << 16)).view(np.int32)
print("gw ok", np.array_equal(aux[:, :, :8], exp), "zeros", (aux[:, :, 8:16] == 0).all())
print("dx ok", np.array_equal(aux[0, :, 16:24].view(np.float32), dx[0:8].T), aux[0, 0, 16:24].view(np.float32), dx[0:8, 0])
