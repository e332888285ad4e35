"""A GLM-4.7-Flash-shaped deepseek2 file (multi-head latent attention + DeepSeek's MoE) and
llama.cpp's CPU speed on it beside foldserve's, side by side in one run (issue 32's targets).
Shares bench/moe_cpu.py's file writer, llama-bench call and engine harness.

    PYTHONPATH=$PWD python -m bench.mla_cpu [--layers 4] [--dir /tmp/mla-bench]
        [--llama-cpp /work/peers-build/llama.cpp] [--threads 2] [--rounds 3]
        [--stages make,bench] [--depth 4096] [--out FILE.json]

The shape: GLM-4.7-Flash's config.json (hidden 2048, 20 heads, q_lora 768, latent 512, nope
192 / rope 64 / v 256, 64 experts of FF 1536 top-4 + 1 shared, layer 0 dense FF 10,240,
sigmoid router with the selection bias, x1.8, vocab 154,880), depth cut to --layers, Q8_0,
random weights (bench/moe_cpu.make_gguf: llama.cpp's names and keys, kv_b as attn_k_b /
attn_v_b).

Each round, alternately:
  llama-bench -t T -p 512 -n 32 -r 1            -> tg (batch-1 decode), pp512
  llama-bench -t T -p 0 -n 16 -d DEPTH -r 1     -> tg at DEPTH context
  foldserve, in a fresh process of its own (`ours_numbers`; issue 31's harness flaw: after
            llama-bench runs as a subprocess, the engine's decode in the same Python process
            slows several times, unexplained): the engine loaded and warmed, tg (1-token
            prompt, 32 steps), pp512 (one 512-token round), then a DEPTH-token prompt
            prefilled in rounds of 512 (the CPU server's round budget) and 16 batch-1 decode
            steps timed -> tg at DEPTH
  --base TREE: an earlier commit's foldserve (a `git archive` of it) the same way, a third
            (before / after under the same load).
The ratios of each round (the pair under the same load), and the medians with their spread.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.moe_cpu import ROOT, Foldserve, _load, _med, make_gguf
from tools.refs import moe_checkpoint as mc

GLM47_FLASH = mc.MoeSpec(
    name="glm-4.7-flash", family="deepseek2", seed=47, n_layer=47, hidden=2048, n_head=20,
    n_head_kv=20, head_dim=256, n_expert=64, n_expert_used=4, expert_ff=1536, dense_ff=10240,
    vocab=154880, rope_theta=1e6, rms_eps=1e-5, max_pos=202752, n_shared=1, first_dense=1,
    n_group=1, topk_group=1, routed_scaling=1.8, qk_norm=False, q_lora_rank=768,
    kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
    hf_class="Glm4MoeLiteForCausalLM")


def llama_bench(lcpp: Path, f: Path, threads: int, args: list) -> dict:
    r = subprocess.run([str(lcpp / "build-cpu/bin/llama-bench"), "-m", str(f), "-t", str(threads),
                        "-r", "1", "-o", "json", *map(str, args)], check=True, capture_output=True,
                       text=True)
    out = {}
    for row in json.loads(r.stdout):
        key = (f"tg@{row['n_depth']}" if row.get("n_depth") else "tg") if row["n_gen"] else f"pp{row['n_prompt']}"
        out[key] = row["avg_ts"]
    return out


class Deep(Foldserve):
    """moe_cpu's harness with room for one stream at `depth` + 64 rows (and 8 short ones)."""

    def __init__(self, f: Path, threads: int, depth: int):
        self.depth = depth
        super().__init__(f, threads, ctx=max(1024, -(-(depth + 64) // 16) * 16))

    def warm(self):
        self.decode(1, 2)
        self.prefill(32)

    def at_depth(self, n_gen: int = 16, chunk: int = 512) -> dict:
        """A depth-token prompt in rounds of `chunk`, then n_gen batch-1 decode steps."""
        from server.ranks.steps import Chunk, RoundStep
        self._begin(0)
        toks = [int(t) for t in np.random.default_rng(self.depth).integers(0, self.spec.vocab, self.depth)]
        t = time.perf_counter()
        for a in range(0, self.depth, chunk):
            logits = self.eng.apply(RoundStep((Chunk(0, a, tuple(toks[a:a + chunk]), True),)))
        pre = time.perf_counter() - t
        nxt = int(np.argmax(logits[0]))
        t = time.perf_counter()
        for k in range(n_gen):
            logits = self.eng.apply(RoundStep((Chunk(0, self.depth + k, (nxt,)),)))
            nxt = int(np.argmax(logits[0]))
        dt = time.perf_counter() - t
        self._end(1)
        return {f"tg@{self.depth}": n_gen / dt, f"pp@{self.depth}": self.depth / pre}


def ours_numbers(tree: Path, f: Path, threads: int, depth: int) -> dict:
    """foldserve from source tree `tree` in a fresh process of its own: Deep loaded and
    warmed, then tg, pp512 and (depth > 0) tg / pp at depth, as side_by_side's docstring says."""
    code = ("import json, time; from pathlib import Path; from bench.mla_cpu import Deep\n"
            f"t = time.time(); e = Deep(Path({str(f)!r}), {threads}, {depth})\n"
            "r = {'load_s': e.load_s, 'warm_s': time.time() - t - e.load_s}\n"
            "r['tg'] = e.decode(1, 32)[0]; r['pp512'] = e.prefill(512)[0]\n"
            f"r.update(e.at_depth() if {depth} else {{}})\n"
            "print('RESULT', json.dumps(r))\n")
    env = dict(os.environ, PYTHONPATH=str(tree))
    r = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                       capture_output=True, text=True)
    return json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])


