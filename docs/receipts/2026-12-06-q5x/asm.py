import sys, re, collections
import kernels; kernels.init()
import numpy as np
from numba import njit
from kernels import kquant_cpu as KQ
kind = sys.argv[1]; R, C = int(sys.argv[2]), int(sys.argv[3])
t = KQ._make_tile_q80(R, C, True, kind)
@njit(boundscheck=False, nogil=True)
def f(data, n, q, i, dx, gs):
    return t(data, n, q, i, dx, gs)
rng = np.random.default_rng(0)
bb = KQ.Q80_BLOCK[kind]
w = rng.integers(0, 256, (8, 64 * bb), dtype=np.uint8); x = rng.standard_normal((8, 2048)).astype(np.float32)
q, dx = KQ.quantize_q80(x); gs = np.zeros((8, 1, 16), np.int32)
f(w, 0, q, 0, dx, gs)
asm = list(f.inspect_asm().values())[0]
blocks, cur = [], []
for ln in asm.splitlines():
    if re.match(r"^\.LBB", ln) or re.match(r"^\S.*:$", ln):
        blocks.append(cur); cur = []
    elif ln.strip() and not ln.strip().startswith((".", "#")):
        cur.append(ln.strip())
blocks.append(cur)
best = max(blocks, key=lambda b: sum(1 for l in b if l.startswith("vpdpbusd")))
cnt = collections.Counter(l.split()[0] for l in best)
print(kind, R, C, len(best), "instrs", len(best) / (R * C), "an element-pair")
for k, v in cnt.most_common(): print(f"  {k:16s} {v:4d} {v/(R*C):5.2f}")
if len(sys.argv) > 4: print("\n".join(best))
