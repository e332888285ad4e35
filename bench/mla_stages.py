"""A batch-1 decode step of the deepseek2 family (GLM-4.7-Flash-shaped file) split into
exclusive stages, each beside the bytes it reads and the floor those bytes set.

    PYTHONPATH=$PWD python -m bench.mla_stages [FILE.gguf] [--threads 2] [--steps 32]
        [--depth 0] [--bw] [--llama-bench PATH]

Every kernels.ops call the family makes and the parts inside the MoE and latent-attention ops
(router, route, the experts' products, SwiGLU, combine; latent rows, RoPE, the kernel) are
wrapped by timers that count **exclusive** time (a call's time less the wrapped calls inside
it), so the rows add up to the step: "Python" is the step's wall time less every wrapped
call. Products are named by their role in the layer (q_a, q_b, kv_a, o, the dense and shared
MLPs, the head) from their shapes. Bytes: the weight bytes each stage reads a step (a
product's matrix, the 4 routed experts' gate|up and down, kv_b's halves); `--bw` measures
the process's read bandwidth first (bench/q8_kernels' stream: numpy's max over 2 GiB, a
thread a half) and prints each stage's floor (bytes / bw) and the whole step's.
`--llama-bench`: llama-bench's tg (-p 0 -n 32 -r 3 [-d depth]) on the same file and threads,
in ms a token, after ours. The wrappers cost ~1-2 us a call (~100 calls a step).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import server  # noqa: F401,I001  (first: one OpenBLAS thread, as serve runs)
import numpy as np

ROLES = {(768, 2048): "q_a", (5120, 768): "q_b", (576, 2048): "kv_a", (1344, 2048): "q_a|kv_a",
         (2048, 5120): "o", (20480, 2048): "dense gate|up", (2048, 10240): "dense down",
         (3072, 2048): "shared gate|up", (2048, 1536): "shared down", (64, 2048): "router"}


def _nbytes(w) -> int:
    d = getattr(w, "data", None)
    if d is not None and hasattr(d, "nbytes"):
        return int(d.nbytes)
    if isinstance(w, (list, tuple)):
        return sum(_nbytes(p) for p in w)
    return int(getattr(w, "nbytes", 0))


class Stages:
    """Exclusive timers over an ops object and module functions."""

    def __init__(self, vocab: int):
        self.vocab = vocab
        self.acc, self.calls, self.bytes = defaultdict(float), defaultdict(int), defaultdict(int)
        self.stack = []          # child time of the open calls
        self.total = 0.0         # outermost calls' time

    def reset(self):
        self.acc.clear(), self.calls.clear(), self.bytes.clear()
        self.stack.clear()
        self.total = 0.0

    def wrap(self, obj, name, label, nbytes=None):
        inner = getattr(obj, name, None)
        if inner is None:            # an older tree without this function
            return
        me = self

        def timed(*a, **k):
            me.stack.append(0.0)
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                dt = time.perf_counter() - t
                child = me.stack.pop()
                lab = label(a, k) if callable(label) else label
                me.acc[lab] += dt - child
                me.calls[lab] += 1
                if nbytes is not None:
                    me.bytes[lab] += nbytes(a, k)
                if me.stack:
                    me.stack[-1] += dt
                else:
                    me.total += dt
        setattr(obj, name, timed)

    def product(self, w):
        rows, cols = getattr(w, "rows", None), getattr(w, "cols", None)
        if rows == self.vocab:
            return "head"
        role = ROLES.get((rows, cols))
        return role or f"linear {rows}x{cols}"


def instrument(ops, vocab: int) -> Stages:
    import kernels
    kernels.init()
    from kernels import mla, mla_cpu, moe_cpu, swiglu
    st = Stages(vocab)
    st.wrap(ops, "linear", lambda a, k: st.product(a[1]), lambda a, k: _nbytes(a[1]))
    for n in ("add_norm", "rms_norm", "add_rms_norm", "embed", "gate_up_silu", "norm_linear",
              "moe", "mla_attend"):
        st.wrap(ops, n, f"{n} (rest)" if n in ("moe", "mla_attend", "gate_up_silu",
                                                  "norm_linear") else n)
    st.wrap(moe_cpu, "router_logits", "moe: router", lambda a, k: _nbytes(a[1]))
    st.wrap(moe_cpu, "route_group", "moe: route+group")

    def gu_bytes(a, k):
        g, u, experts = a[2], a[3], a[4]
        return len(experts) * (g.data[0].nbytes + u.data[0].nbytes)
    st.wrap(moe_cpu, "gate_up_halves", "moe: experts gate|up", gu_bytes)
    st.wrap(moe_cpu, "grouped_matmul", "moe: experts down",
            lambda a, k: len(a[2]) * a[1].data[0].nbytes)
    st.wrap(moe_cpu, "combine_grouped", "moe: combine")
    st.wrap(swiglu, "limited", "swiglu")
    st.wrap(mla_cpu, "_prep", "mla: prep (latent rows written, q split, rope)")
    st.wrap(mla, "latent_rows", "mla: latent rows (norm, rope)")
    st.wrap(mla, "write", "mla: write rows")
    st.wrap(mla, "rope_interleaved", "mla: q rope")
    crew = mla_cpu._crew()
    # a parallel round not split (decode at short depth) runs on the crew; split rounds (deep
    # contexts) and serial ones stay inside "mla_attend (rest)"
    st.wrap(crew, "run", "mla: kernel (absorb, scores, values, expand)",
            lambda a, k: a[1][7].nbytes + a[1][8].nbytes)
    return st


def llama_tg(path: str, f: Path, threads: int, depth: int) -> dict:
    args = [path, "-m", str(f), "-t", str(threads), "-p", "0", "-n", "32", "-r", "3", "-o", "json"]
    if depth:
        args += ["-d", str(depth)]
    r = subprocess.run(args, check=True, capture_output=True, text=True)
    row = json.loads(r.stdout)[0]
    return {"tok_s": row["avg_ts"], "ms": 1e3 / row["avg_ts"], "sd_ts": row.get("stddev_ts")}


def bandwidth(threads: int, reps: int = 5) -> float:
    from concurrent.futures import ThreadPoolExecutor
    v = np.ones(2 << 30, np.uint8)
    parts = np.array_split(v, threads)
    pool = ThreadPoolExecutor(threads)
    list(pool.map(np.max, parts))
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        list(pool.map(np.max, parts))
        ts.append(time.perf_counter() - t)
    pool.shutdown()
    return v.nbytes / float(np.median(ts)) / 1e9


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf", nargs="?", default="/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--bw", action="store_true")
    ap.add_argument("--llama-bench", default=None)
    a = ap.parse_args(argv)
    from bench.mla_cpu import Deep
    from server.ranks.steps import Chunk, RoundStep
    f = Path(a.gguf)
    bw = bandwidth(a.threads) if a.bw else None
    eng = Deep(f, a.threads, max(a.depth, 64))
    st = instrument(eng.eng.model.ops, eng.spec.vocab)
    eng._begin(0)
    toks = [int(t) for t in np.random.default_rng(a.depth).integers(0, eng.spec.vocab, max(a.depth, 1))]
    for s in range(0, len(toks), 512):
        lg = eng.eng.apply(RoundStep((Chunk(0, s, tuple(toks[s:s + 512]), True),)))
    nxt = int(np.argmax(lg[0]))
    for k in range(2):                          # warm
        lg = eng.eng.apply(RoundStep((Chunk(0, len(toks) + k, (nxt,)),)))
        nxt = int(np.argmax(lg[0]))
    st.reset()
    steps = []
    c0 = time.process_time()
    t0 = time.perf_counter()
    for k in range(a.steps):
        t = time.perf_counter()
        lg = eng.eng.apply(RoundStep((Chunk(0, len(toks) + 2 + k, (nxt,)),)))
        nxt = int(np.argmax(lg[0]))
        steps.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    cores = (time.process_time() - c0) / wall
    eng._end(1)
    n = a.steps
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"decode b1 at depth {len(toks)}: {wall / n * 1e3:.2f} ms a step mean, "
          f"{np.median(steps) * 1e3:.2f} median, {min(steps) * 1e3:.2f} best ({n} steps, "
          f"{cores:.2f} cores); load {load}" + (f"; bw {bw:.1f} GB/s" if bw else ""))
    tb = sum(st.bytes.values())
    rows = sorted(st.acc.items(), key=lambda kv: -kv[1])
    print(f"  {'stage':46s} {'ms/step':>8s} {'share':>6s} {'calls':>5s} {'MB':>7s} {'GB/s':>6s}"
          + (f" {'floor ms':>8s}" if bw else ""))
    for k, v in rows:
        mb = st.bytes.get(k, 0) / n / 1e6
        ms = v / n * 1e3
        print(f"  {k:46s} {ms:8.3f} {v / wall:6.1%} {st.calls[k] // n:5d} {mb:7.1f} "
              + (f"{mb / ms:6.1f}" if mb else "      ")
              + (f" {mb / bw:8.3f}" if bw and mb else ""))
    py = wall - st.total
    print(f"  {'Python between the ops (and argmax)':46s} {py / n * 1e3:8.3f} {py / wall:6.1%}")
    print(f"  weight bytes a step {tb / n / 1e6:.1f} MB"
          + (f": floor {tb / n / 1e6 / bw:.2f} ms at {bw:.1f} GB/s "
             f"({bw * 1e3 / (tb / n / 1e6):.1f} tok/s)" if bw else ""))
    if a.llama_bench:
        r = llama_tg(a.llama_bench, f, a.threads, a.depth)
        print(f"llama-bench tg (-d {a.depth}): {r['tok_s']:.2f} tok/s = {r['ms']:.2f} ms a token "
              f"(sd {r['sd_ts']}); load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
