import numpy as np, time, sys, json, numba
sys.path.insert(0, __import__('os').path.join(__import__('os').path.dirname(__import__('os').path.abspath(__file__)), '../../..'))
from kernels import blocks_cpu as B, matmul as MM
from gguf.quants import quantize, dequantize
from gguf import GGMLQuantizationType as T
numba.set_num_threads(1)
rng = np.random.default_rng(0)
res = {}
def cpu_min(f, reps):
    best = 1e9
    for _ in range(reps):
        c = time.process_time(); f(); best = min(best, time.process_time() - c)
    return best
for N, K in [(3072, 576), (576, 1536)]:
    W = rng.standard_normal((N, K)).astype(np.float32) * 0.02
    data = quantize(W, T.Q4_1).reshape(N, -1)
    Wf = dequantize(data, T.Q4_1).reshape(N, K)
    WT = np.ascontiguousarray(Wf.T)
    for M in (1, 8):
        x = rng.standard_normal((M, K)).astype(np.float32)
        B.matmul(x, 'Q4_1', data)
        r = {
          "numba_blocks_ms": cpu_min(lambda: B.matmul(x, 'Q4_1', data), 20) * 1e3,
          "numpy_fp32_4row_tiles_ms": cpu_min(lambda: MM.ref(x, WT), 20) * 1e3,
          "numpy_dequant_each_call_then_matmul_ms": cpu_min(lambda: x @ dequantize(data, T.Q4_1).reshape(N, K).T, 5) * 1e3,
        }
        res[f"{N}x{K} M={M}"] = r
        print(N, K, M, json.dumps({k: round(v, 3) for k, v in r.items()}), flush=True)
