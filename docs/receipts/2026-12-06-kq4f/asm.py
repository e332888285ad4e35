import sys, re, collections
import kernels; kernels.init()
import numpy as np
from numba import njit
from kernels import kquant_cpu as KQ
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
kind = sys.argv[1]; R, C = int(sys.argv[2]), int(sys.argv[3])
t = KQ._make_tile(kind, R, C, True, len(sys.argv) > 4 and sys.argv[4] == "p")
@njit(boundscheck=False, nogil=True)
def f(data, n, q, i, dx, gs):
    return t(data, n, q, i, dx, gs)
rng = np.random.default_rng(0)
w = random_rows(rng, kind, 8, 2048); x = rng.standard_normal((8, 2048)).astype(np.float32)
q, dx, gs = KQ.quantize(x)
f(w, 0, q, 0, dx, gs)
asm = list(f.inspect_asm().values())[0]
blocks, cur = [], []
for ln in asm.splitlines():
    if re.match(r"^\.LBB", ln) or re.match(r"^\S.*:$", ln):
        blocks.append(cur); cur = []
    elif ln.strip() and not ln.strip().startswith((".", "#")):
        cur.append(ln.strip())
blocks.append(cur)
best = max(blocks, key=lambda b: sum(1 for l in b if l.startswith("vpmaddubsw")))
cnt = collections.Counter(l.split()[0] for l in best)
print(len(best), "instrs", len(best) / (R * C), "a pair")
for k, v in cnt.most_common(): print(f"  {k:16s} {v:4d} {v/(R*C):5.2f}")
if len(sys.argv) > 5: print("\n".join(best))