def side_by_side(f: Path, lcpp: Path, threads: int, rounds: int, depth: int,
                 base: Path | None = None) -> dict:
    per = []
    dk = f"tg@{depth}"
    keys = ("tg", "pp512") + ((dk,) if depth else ())
    sides = ("foldserve",) + (("base",) if base else ())
    for r in range(rounds):
        loads = [_load()]
        ll = llama_bench(lcpp, f, threads, ["-p", 512, "-n", 32])
        loads.append(_load())
        if depth:
            ll.update(llama_bench(lcpp, f, threads, ["-p", 0, "-n", 16, "-d", depth]))
            loads.append(_load())
        row = {"llama_cpp": ll}
        for side in sides:
            row[side] = ours_numbers(ROOT if side == "foldserve" else base, f, threads, depth)
            loads.append(_load())
            row[f"ratio_{side}"] = {k: row[side][k] / ll[k] for k in keys}
        row["loadavg"] = loads
        per.append(row)
        for side in sides:
            o, q = row[side], row[f"ratio_{side}"]
            print(f"  round {r + 1} {side:9s}: " + "  ".join(
                f"{k} {o[k]:.2f} vs {ll[k]:.2f} ({q[k]:.2f}x)" for k in keys)
                + (f"  (its prefill at depth {o[f'pp@{depth}']:.1f} tok/s)" if depth else "")
                + f"  load {' | '.join(loads)}", flush=True)
    med = {}
    for k in keys:
        med[k] = {"llama_cpp": _med([p["llama_cpp"][k] for p in per])}
        for side in sides:
            rs = [p[f"ratio_{side}"][k] for p in per]
            med[k].update({side: _med([p[side][k] for p in per]), f"ratio_{side}": _med(rs),
                           f"ratio_{side}_range": [min(rs), max(rs)]})
        m = med[k]
        print(f"{k:8s} medians of {rounds}: llama.cpp {m['llama_cpp']:.2f}  " + "  ".join(
            f"{side} {m[side]:.2f} ratio {m[f'ratio_{side}']:.2f}x (rounds "
            f"{m[f'ratio_{side}_range'][0]:.2f}-{m[f'ratio_{side}_range'][1]:.2f})" for side in sides),
            flush=True)
    return {"file": f.name, "bytes": f.stat().st_size, "threads": threads, "depth": depth,
            "rounds": per, "median": med}


