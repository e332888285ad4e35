import sys, os
sys.path.insert(0, os.getcwd())
import numpy as np, cupy as cp
from bench.cudatime import graph_ms, cuda_ms
from bench.split_attention import model_of
from kernels import matmul_cuda
from kernels.common_cuda import as_bf16
from server.engine.spec import SHAPES
spec = SHAPES["llama3-8b"]
model = model_of(spec)
x = as_bf16(cp.asarray(np.random.default_rng(3).standard_normal((1, spec.d_ff)).astype(np.float32)))
L0 = model.w.layers[0]
shapes = [(spec.d_model, L0.wqkv), (spec.head_dim * spec.n_heads, L0.wo), (spec.d_model, L0.wgu), (spec.d_ff, L0.wdown)]
xs = [cp.ascontiguousarray(x[:, :k]) for k, _ in shapes]
for rep in range(2):
    ms = graph_ms(lambda: [matmul_cuda.cuda(a, w) for a, (_, w) in zip(xs, shapes)], reps=10, inner=2)
    print("stages-like layer GEMMs graph_ms", ms, "x32 =", ms * 32, flush=True)
    for (k, w), a in zip(shapes, xs):
        print("  ", w.shape, graph_ms(lambda: matmul_cuda.cuda(a, w), reps=10, inner=1), flush=True)
    print("  head", graph_ms(lambda: matmul_cuda.cuda(xs[0], model.w.lm_head), reps=5, inner=1), flush=True)
