"""The recorder's q8_0 rounding (tools/refs/record_q8ref.q8_0, torch in and out) against
foldserve's (kernels/kquant_cpu.quantize_q8_0, and the product q80_definition) on a few vectors.

    PYTHONPATH=. /work/main/.venv/bin/python docs/receipts/2026-12-05-q8ref/check_q8_0.py make /tmp/q8chk.npz
    /work/venv-ref/bin/python docs/receipts/2026-12-05-q8ref/check_q8_0.py check /tmp/q8chk.npz
"""
import sys
import numpy as np

mode, path = sys.argv[1], sys.argv[2]
if mode == "make":
    import kernels; kernels.init()
    from kernels import kquant_cpu as kq
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize
    rng = np.random.default_rng(5)
    K = 256
    x = rng.standard_normal((6, K)).astype(np.float32) * np.float32(3)
    x[1, :32] = 0                                           # a zero block
    x[2, :32] = np.float32(127) * np.arange(-16, 16, dtype=np.float32) / np.float32(32)  # halves: ties
    x[2, 0] = np.float32(-127)
    x[3, 32:64] = np.float32(2.5)                           # one value a block: d = 2.5 / 127
    x[4] *= np.float32(1e-3)
    x[5, :32] = (np.arange(32, dtype=np.float32) - np.float32(15.5)) * np.float32(3)   # d = 1: x / d halves
    x[5, 0] = np.float32(127)                               # (ties away from zero)
    q, dx = kq.quantize_q8_0(x)
    w = rng.standard_normal((40, K)).astype(np.float32)
    data = quantize(w, GGMLQuantizationType.Q8_0).reshape(40, -1)
    y = kq.q80_definition(q, dx, np.ascontiguousarray(data))
    from gguf.quants import dequantize
    wd = dequantize(data, GGMLQuantizationType.Q8_0).reshape(40, K).astype(np.float32)
    np.savez(path, x=x, q=q, dx=dx, y=y, wd=wd)
    print("made", path, "| halves among x / d in row 5:", int(np.sum(np.abs(x[5, :32] % 1) == 0.5)), "| q there:", q[5, :8].tolist())
else:
    import importlib.util
    from pathlib import Path
    import torch
    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("record_q8ref", root / "tools/refs/record_q8ref.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    d = np.load(path)
    want = (d["q"].astype(np.float32).reshape(6, -1, 32) * d["dx"][:, :, None]).reshape(6, -1)
    got = m.q8_0(torch.from_numpy(d["x"])).numpy()
    print("x rounded: byte-equal to kquant_cpu.quantize_q8_0's q * dx:", got.tobytes() == want.tobytes(),
          "| rows", got.shape[0], "| values changed by rounding:", int(np.sum(got != d["x"])))
    perm = np.random.default_rng(1).permutation(256)
    gp = m.q8_0(torch.from_numpy(d["x"]), perm).numpy()
    ref = np.empty_like(want); xp = d["x"][:, perm]
    q2 = m.quantize_q8_0(xp)
    ref[:, perm] = (q2[0].astype(np.float32).reshape(6, -1, 32) * q2[1][:, :, None]).reshape(6, -1)
    print("permuted order: equal to rounding x[:, perm] and putting it back:", gp.tobytes() == ref.tobytes())
    yt = torch.nn.functional.linear(torch.from_numpy(got), torch.from_numpy(d["wd"])).numpy()
    rel = np.max(np.abs(yt - d["y"])) / np.max(np.abs(d["y"]))
    print("product: torch F.linear(q8_0(x), dequantized w) vs kquant_cpu.q80_definition: max |d| / max |y| =",
          f"{rel:.2e} (float32 summation order only)")
