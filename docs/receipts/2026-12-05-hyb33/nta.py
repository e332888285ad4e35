"""Does the head's stream evict the dense weights from L3? Stream a 540 MB array (one read a
line, prefetch 4 KB ahead, locality 0 = prefetchnta or 2 = prefetcht1), then time the dense
products of one token (qkvz-like 3x26.9 MB + 20.1 + 3x8.9 + 8.9 MB, crew as the tree decides)."""
import os, sys, time
import numpy as np
import kernels; kernels.init()
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from kernels import kquant_cpu
from bench.q8_kernels import q8_matrix

def mk(loc):
    @intrinsic
    def pf(typingctx, arr, i):
        sig = types.void(arr, i)
        def codegen(context, builder, signature, args):
            a = context.make_array(signature.args[0])(context, builder, args[0])
            p = builder.gep(a.data, [args[1]])
            i8p = ir.IntType(8).as_pointer(); I32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, I32, I32, I32]), "llvm.prefetch.p0i8")
            builder.call(fn, [builder.bitcast(p, i8p), ir.Constant(I32, 0), ir.Constant(I32, loc), ir.Constant(I32, 1)])
            return context.get_dummy_value()
        return sig, codegen
    @njit(nogil=True)
    def stream(a):
        s = 0
        n = a.shape[0]
        for i in range(0, n - 4096, 64):
            pf(a, i + 4096)
            s += a[i]
        return s
    return stream
st = {0: mk(0), 2: mk(2)}
rng = np.random.default_rng(0)
H = np.frombuffer(np.random.default_rng(1).bytes(540 << 20), np.uint8).copy()
shapes = [(12352, 2048)] * 3 + [(9216, 2048)] + [(2048, 4096)] * 4
Ws = [q8_matrix(rng, n, k) for n, k in shapes]
xs = [rng.standard_normal((1, k)).astype(np.float32) for n, k in shapes]
for f in st.values(): f(H)
print("load", os.getloadavg(), "dense MB", sum(w.nbytes for w in Ws) / 1e6, flush=True)
res = {0: [], 2: [], "none": []}
hs = {0: [], 2: []}
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
for r in range(reps):
    for loc in (0, 2, "none"):
        if loc != "none":
            t = time.perf_counter(); st[loc](H); hs[loc].append(time.perf_counter() - t)
        t = time.perf_counter()
        for W, x in zip(Ws, xs):
            kquant_cpu.q80_matmul(x, W)
        res[loc].append(time.perf_counter() - t)
for loc, ts in res.items():
    ts = np.array(ts)
    extra = f"; stream 540 MB min {min(hs[loc])*1e3:.1f} ms median {np.median(hs[loc])*1e3:.1f}" if loc in hs else ""
    print(f"after {'prefetchnta' if loc == 0 else 'prefetcht1' if loc == 2 else 'no'} stream: dense min {ts.min()*1e3:.2f} q1 {np.quantile(ts,.25)*1e3:.2f} median {np.median(ts)*1e3:.2f} ms{extra}", flush=True)
print("load", os.getloadavg())
