import sys, time
from pathlib import Path
import server  # noqa
import numpy as np
from bench.moe_cpu import Foldserve
f = Foldserve(Path(sys.argv[1]), 2)
f.prefill(512)
import numba
from kernels import blocks_cpu, halves
print("layer", numba.threading_layer(), "threads", numba.get_num_threads())
rng = np.random.default_rng(0)
w = rng.standard_normal((128, 2048)).astype(np.float32).view(np.uint8).reshape(128, -1)
x = rng.standard_normal((512, 2048)).astype(np.float32)
def t(label):
    c, s = time.process_time(), time.perf_counter()
    for _ in range(10): blocks_cpu.matmul(x, "F32", w)
    d = time.perf_counter() - s
    print(label, f"{d/10*1e3:.2f} ms {(time.process_time()-c)/d:.2f} cores", flush=True)
t("after prefill")
halves.pair(lambda a, b: np.exp(x[a:b]), 256, 512)
t("after a pair")
