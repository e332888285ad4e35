"""|tile - exact| for Q4_K / Q6_K products: the definition's float32 result against the float64
value of x's quantized copy times the dequantized weights (not rounded)."""
import sys, numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu as kq
from tools.refs import kquants_numpy as kn
import gguf
rng = np.random.default_rng(7)
for kind in ("Q4_K", "Q6_K"):
    N, K, M = 768, 4096, 64
    w = rng.standard_normal((N, K)).astype(np.float32) * 0.05
    data = (kn.quantize_q4_k if kind == "Q4_K" else kn.quantize_q6_k)(w)
    data = np.ascontiguousarray(data.reshape(N, -1))
    wd = gguf.quants.dequantize(data, getattr(gguf.GGMLQuantizationType, kind)).astype(np.float64).reshape(N, K)
    x = rng.standard_normal((M, K)).astype(np.float32)
    q, dx, gs = kq.quantize(x)
    xq = (q.astype(np.float64).reshape(M, -1, 256) * dx.astype(np.float64)[:, :, None]).reshape(M, K)
    exact = xq @ wd.T
    got = kq.matmul(x, kind, data).astype(np.float64)
    err = np.abs(got - exact)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    print(f"{kind}: mean |err| {err.mean():.3e}  mean err/ulp {np.mean(err/ulp):.3f}  max err/ulp {np.max(err/ulp):.2f}  "
          f"rms rel {np.sqrt(np.mean((err/np.abs(exact))**2)):.3e}")
