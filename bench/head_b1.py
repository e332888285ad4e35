"""The LM head at batch 1 on the CPU (issue 33: Qwen3.5-35B-A3B's Q8_0 head, 248,320 x 2048,
540 MB) against what the machine streams, in one process, the variants interleaved rep by rep:

  bw1 / bw2    numpy's max over the head's bytes (uint8), on 1 thread / 2 threads (a half each):
               the read rate a plain SIMD stream gets from the same memory
  q80 1t / 2t  kquant_cpu.q80_matmul (x quantized to q8_0, Q8_0_DEF) on the caller alone / as a
               crew round of 2 (the served form: the head is past SOLO_BYTES)
  f32 2t       blocks_vec.matmul (float32 x), crew of 2

each over the same bytes held three (with --file, four) ways:
  gguf   the GGUF's own map (server/engine/weights/gguf_file: the pages the loader serves from)
  file   a copy-on-write map of a file (np.memmap mode "c"), as server/engine/weights/gguf_file
         maps a GGUF: page-cache pages, 4 KiB PTEs
  anon   a private anonymous map (no THP advice; this host's THP is "madvise")
  huge   a private anonymous map with madvise(MADV_HUGEPAGE), touched: 2 MiB pages where the
         kernel has them (AnonHugePages in /proc/self/smaps_rollup is printed)

Prints ms (median, best) and GB/s of the head's bytes a variant. --file F takes the head
(output.weight) from a GGUF instead of random blocks.

    PYTHONPATH=$PWD python -m bench.head_b1 [--reps 9] [--rows 248320] [--what file,anon,huge]
"""
from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time

import numpy as np


def smaps_huge() -> str:
    try:
        with open("/proc/self/smaps_rollup") as f:
            return " ".join(ln.split()[0] + ln.split()[1] for ln in f
                            if ln.startswith(("AnonHugePages", "FilePmdMapped")))
    except OSError:
        return "?"


def anon_copy(src: np.ndarray, huge: bool) -> np.ndarray:
    m = mmap.mmap(-1, src.nbytes + (2 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    a = np.frombuffer(m, np.uint8)
    off = (-a.ctypes.data) % (2 << 20)          # 2 MiB aligned start
    a = a[off:off + src.nbytes].reshape(src.shape)
    a[...] = src
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--rows", type=int, default=248320)
    ap.add_argument("--cols", type=int, default=2048)
    ap.add_argument("--what", default="file,anon,huge")
    ap.add_argument("--variants", default="bw1,bw2,q80_1t,q80_2t,f32_2t")
    ap.add_argument("--file", default=None)
    a = ap.parse_args()
    import kernels
    kernels.init()
    import numba
    from concurrent.futures import ThreadPoolExecutor

    from kernels import blocks_vec, kquant_cpu
    rng = np.random.default_rng(0)
    if a.file:
        from server.engine.weights.gguf_file import GGUFFile
        g = GGUFFile(a.file)
        t = next(t for t in g.tensors if t.name == "output.weight")
        gguf_view = t.data.reshape(t.shape[0], -1)
        src = np.array(gguf_view)
    else:
        from bench.q8_kernels import q8_matrix
        src = q8_matrix(rng, a.rows, a.cols)
    K = src.shape[1] // 34 * 32
    print(f"head {src.shape[0]} x {K} Q8_0, {src.nbytes / 1e6:.0f} MB; VNNI {kquant_cpu.VNNI}; "
          f"SOLO_BYTES {kquant_cpu.SOLO_BYTES}; load {os.getloadavg()}", flush=True)
    mats = {}
    what = a.what.split(",")
    if a.file and "gguf" in what:
        mats["gguf"] = gguf_view                           # the GGUF's own map, as the loader's
        np.max(gguf_view)
    if "file" in what:
        fd, path = tempfile.mkstemp(dir=os.environ.get("HEAD_B1_DIR", "/tmp"), suffix=".bin")
        os.write(fd, src.tobytes())
        os.close(fd)
        mm = np.memmap(path, dtype=np.uint8, mode="c").view(np.ndarray)
        os.unlink(path)
        mats["file"] = mm.reshape(src.shape)
        np.max(mats["file"])                               # faulted in (page cache)
    if "anon" in what:
        mats["anon"] = anon_copy(src, False)
    if "huge" in what:
        mats["huge"] = anon_copy(src, True)
    del src
    print(f"smaps: {smaps_huge()}", flush=True)
    x = rng.standard_normal((1, K)).astype(np.float32)
    pool = ThreadPoolExecutor(2)

    def bw(W, n):
        parts = np.array_split(W.reshape(-1), n)
        return lambda: list(pool.map(np.max, parts)) if n > 1 else np.max(parts[0])

    def q80(W, n):
        def go():
            numba.set_num_threads(n)
            kquant_cpu.q80_matmul(x, W)
        return go

    def f32(W, n):
        def go():
            numba.set_num_threads(n)
            blocks_vec.matmul(x, "Q8_0", W)
        return go
    makers = {"bw1": lambda W: bw(W, 1), "bw2": lambda W: bw(W, 2), "q80_1t": lambda W: q80(W, 1),
              "q80_2t": lambda W: q80(W, 2), "f32_2t": lambda W: f32(W, 2), "f32_1t": lambda W: f32(W, 1)}
    # the 1-thread product runs alone only where SOLO_BYTES lets it: force it by the cut
    fns = [(mk, v, makers[v](W)) for mk, W in mats.items() for v in a.variants.split(",")]
    ts = {(mk, v): [] for mk, v, _ in fns}
    for f in fns:
        f[2]()
    solo = kquant_cpu.SOLO_BYTES
    for _ in range(a.reps):
        for mk, v, fn in fns:
            if v.endswith("_1t"):
                kquant_cpu.SOLO_BYTES = 1 << 62
            t0 = time.perf_counter()
            fn()
            ts[(mk, v)].append(time.perf_counter() - t0)
            kquant_cpu.SOLO_BYTES = solo
    nb = next(iter(mats.values())).nbytes
    for (mk, v), t in ts.items():
        m, b = float(np.median(t)), min(t)
        print(f"{mk:5s} {v:7s} {m * 1e3:7.2f} ms median {b * 1e3:7.2f} best  {nb / m / 1e9:5.1f} GB/s median "
              f"{nb / b / 1e9:5.1f} best", flush=True)
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
