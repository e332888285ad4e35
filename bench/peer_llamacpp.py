"""llama.cpp beside foldserve on one H200, on the same llama3-8b-shaped files (issue 17).

Stages (each its own flag; the device script bench/device/quant.sh runs them in order):
  --build       untar ../shared/peers' llama.cpp (carried as .peers/) into /root/keep and build
                llama-bench, llama-batched-bench, llama-server, llama-quantize (CUDA, sm_90),
                in the background (setsid nohup): ~4.5 min on 16 cores; --wait waits for it
  --make-gguf   a llama3-8b-shaped BF16 GGUF with seeded normal(0, 0.02) weights (torch on the
                GPU, seed 17) and the Llama 3 vocabulary (tokenizer.* keys of
                models/ggml-vocab-llama-bpe.gguf)
  --quantize    llama-quantize it to Q8_0 and Q4_K_M
  --llama-bench llama-bench on each file: b1 decode tg256 at depth 128 and prefill pp2048,
                with the floor (the file's bytes / the copy rate measured in this run) beside
Not here yet: foldserve's engine and `foldserve bench` over HTTP on these files (the GPU
engine does not yet load GGUF blocks; see the receipt's table for what stands in).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

KEEP = Path("/root/keep")
SRC = KEEP / "lcpp" / "llama.cpp"
BIN = SRC / "build" / "bin"
TARGETS = ["llama-bench", "llama-batched-bench", "llama-server", "llama-quantize"]
SHAPE = dict(n_layer=32, d=4096, ff=14336, heads=32, kv=8, vocab=128256, ctx=8192)


def sh(cmd, **kw):
    print("+", cmd if isinstance(cmd, str) else " ".join(map(str, cmd)), flush=True)
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def build(tgz: Path):
    if (BIN / "llama-bench").exists():
        print("llama.cpp already built", flush=True)
        return
    KEEP.mkdir(parents=True, exist_ok=True)
    if not SRC.exists():
        (KEEP / "lcpp").mkdir(exist_ok=True)
        sh(["tar", "xzf", str(tgz), "-C", str(KEEP / "lcpp")])
    cfg = (f"cmake -S {SRC} -B {SRC}/build -DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc "
           "-DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF "
           "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release")
    bld = f"cmake --build {SRC}/build -j {os.cpu_count()} --target {' '.join(TARGETS)}"
    script = f"({cfg} && {bld}) > {KEEP}/build.log 2>&1; echo $? > {KEEP}/build.rc"
    subprocess.Popen(["setsid", "nohup", "bash", "-c", script], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    (KEEP / "build.t0").write_text(str(time.time()))
    print("llama.cpp build started in the background", flush=True)


def wait_build(limit: float):
    t = time.time()
    while not (KEEP / "build.rc").exists():
        if time.time() - t > limit:
            raise SystemExit("llama.cpp build not finished in time")
        time.sleep(5)
    rc = (KEEP / "build.rc").read_text().strip()
    t0 = float((KEEP / "build.t0").read_text()) if (KEEP / "build.t0").exists() else t
    print(f"llama.cpp build rc {rc}, {time.time() - t0:.0f} s since start", flush=True)
    if rc != "0":
        print((KEEP / "build.log").read_text()[-3000:])
        raise SystemExit("build failed")


def make_gguf(path: Path, vocab: Path):
    import gguf
    import numpy as np
    if path.exists():
        print(f"{path} exists", flush=True)
        return
    s = SHAPE
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("llama3-8b-shape-random")
    w.add_block_count(s["n_layer"])
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["d"])
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(s["d"] // s["heads"])
    w.add_vocab_size(s["vocab"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    r = gguf.GGUFReader(str(vocab))
    for name, f in r.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vt = f.types[0]
        val = f.contents()
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, val, vt, sub_type=f.types[-1])
        else:
            w.add_key_value(name, val, vt)
    try:
        import torch
        g = torch.Generator(device="cuda").manual_seed(17)

        def bf16(*shape):
            t = torch.empty(shape, device="cuda", dtype=torch.float32).normal_(0, 0.02, generator=g)
            return t.to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16)
    except (ImportError, RuntimeError):            # no torch / no GPU: numpy (slow; checks only)
        rng = np.random.default_rng(17)

        def bf16(*shape):                          # truncated to bf16
            return ((rng.standard_normal(shape, dtype=np.float32) * 0.02).view(np.uint32) >> 16).astype(np.uint16)
    BF = gguf.GGMLQuantizationType.BF16
    ones = np.ones(s["d"], dtype=np.float32)
    hd = s["d"] // s["heads"]
    w.add_tensor("token_embd.weight", bf16(s["vocab"], s["d"]), raw_dtype=BF)
    for i in range(s["n_layer"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", bf16(s["d"], s["d"]), raw_dtype=BF)
        w.add_tensor(p + "attn_k.weight", bf16(s["kv"] * hd, s["d"]), raw_dtype=BF)
        w.add_tensor(p + "attn_v.weight", bf16(s["kv"] * hd, s["d"]), raw_dtype=BF)
        w.add_tensor(p + "attn_output.weight", bf16(s["d"], s["d"]), raw_dtype=BF)
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", bf16(s["ff"], s["d"]), raw_dtype=BF)
        w.add_tensor(p + "ffn_up.weight", bf16(s["ff"], s["d"]), raw_dtype=BF)
        w.add_tensor(p + "ffn_down.weight", bf16(s["d"], s["ff"]), raw_dtype=BF)
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", bf16(s["vocab"], s["d"]), raw_dtype=BF)
    t = time.time()
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in {time.time() - t:.0f} s", flush=True)


def tensor_bytes(path: Path) -> int:
    import gguf
    r = gguf.GGUFReader(str(path))
    return sum(int(t.n_bytes) for t in r.tensors)


def quantize(src: Path, kinds):
    for k in kinds:
        out = src.with_name(f"l3-{k}.gguf")
        if not out.exists():
            t = time.time()
            sh([str(BIN / "llama-quantize"), str(src), str(out), k, str(os.cpu_count())],
               stdout=subprocess.DEVNULL)
            print(f"quantized {k}: {out.stat().st_size / 1e9:.2f} GB in {time.time() - t:.0f} s", flush=True)


def llama_bench(files, rate: float, outdir: Path):
    rows = []
    for f in files:
        tb = tensor_bytes(f)
        floor = tb / rate * 1e3
        for args, what in ((["-p", "0", "-n", "256", "-d", "128"], "tg256@d128"),
                           (["-p", "2048", "-n", "0"], "pp2048")):
            cmd = [str(BIN / "llama-bench"), "-m", str(f), "-ngl", "99", "-fa", "1", "-r", "3",
                   "-o", "json"] + args
            print("+", " ".join(cmd), flush=True)
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
            (outdir / f"llama-bench-{f.stem}-{what.replace('@', '_')}.json").write_text(p.stdout + p.stderr[-4000:])
            try:
                res = json.loads(p.stdout)[0]
                tps = float(res["avg_ts"])
            except Exception:
                print(p.stdout[-2000:], p.stderr[-2000:])
                continue
            if what.startswith("tg"):
                line = (f"llama.cpp {f.stem:14s} {what}: {tps:8.1f} tok/s = {1e3 / tps:6.3f} ms/token; "
                        f"tensor bytes {tb / 1e9:.3f} GB, floor {floor:.3f} ms ({1e3 / tps / floor:.2f}x floor)")
            else:
                line = f"llama.cpp {f.stem:14s} {what}: {tps:8.1f} tok/s = {2048e3 / tps:6.1f} ms"
            print(line, flush=True)
            rows.append(line)
    return rows


def copy_rate() -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.cudatime import copy_TBps
    return copy_TBps() * 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--wait", type=float, default=0)
    ap.add_argument("--make-gguf", action="store_true")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--llama-bench", action="store_true")
    ap.add_argument("--tgz", default="../.peers/llama.cpp-0c1e570.tgz")
    ap.add_argument("--dir", default=str(KEEP / "models"))
    ap.add_argument("--kinds", default="Q8_0,Q4_K_M")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    src = d / "l3-BF16.gguf"
    if a.build:
        build(Path(a.tgz).resolve())
    if a.make_gguf:
        make_gguf(src, SRC / "models" / "ggml-vocab-llama-bpe.gguf")
    if a.wait:
        wait_build(a.wait)
    kinds = [k for k in a.kinds.split(",") if k]
    if a.quantize:
        quantize(src, kinds)
    if a.llama_bench:
        rate = copy_rate()
        print(f"copy rate {rate / 1e12:.3f} TB/s", flush=True)
        rows = llama_bench([d / f"l3-{k}.gguf" for k in kinds], rate, Path(a.out))
        print("--- llama.cpp table ---")
        for r in rows:
            print(r)


if __name__ == "__main__":
    main()
