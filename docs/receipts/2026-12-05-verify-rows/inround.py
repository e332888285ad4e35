"""The fused round's stages timed one by one inside the round (the default model, one thread):
one stream's chunk of 1 / 4 / 8 rows at --keys keys (40) (every row's logits) through the engine, with
Fused.run replaced by the same program run stage by stage from Python (each stage's own
numba form, member 0 of a team of 1, the round's own buffers, counters and pieces), each
stage's time summed over the layers; medians in ms. The logits are checked equal, bit for
bit, to the fused round's.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-verify-rows/inround.py [--reps 7] [--keys 40]
"""
import argparse
import os
import statistics
import time
from collections import defaultdict

import numpy as np

import kernels
kernels.init()
from kernels import attention_cpu, blocks_vec  # noqa: E402
from kernels import forward_cpu as fc  # noqa: E402
from kernels.team_cpu import WIDTH  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=7)
ap.add_argument("--keys", type=int, default=40)
a = ap.parse_args()
acc = defaultdict(float)
mode = {"staged": False}
last = {}
_run = fc.Fused.run


def staged(self, h, r, kv, scale):
    if not mode["staged"]:
        out = _run(self, h, r, kv, scale)
        last["fused"] = None if out is None else out.copy()
        return out
    t_all = time.perf_counter()
    cos, sin, spans, starts, tables, page_rows = r.cpu
    sel = np.asarray(r.sel, np.int64)
    h = np.ascontiguousarray(h, np.float32)
    T, D = h.shape
    w = self.w
    S, nq, nkv, hd, ff = sel.shape[0], w.nq, w.nkv, w.hd, w.ff
    f32 = np.float32
    b = fc.Bufs(h, np.empty((T, D), f32), np.empty((T, D), f32), np.empty((T, D), f32),
                np.empty((T, (nq + 2 * nkv) * hd), f32), np.empty((T, nq, hd), f32),
                np.empty((T, 2 * ff), f32), np.empty((T, ff), f32),
                np.empty((T, D // 32), f32), np.empty((T, nq * hd // 32), f32),
                np.empty((T, ff // 32), f32),
                np.empty((S, D), f32), np.empty((S, D), f32), np.empty((S, D), f32),
                np.empty((S, D), f32), np.empty((S, D // 32), f32),
                np.empty((S, self.vocab), f32))
    rows = fc.Rows(kv.K, kv.V, attention_cpu.owners(spans, T), cos, sin, spans, starts, tables,
                   page_rows, f32(scale), sel)
    ctr = np.zeros((self.counters, WIDTH), np.int64)
    mq, mo, mg, md, mh = (blocks_vec._made("matrix", k) for k in self.kinds)
    att2 = b.att.reshape(T, nq * hd)
    hh, h2 = b.h, b.h2
    s = np.int64(0)
    prog = self.prog

    def tm(name, fn, *args):
        t0 = time.perf_counter()
        fn(*args)
        acc[name] += time.perf_counter() - t0

    for li in range(prog.shape[0]):
        for k in range(prog.shape[1]):
            c, arg, flags = (int(v) for v in prog[li, k])
            if c == 0:
                break
            if c == fc._NORM:
                tm("norm", fc._norm, ctr, s, np.int64(flags), b, hh, h2, w.norms[li, arg], w.eps)
                if not flags & fc.ALONE:
                    hh, h2 = h2, hh
                s += 1
            elif c == fc._QKV:
                tm("qkv", mq, ctr, s, np.int64(0), np.int64(1), b.x, b.xs_d, w.wqkv[li], b.qkv)
                s += 1
            elif c == fc._ATTEND:
                tm("attend", fc._attend, ctr, s, np.int64(flags), b, w, rows, np.int64(li))
                s += 3
            elif c == fc._O:
                tm("o", mo, ctr, s, np.int64(0), np.int64(1), att2, b.xs_a, w.wo[li], b.out)
                s += 1
            elif c == fc._GATE_UP_SWIGLU:
                tm("gate_up", mg, ctr, s, np.int64(0), np.int64(1), b.x, b.xs_d, w.wgu[li], b.gu)
                tm("swiglu", fc._swiglu, ctr, s + 1, np.int64(flags), b, w.ff)
                s += 2
            elif c == fc._DOWN:
                tm("down", md, ctr, s, np.int64(0), np.int64(1), b.act, b.xs_f, w.wdown[li], b.out)
                s += 1
    tm("head_norm", fc._head_norm, ctr, s, self.kinds[-1] == "Q4_1", b, hh, w, sel)
    tm("head", mh, ctr, s + 1, np.int64(0), np.int64(1), b.xs, b.xs_s, w.wh, b.logits)
    acc["whole"] += time.perf_counter() - t_all
    last["staged"] = b.logits.copy()
    return b.logits


fc.Fused.run = staged
eng = open_model(None, progress=False).engine
P = a.keys // 16 + 4
eng.apply(PoolStep(True, P, 16, (eng.page_bytes(16),), 1, P * 16))
eng.apply(BeginStep(0, tuple(range(P))))
KEYS = a.keys
ids = [100 + i % 1000 for i in range(KEYS + 20)]
import numba  # noqa: E402
numba.set_num_threads(1)
for c0 in range(0, KEYS, 256):
    eng.apply(RoundStep((Chunk(0, c0, tuple(ids[c0:min(KEYS, c0 + 256)]), False),)))
sizes = (1, 4, 8)
res = {k: [] for k in sizes}
fused = {k: [] for k in sizes}
equal = True
for rep in range(a.reps + 1):
    for k in sizes:
        mode["staged"] = False
        t0 = time.perf_counter()
        eng.apply(RoundStep((Chunk(0, KEYS, tuple(ids[KEYS:KEYS + k]), EVERY_ROW),)))
        if rep:
            fused[k].append(time.perf_counter() - t0)
        mode["staged"] = True
        acc.clear()
        eng.apply(RoundStep((Chunk(0, KEYS, tuple(ids[KEYS:KEYS + k]), EVERY_ROW),)))
        equal &= np.array_equal(last["fused"].view(np.uint32), last["staged"].view(np.uint32))
        if rep:
            res[k].append(dict(acc))
names = list(res[1][0])
med = {k: {n: statistics.median(r[n] for r in res[k]) * 1e3 for n in names} for k in sizes}
fm = {k: statistics.median(fused[k]) * 1e3 for k in sizes}
print("rows | fused round (engine) | " + " | ".join(names))
for k in sizes:
    print(f"{k} | {fm[k]:.2f} | " + " | ".join(f"{med[k][n]:.2f}" for n in names))
for k in sizes[1:]:
    print(f"per extra row 1->{k}: fused {(fm[k] - fm[1]) / (k - 1):.2f}; "
          + ", ".join(f"{n} {(med[k][n] - med[1][n]) / (k - 1):.2f}" for n in names))
print("staged logits equal the fused round's, bit for bit:", equal, "loadavg", os.getloadavg())
