"""Probe: CUDA graphs vs eager, invariant vs plain GEMMs, decode rounds of B rows (llama3-8b shape).

Run from bench/: python3 _probe.py (one H200; receipt docs/receipts/2026-11-29-gpu-bench/probe.txt)."""
import sys, os, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np, cupy as cp
import gpu_bench as G
from kernels import matmul_cuda
from server.shapes.spec import SHAPES
spec = SHAPES["llama3-8b"]
hf = G.hf_model(spec, 0); model = G.our_model(spec, hf); del hf
P = 16
for B in (16, 64):
    kv = G.kv_store(spec, B, 1024, P)
    kv.K.view(cp.uint16)[...] = 0; kv.V.view(cp.uint16)[...] = 0
    tables = [tuple(range(s * 64, (s + 1) * 64)) for s in range(B)]
    for inv in (True, False):
        matmul_cuda.INVARIANT = inv
        for graphs in (False, True):
            model.graphs.enabled = graphs; model.graphs.graphs.clear()
            ch = [(tables[s], P, 512, (5,), True) for s in range(B)]
            model.forward(ch, kv); cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for i in range(10):
                lg = model.forward(ch, kv); int(cp.argmax(lg[0]))
            cp.cuda.Device().synchronize()
            print(f"B={B} invariant={inv} graphs={graphs}: {(time.perf_counter()-t0)*100:.2f} ms/step", flush=True)
    del kv
