"""instructions in the block loop of a tile (its largest basic-block loop with vpmaddubsw), per (r,c)."""
import sys, re
import kernels; kernels.init()
import numpy as np
from numba import njit
from kernels import kquant_cpu as KQ
kind = sys.argv[1]
for spec in sys.argv[2:]:
    R, C, form = spec.split(":")
    R, C = int(R), int(C)
    KQ.ONE_ROW_FORM = form == "new"
    t = KQ._make_tile(kind, R, C, True)
    @njit(boundscheck=False, nogil=True)
    def f(data, n, q, i, dx, gs):
        return t(data, n, q, i, dx, gs)
    sys.path.insert(0, "tests/model")
    from test_kquant_q8 import random_rows
    rng = np.random.default_rng(0)
    w = random_rows(rng, kind, 8, 2048); x = rng.standard_normal((8, 2048)).astype(np.float32)
    q, dx, gs = KQ.quantize(x)
    f(w, 0, q, 0, dx, gs)
    asm = list(f.inspect_asm().values())[0]
    # split into basic blocks; find the loop block(s) containing vpmaddubsw, count instrs
    blocks, cur = [], []
    for ln in asm.splitlines():
        if re.match(r"^\.LBB", ln) or re.match(r"^\S.*:$", ln):
            blocks.append(cur); cur = []
        elif ln.strip() and not ln.strip().startswith((".", "#")):
            cur.append(ln.split()[0])
    blocks.append(cur)
    best = max(blocks, key=lambda b: b.count("vpmaddubsw"))
    spill = sum(1 for b in best if b in ("vmovups", "vmovaps", "vmovdqu64", "vmovdqa64"))
    print(f"{kind} {R}x{C} {form}: {len(best)} instrs, {best.count('vpmaddubsw')} vpmaddubsw, {len(best)/(R*C):.1f} a (r,c); moves {spill}", flush=True)
