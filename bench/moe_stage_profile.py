"""Where a MoE decode / prefill step goes, in the engine on a GGUF: kernels.ops' calls and the
MoE op's parts (router, route, grouping, gate|up and down products, swiglu, combine) timed by
wrappers, per step, and the rest of the step (the family's Python between the ops).

    PYTHONPATH=$PWD python -m bench.moe_stage_profile FILE.gguf [--threads 2] [--steps 8]
        [--prefill 512] [--warm 1] [--no-b8]

Times are inclusive (ops.moe contains its parts; "moe: ..." rows are inside "ops.moe"); "other
(Python)" is the step's wall time less the outermost ops calls. The wrappers cost ~1 us a call.
"cores" = the process's CPU time (all threads) over the wall time inside each row: 1.00 = serial.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import server  # noqa: F401,I001  (first: OPENBLAS_NUM_THREADS=1 before numpy loads its BLAS, as serve runs)
import numpy as np


def instrument(vocab: int, ops):
    """Timers around `ops`' calls (the engine's backend: kernels.ops.backend) and the MoE
    op's parts."""
    import kernels
    kernels.init()                 # before the numba kernels (kernels/__init__.py)
    from kernels import moe as M
    from kernels import moe_cpu, swiglu
    acc = defaultdict(float)
    cpu = defaultdict(float)       # the process's CPU seconds inside each wrapper (all threads)
    calls = defaultdict(int)
    depth = [0]
    outer = [0.0, 0.0]             # wall, CPU seconds inside the outermost calls

    def wrap(mod, name, label=None):
        inner = getattr(mod, name)

        def timed(*a, **k):
            lab = label(a) if label else name
            depth[0] += 1
            c = time.process_time()
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                dt = time.perf_counter() - t
                dc = time.process_time() - c
                cpu[lab] += dc
                depth[0] -= 1
                acc[lab] += dt
                calls[lab] += 1
                if depth[0] == 0:
                    outer[0] += dt
                    outer[1] += dc
        setattr(mod, name, timed)

    def by_weight(idx, what):
        def label(a):
            w = a[idx]
            rows = getattr(w, "rows", None)
            kind = getattr(w, "kind", None) or ("+".join(p.kind for p in w) if isinstance(w, list) else "f32")
            if rows is None and getattr(w, "ndim", 0) == 2:     # a float32 matrix [in, out]
                return f"{what} (f32, {w.shape[0]}x{w.shape[1]})"
            if rows == vocab:
                return f"head ({kind})"
            return f"{what} ({kind}, {rows} rows)"
        return label
    for n in ("embed", "add_norm", "qkv_attend", "moe",
              # gpt-oss (moe_biased, sinks); the recurrent families (gdn_round, its chunk, the
              # full layers' partial rope), where the backend has them
              "moe_biased", "qkv_attend_sinks", "gdn_round", "gdn_chunk", "rms_norm",
              "add_rms_norm", "sigmoid", "rope_part", "apply_rope",
              # glm5next / kimilinear (KDA, the DSA's sparse latent attention, mHC, the
              # dense MLPs' gate|up), the latent attention
              "kda_round", "dsa_attend", "mhc_pre", "mhc_post", "gate_up_silu", "mla_attend",
              # inside qkv_attend where the family has no fused form (Qwen3's q/k norms,
              # GLM's partial RoPE): the KV write and attention.ref's bytes
              "write_and_attend", "swiglu_rows"):
        if hasattr(ops, n):
            wrap(ops, n, lambda a, n=n: f"ops.{n}")
    wrap(ops, "norm_linear", by_weight(4, "ops.norm_linear"))
    wrap(ops, "linear", by_weight(1, "ops.linear"))
    for n in ("route", "groups", "combine"):
        wrap(M, n, lambda a, n=n: f"moe: {n}")
    wrap(moe_cpu, "grouped_matmul", lambda a: f"moe: grouped {a[1].kind} N={a[1].rows}")
    for n in ("router_logits", "route_group", "combine_grouped", "gate_up_halves"):   # the numba MoE glue
        if hasattr(moe_cpu, n):
            wrap(moe_cpu, n, lambda a, n=n: f"moe: {n}")
    from kernels import kquant_cpu      # gate | up on x quantized once (moe_cpu.gate_up_halves)
    if hasattr(kquant_cpu, "grouped_quantized"):
        wrap(kquant_cpu, "grouped_quantized", lambda a: f"moe: grouped {a[3]} N={a[4].shape[1]} (x quantized)")
    wrap(kquant_cpu, "quantize", lambda a: "kquant: quantize x")
    wrap(swiglu, "ref", lambda a: "swiglu")
    from kernels import attention_cpu   # attention.ref's operations over a long chunk
    if hasattr(attention_cpu, "ref_chunk"):
        wrap(attention_cpu, "ref_chunk", lambda a: "attention: ref_chunk (numba)")
        for n in ("ref_gather", "ref_gather_span", "ref_scores", "ref_values", "ref_attend"):
            if hasattr(attention_cpu, n):
                wrap(attention_cpu, n, lambda a, n=n: f"attention: {n}")
    # the sparse latent attention's parts (kernels/dsa_cpu.py; inside "ops.dsa_attend")
    from kernels import dsa, mla
    try:
        from kernels import dsa_cpu
    except ImportError:
        dsa_cpu = None
    if dsa_cpu is not None:
        wrap(dsa_cpu, "index_query", lambda a: "dsa: index_query (q heads, w)")
        wrap(dsa_cpu, "_choose", lambda a: "dsa: choose (pool scores, top pools)")
        wrap(dsa_cpu, "_attend_par", lambda a: "dsa: attend (W_UK, rows, softmax, W_UV)")
        wrap(dsa_cpu, "_attend_ser", lambda a: "dsa: attend (W_UK, rows, softmax, W_UV)")
    wrap(dsa, "index_keys", lambda a: "dsa: index_keys (k, gate)")
    wrap(dsa, "write", lambda a: "dsa: write (pooled keys, ring)")
    wrap(mla, "write", lambda a: "dsa: write (latent rows)")
    return acc, cpu, calls, outer


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--warm", type=int, default=1, help="untimed prefills first (numba compiles)")
    ap.add_argument("--no-b8", action="store_true", help="decode at batch 1 only")
    a = ap.parse_args(argv)
    from bench.moe_cpu import Foldserve
    from server.ranks.steps import Chunk, RoundStep
    f = Foldserve(Path(a.gguf), a.threads)
    acc, cpu, calls, outer = instrument(f.spec.vocab, f.eng.model.ops)

    def report(title, dt, n, tc=None):
        cores = f", this process on {tc / dt:.2f} cores" if tc is not None else ""
        print(f"{title}: {dt / n * 1e3:.1f} ms a step ({n} steps{cores})", flush=True)
        for k, v in sorted(acc.items(), key=lambda kv: -kv[1]):
            print(f"  {k:44s} {v / n * 1e3:9.2f} ms  {v / dt:6.1%}  ({calls[k] // n} calls, "
                  f"{cpu[k] / max(v, 1e-9):.2f} cores)", flush=True)
        other = dt - outer[0]
        oc = f", {(tc - outer[1]) / max(other, 1e-9):.2f} cores" if tc is not None else ""
        print(f"  {'other (Python between the ops)':44s} {other / n * 1e3:9.2f} ms  "
              f"{other / dt:6.1%}{oc}", flush=True)

    for b in ((1,) if a.no_b8 else (1, 8)):
        for s in range(b):
            f._begin(s)
        lg = f.eng.apply(RoundStep(tuple(Chunk(s, 0, (1 + s,)) for s in range(b))))
        nxt = [int(np.argmax(lg[s])) for s in range(b)]
        acc.clear(), cpu.clear(), calls.clear()
        outer[0] = outer[1] = 0.0
        t, c = time.perf_counter(), time.process_time()
        for k in range(a.steps):
            lg = f.eng.apply(RoundStep(tuple(Chunk(s, 1 + k, (nxt[s],)) for s in range(b))))
            nxt = [int(np.argmax(lg[s])) for s in range(b)]
        report(f"decode b{b}", time.perf_counter() - t, a.steps, time.process_time() - c)
        f._end(b)
    toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, a.prefill))
    for _ in range(a.warm):         # untimed: the prefill-only kernels' numba compiles
        f._begin(0)
        f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
        f._end(1)
    f._begin(0)
    acc.clear(), cpu.clear(), calls.clear()
    outer[0] = outer[1] = 0.0
    t, c = time.perf_counter(), time.process_time()
    f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
    report(f"prefill {a.prefill}", time.perf_counter() - t, 1, time.process_time() - c)
    f._end(1)
    import os
    print("load average", os.getloadavg(), flush=True)
    with open("/proc/self/status") as st:      # resident memory: the file's touched pages + copies
        print(" ".join(ln.split(":")[0] + " " + ln.split(":")[1].strip() for ln in st
                       if ln.startswith(("VmRSS", "VmHWM", "RssAnon", "RssFile"))), flush=True)


if __name__ == "__main__":
    main()
