"""Alternating sides on the GLM-5.3-shaped Q8_0 file, each gated on a quiet machine (the
glm53-quiet receipt's pair.py with a third side): llama-bench (-t 2 -p 512 -n 32 -r 1),
foldserve with q8_0 x (this tree, the default: glm5next's Q8_0_X8) and foldserve with float32
x (TF_Q8_0_X=float: the arithmetic before this branch), each a fresh process
(bench.moe_cpu.llama_bench / fresh_numbers: engine loaded, warmed, 32 greedy b1 steps after a
1-token prompt, one 512-row prefill); before each side wait (up to WAIT s) until the whole
machine was under 0.3 cores busy over 5 s; each side's CPU and the other processes' recorded.
Run under the bench lock.
    PYTHONPATH=$PWD python pair.py FILE.gguf OUT.json ROUNDS [WAIT]"""
import json, sys, time
from pathlib import Path
import bench.moe_cpu as mc

f, out, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
WAIT = float(sys.argv[4]) if len(sys.argv) > 4 else 120
lcpp = Path("/work/peers-build/llama.cpp")


def gate():
    t0 = time.time()
    while True:
        b0 = mc._busy(); time.sleep(5); c = (mc._busy() - b0) / 5
        if c < 0.3 or time.time() - t0 > WAIT:
            return {"busy_before": round(c, 2), "waited_s": round(time.time() - t0, 1), "quiet": c < 0.3}


res = []
for r in range(rounds):
    for side in ("llama_cpp", "q8_0_x", "float_x"):
        g = gate()
        l0 = mc._load()
        c = mc.Cpu()
        if side == "llama_cpp":
            v = {k: x["tok_s"] for k, x in mc.llama_bench(lcpp, f, 2, reps=1).items()}
        else:
            mc.ENV0.pop("TF_Q8_0_X", None)
            if side == "float_x":
                mc.ENV0["TF_Q8_0_X"] = "float"
            v = mc.fresh_numbers(f, 2, b8=False)
            mc.ENV0.pop("TF_Q8_0_X", None)
        cpu = c.done()
        rec = {"round": r + 1, "side": side, "tg": v["tg"], "pp512": v["pp512"], "gate": g,
               "cpu": cpu, "load": [l0, mc._load()], "utc": time.strftime("%H:%M:%S", time.gmtime())}
        res.append(rec)
        print(f"round {r + 1} {side:9s}: tg {v['tg']:6.2f} pp512 {v['pp512']:6.2f}  cores {cpu['ours']:.2f} "
              f"(others {cpu['others']:.2f}), quiet before: {g['busy_before']} cores after {g['waited_s']} s; "
              f"load {l0} -> {mc._load()}", flush=True)
        out.write_text(json.dumps(res, indent=1))
