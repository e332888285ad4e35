"""Run mla_cpu.round_attend on 54 cases, save the outputs: python mla_bytes.py OUT.npz TREE
(run at two trees, compare the .npz files byte for byte)."""
import sys, numpy as np, kernels
kernels.init()
sys.path.insert(0, sys.argv[2] + "/tests/model")
from kernels import mla_cpu
import test_mla_cpu as t
outs = {}
for shape in t.SHAPES:
    k = t.case(*shape)
    for T, start in ((37, 0), (3, 700), (1, 1500)):
        q, ckv = t.inputs(k, T)
        P = 16
        pages = (start + T) // P + 2
        table = np.random.default_rng(1).permutation(pages)
        rows = t.rows_of([(table, P, start, T)])
        for quant in (False, True):
            if quant and (k.N % 32 or k.C % 32):
                continue
            from kernels import blocks
            w = (k.w_ukt, k.w_uv)
            if quant:
                import gguf
                w = tuple(gguf.quants.quantize(x.reshape(-1, x.shape[-1]), gguf.GGMLQuantizationType.Q8_0).reshape(x.shape[0], x.shape[1], -1) for x in w)
            for par in (False, True):
                for sp in ((False, True) if par else (False,)):
                    pool = np.zeros((pages, P, 1, k.C + k.R), np.float32)
                    try:
                        o = mla_cpu.round_attend(q, ckv, k.norm, 1e-6, *w, k.N, pool, rows, k.inv, k.scale, parallel=par, split=sp)
                    except Exception as e:
                        o = np.array([repr(e)])
                    outs[f"{shape}-{T}-{start}-{quant}-{par}-{sp}"] = o
np.savez(sys.argv[1], **outs)
print(len(outs))
