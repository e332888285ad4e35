"""Why llama.cpp's logprobs on the tiny checkpoint's NVFP4 copy differ from foldserve's
(issue 34): the same weight values in three storage forms, through llama-server and foldserve.

    # 1. the files (llama.cpp's own gguf-py; any python with numpy)
    python tools/refs/glm53_nvfp4_cause.py files --src /tmp/g53-nvfp4.gguf --dir /tmp/glm53b-bench
    # 2. llama-server on each (tools/refs/record_moe.py's client: the reference venv)
    /work/venv-ref/bin/python tools/refs/glm53_nvfp4_cause.py llama --dir /tmp/glm53b-bench
    # 3. foldserve on A and C, and the table (the project's venv)
    PYTHONPATH=$PWD .venv/bin/python tools/refs/glm53_nvfp4_cause.py ours --dir /tmp/glm53b-bench

A = the NVFP4 copy (gate / up / q_a NVFP4, the rest Q8_0: the receipt 2026-12-05-glm53-cpu's
file), B = A with its NVFP4 tensors replaced by their dequantized values as F32 (Q8_0 kept),
C = A with every block tensor dequantized to F32 (ggml's dequantization, gguf-py's
`quants.dequantize`: exactly the values A's blocks hold). First: foldserve's NVFP4 rows equal
gguf-py's dequantization bit for bit on every NVFP4 tensor of A. Then if llama.cpp on C
agrees with foldserve on A while llama.cpp on A does not agree with llama.cpp on C, the
difference is llama.cpp's arithmetic on block types, not the weights' reading.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

LLAMA = Path("/work/peers-build/llama.cpp")
ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests/data/glm53/glm53-tiny.json"
FILES = {"A_nvfp4_q8": "g53-nvfp4.gguf", "B_nvfp4_as_f32": "g53-nvfp4-deqnv.gguf",
         "C_all_f32": "g53-nvfp4-deqall.gguf"}


def _gguf():
    sys.path.insert(0, str(LLAMA / "gguf-py"))
    import gguf
    from gguf import quants
    return gguf, quants


def rewrite(src: Path, dst: Path, kinds: tuple) -> None:
    """src's keys and tensors, those of `kinds` dequantized to F32 (the rest as stored)."""
    gguf, quants = _gguf()
    r = gguf.GGUFReader(str(src))
    f = r.fields["general.architecture"]
    w = gguf.GGUFWriter(str(dst), bytes(f.parts[f.data[0]]).decode())
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), f.types[0], sub_type=f.types[1])
        else:
            w.add_key_value(f.name, f.contents(), f.types[0])
    for t in r.tensors:
        raw = np.asarray(t.data)
        if t.tensor_type.name in kinds:
            w.add_tensor(t.name, quants.dequantize(raw, t.tensor_type).astype(np.float32))
        elif t.tensor_type.name == "F32":
            w.add_tensor(t.name, np.asarray(raw, np.float32).reshape([int(x) for x in reversed(t.shape)]))
        else:
            w.add_tensor(t.name, raw, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def files(src: Path, d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    a = d / FILES["A_nvfp4_q8"]
    if a.resolve() != src.resolve():
        a.write_bytes(src.read_bytes())
    rewrite(a, d / FILES["B_nvfp4_as_f32"], ("NVFP4",))
    rewrite(a, d / FILES["C_all_f32"], ("NVFP4", "Q8_0"))


def llama(d: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tools.refs import record_moe as rm
    rec = json.loads(CASES.read_text())
    cases = [{"name": c["name"], "prompt_ids": c["prompt_ids"]} for c in rec["references"]["cases"]]
    out = {}
    for tag, name in FILES.items():
        out[tag], cmd = rm.llama_server_cases(LLAMA / "build-cpu/bin/llama-server", d / name, cases,
                                              d / f"{tag}.log")
    out["command"] = cmd
    (d / "nvfp4_llama.json").write_text(json.dumps(out))


def _rows_equal_gguf_py(path: Path) -> tuple[int, int]:
    """(NVFP4 tensors, how many differ): foldserve's unpacked rows against gguf-py's."""
    gguf, quants = _gguf()
    from kernels import qmatmul
    from kernels.blocks import Blocks
    n = bad = 0
    for t in gguf.GGUFReader(str(path)).tensors:
        if t.tensor_type.name != "NVFP4":
            continue
        raw = np.asarray(t.data)
        ref = quants.dequantize(raw, t.tensor_type).astype(np.float32)
        data = np.ascontiguousarray(raw.reshape(-1, raw.shape[-1]))
        ours = qmatmul.rows(Blocks("NVFP4", data.shape[0], ref.shape[-1], data), np.arange(data.shape[0]))
        n += 1
        bad += not np.array_equal(ours.view(np.uint32), ref.reshape(ours.shape).view(np.uint32))
    return n, bad


def _foldserve(path: Path, cases: list) -> dict:
    from server.engine.engine import Engine
    from server.engine.weights import load
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    ld = load(str(path), progress=False)
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    out = {}
    for case in cases:
        eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 256))
        eng.apply(BeginStep(0, tuple(range(16))))
        p = case["prompt_ids"]
        lg = eng.apply(RoundStep((Chunk(0, 0, tuple(p), True),)))
        pos, ids, lps = len(p), [], []
        for _ in range(24):
            x = np.asarray(lg[0], np.float64)
            lps.append(x - (np.log(np.sum(np.exp(x - x.max()))) + x.max()))
            ids.append(int(np.argmax(x)))
            lg = eng.apply(RoundStep((Chunk(0, pos, (ids[-1],), True),)))
            pos += 1
        eng.apply(EndStep(0))
        out[case["name"]] = (ids, lps)
    return out


def _agree(ids, lps, other) -> tuple[int, float | None]:
    """(steps with the same greedy id before the first difference, the largest top-5 logprob
    difference on the first step)."""
    same = next((i for i, (a, b) in enumerate(zip(ids, other["greedy_ids"])) if a != b), len(ids))
    t5 = other["top5"][0]
    d0 = None if t5 is None else max(abs(lps[0][t] - v) for t, v in zip(t5["ids"], t5["logprobs"]))
    return same, d0


def ours(d: Path) -> None:
    import kernels
    kernels.init()
    n, bad = _rows_equal_gguf_py(d / FILES["A_nvfp4_q8"])
    print(f"foldserve's NVFP4 rows vs gguf-py's dequantize on {n} tensors: {bad} differ")
    rec = json.loads(CASES.read_text())["references"]["cases"]
    ll = json.loads((d / "nvfp4_llama.json").read_text())
    mine = {k: _foldserve(d / FILES[k], rec) for k in ("A_nvfp4_q8", "C_all_f32")}
    print("| prompt | foldserve on | llama.cpp on | same ids | first-step top-5 max abs dlogprob |")
    print("|---|---|---|---|---|")
    rows = [(m, l) for m in mine for l in FILES] 
    for m, l in rows:
        for c in ll[l]:
            same, d0 = _agree(*mine[m][c["name"]], c)
            print(f"| {c['name']} | {m} | {l} | {same}/24 | {'-' if d0 is None else f'{d0:.2e}'} |")
    for a, c in zip(ll["A_nvfp4_q8"], ll["C_all_f32"]):
        same = next((i for i, (x, y) in enumerate(zip(a["greedy_ids"], c["greedy_ids"])) if x != y), 24)
        d0 = max(abs(x - y) for x, y in zip(a["top5"][0]["logprobs"], c["top5"][0]["logprobs"]))
        same_ids = a["top5"][0]["ids"] == c["top5"][0]["ids"]
        print(f"llama.cpp A vs llama.cpp C, {a['name']}: same ids {same}/24; first step's top-5 "
              f"logprobs (by rank) differ by up to {d0:.3f}; the same top-5 ids: {same_ids}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=("files", "llama", "ours"))
    ap.add_argument("--src", default="/tmp/g53-nvfp4.gguf")
    ap.add_argument("--dir", default="/tmp/glm53b-bench")
    a = ap.parse_args()
    d = Path(a.dir)
    {"files": lambda: files(Path(a.src), d), "llama": lambda: llama(d), "ours": lambda: ours(d)}[a.stage]()


if __name__ == "__main__":
    main()
