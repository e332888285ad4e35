import kernels; kernels.init()
import sys, time, numpy as np, numba
from kernels import kquant_cpu as KQ, moe_cpu, qmatmul
from kernels.blocks import Blocks, ExpertStack
numba.set_num_threads(int(sys.argv[1]))
reps = int(sys.argv[2])
rng = np.random.default_rng(0)
def rows(kind, n, k):
    bb = {"Q5_0": 22, "Q8_0": 34}[kind]
    d = rng.integers(0, 256, (n, k // 32, bb), dtype=np.uint8)
    d[:, :, 0:2] = rng.uniform(1e-3, 1e-2, (n, k // 32, 1)).astype(np.float16).view(np.uint8)
    return d.reshape(n, -1)
E, N, K = 128, 4096, 1408
st = {k: ExpertStack([Blocks(k, N, K, rows(k, N, K)) for _ in range(E)]) for k in ("Q5_0", "Q8_0")}
dense = {k: Blocks(k, 4096, 10944, rows(k, 4096, 10944)) for k in ("Q5_0", "Q8_0")}
experts = np.array([3, 17, 40, 41, 77, 90, 100, 127], np.int64); offs = np.arange(9, dtype=np.int64)
x = rng.standard_normal((8, K)).astype(np.float32); xd = rng.standard_normal((1, 10944)).astype(np.float32)
cases = []
for k in ("Q5_0", "Q8_0"):
    for q80 in (True, False):
        cases.append((f"{k} {'q80' if q80 else 'float'} down b1 (8 experts)", lambda k=k, q80=q80: moe_cpu.grouped_matmul(x, st[k], experts, offs, q8=True, q80=q80)))
        cases.append((f"{k} {'q80' if q80 else 'float'} dense 4096x10944 b1", lambda k=k, q80=q80: qmatmul.cpu(xd, dense[k], q80=q80)))
for name, f in cases: f()
res = {n: [] for n, _ in cases}
for _ in range(reps):
    for name, f in cases:
        t = time.perf_counter(); f(); res[name].append(time.perf_counter() - t)
for name, _ in cases:
    t = min(res[name])
    print(f"{name:40s} {t*1e6:8.0f} us", flush=True)