def profile(f: Path, threads: int, depth: int, steps: int = 8) -> None:
    """Where a step goes (bench/moe_stage_profile.py's timers, plus ops.mla_attend and the MLA
    kernel's parts): decode b1 at an empty context, a 512-token prefill, decode b1 at depth."""
    from bench.moe_stage_profile import instrument
    from kernels import mla
    from server.ranks.steps import Chunk, RoundStep
    eng = Deep(f, threads, depth)
    ops = eng.eng.model.ops                   # the engine's backend (kernels.ops.backend)
    acc, calls, outer = instrument(eng.spec.vocab, ops)
    inner = ops.mla_attend

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            acc["ops.mla_attend"] += time.perf_counter() - t
            calls["ops.mla_attend"] += 1
            outer[0] += time.perf_counter() - t
    ops.mla_attend = timed
    for name in ("latent_rows", "rope_interleaved"):
        fn = getattr(mla, name)

        def wrapped(*a, _fn=fn, _n=name, **k):
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                acc[f"  mla: {_n}"] += time.perf_counter() - t
                calls[f"  mla: {_n}"] += 1
        setattr(mla, name, wrapped)

    def report(title, dt, n):
        print(f"{title}: {dt / n * 1e3:.1f} ms a step ({n} steps)  load {_load()}", flush=True)
        for k, v in sorted(acc.items(), key=lambda kv: -kv[1]):
            print(f"  {k:44s} {v / n * 1e3:9.2f} ms  {v / dt:6.1%}  ({calls[k] // n} calls)", flush=True)
        print(f"  {'other (Python between the ops)':44s} {(dt - outer[0]) / n * 1e3:9.2f} ms  "
              f"{(dt - outer[0]) / dt:6.1%}", flush=True)

    def reset():
        acc.clear(), calls.clear()
        outer[0] = 0.0

    def decode(start, first):
        nxt = first
        reset()
        t = time.perf_counter()
        for k in range(steps):
            lg = eng.eng.apply(RoundStep((Chunk(0, start + k, (nxt,)),)))
            nxt = int(np.argmax(lg[0]))
        report(f"decode b1 at {start}", time.perf_counter() - t, steps)

    eng._begin(0)
    lg = eng.eng.apply(RoundStep((Chunk(0, 0, (1,)),)))
    decode(1, int(np.argmax(lg[0])))
    eng._end(1)
    eng._begin(0)
    toks = [int(t) for t in np.random.default_rng(depth).integers(0, eng.spec.vocab, depth)]
    for a in range(0, depth, 512):
        reset()
        t = time.perf_counter()
        lg = eng.eng.apply(RoundStep((Chunk(0, a, tuple(toks[a:a + 512]), True),)))
        if a in (0, depth - 512):
            report(f"prefill 512 at {a}", time.perf_counter() - t, 1)
    decode(depth, int(np.argmax(lg[0])))
    eng._end(1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dir", default="/tmp/mla-bench")
    ap.add_argument("--llama-cpp", default="/work/peers-build/llama.cpp")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--depth", type=int, default=4096, help="0: skip the decode at depth")
    ap.add_argument("--stages", default="make,bench")
    ap.add_argument("--out", default=None)
    ap.add_argument("--base", default=None, help="an earlier tree's foldserve, a third each round")
    a = ap.parse_args(argv)
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    spec = replace(GLM47_FLASH, n_layer=a.layers, name=f"glm-4.7-flash-L{a.layers}")
    f = d / f"glm-4.7-flash-L{a.layers}-Q8_0.gguf"
    if "make" in a.stages and not f.exists():
        t = time.time()
        make_gguf(spec, f.with_suffix(".tmp"))
        f.with_suffix(".tmp").rename(f)
        print(f"made {f} ({f.stat().st_size / 1e9:.2f} GB, {time.time() - t:.0f} s)", flush=True)
    if "profile" in a.stages:
        profile(f, a.threads, a.depth)
    if "bench" in a.stages:
        res = side_by_side(f, Path(a.llama_cpp), a.threads, a.rounds, a.depth,
                           Path(a.base) if a.base else None)
        if a.out:
            Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
