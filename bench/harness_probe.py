"""Why foldserve's decode slowed after llama-bench ran in a subprocess (issue 31's harness flaw).

    PYTHONPATH=$PWD python -m bench.harness_probe FILE.gguf [--steps 16] [--llama-cpp DIR]

One process loads foldserve's engine on FILE (bench/moe_cpu.Foldserve), then times a batch-1
greedy decode of --steps tokens after each of these, in order, printing tok/s and what the
process saw meanwhile (getrusage's minor / major faults and context switches over the decode,
the CPU affinity of every thread, the process's RSS of file and anon pages, AnonHugePages):

  base          nothing (twice)
  sleep         20 s idle (the machine's drift)
  burn          two plain CPU-bound subprocesses for 15 s (cores busy, no file, no OpenMP)
  llama-bench   llama-bench -p 512 -n 32 -r 1 on FILE with this process's environment
                (what bench/moe_cpu did: kernels.init's GOMP_SPINCOUNT etc. inherited)
  llama-bench-clean   the same with the environment as it was before kernels.init
  then --alternate pairs: this process's decode, then a new process loading FILE and timing
  the same decode (the same moment's load on both: is it this process or the machine?)
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ENV0 = dict(os.environ)          # before kernels.init (bench.moe_cpu's Foldserve calls it)


def _status() -> str:
    want = ("RssAnon", "RssFile")
    out = []
    for line in open("/proc/self/status"):
        if line.split(":")[0] in want:
            out.append(" ".join(line.split()))
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith(("AnonHugePages", "FilePmdMapped")):
            out.append(" ".join(line.split()))
    return ", ".join(out)


def _affinity() -> str:
    seen = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            a = tuple(sorted(os.sched_getaffinity(int(tid))))
        except OSError:
            continue
        seen[a] = seen.get(a, 0) + 1
    return " ".join(f"{n} threads on cpus {list(a)}" for a, n in seen.items())


def _busy() -> tuple[float, float]:
    """(busy, steal) seconds of the whole machine so far (/proc/stat's cpu line)."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(v[:3]) + sum(v[5:7])) / hz, v[7] / hz


def timed_decode(f, steps: int) -> str:
    """One batch-1 decode; besides tok/s: this process's CPU seconds per wall second (2.0 =
    both cores the whole time), the other processes' (the machine's busy time less ours),
    the steal, and getrusage's faults and context switches."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    b0, s0 = _busy()
    t0 = time.perf_counter()
    tps, _ = f.decode(1, steps)
    wall = time.perf_counter() - t0
    b1, s1 = _busy()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    ours = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return (f"tg {tps:6.2f} tok/s | cpu ours {ours / wall:4.2f} others {max(0.0, b1 - b0 - ours) / wall:4.2f} "
            f"steal {(s1 - s0) / wall:4.2f} (cores) | minflt {r1.ru_minflt - r0.ru_minflt} majflt {r1.ru_majflt - r0.ru_majflt} "
            f"nvcsw {r1.ru_nvcsw - r0.ru_nvcsw} nivcsw {r1.ru_nivcsw - r0.ru_nivcsw} | {_status()} | "
            f"{_affinity()} | load {open('/proc/loadavg').read().split()[:3]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--llama-cpp", default="/work/peers-build/llama.cpp")
    ap.add_argument("--alternate", type=int, default=2, help="in-process / fresh-process pairs at the end")
    ap.add_argument("--skip-burn", action="store_true")
    ap.add_argument("--fresh-only", action="store_true", help="(internal) load and time once")
    a = ap.parse_args(argv)
    from bench.moe_cpu import Foldserve
    f = Foldserve(Path(a.gguf), 2)
    if a.fresh_only:
        print("fresh        ", timed_decode(f, a.steps), flush=True)
        return
    bench = [str(Path(a.llama_cpp) / "build-cpu/bin/llama-bench"), "-m", a.gguf, "-t", "2",
             "-p", "512", "-n", "32", "-r", "1", "-o", "json"]
    inherited = {k: os.environ[k] for k in ("GOMP_SPINCOUNT", "NUMBA_SLP_VECTORIZE", "NUMBA_CACHE_DIR",
                                            "OMP_WAIT_POLICY") if k in os.environ and ENV0.get(k) != os.environ[k]}
    print("set by kernels.init and inherited by a subprocess:", inherited, flush=True)
    print("base         ", timed_decode(f, a.steps), flush=True)
    print("base         ", timed_decode(f, a.steps), flush=True)
    if not a.skip_burn:
        time.sleep(20)
        print("sleep 20 s   ", timed_decode(f, a.steps), flush=True)
    burn = "import time\nt=time.time()\nwhile time.time()-t<15: pass"
    if not a.skip_burn:
        ps = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(2)]
        for p in ps:
            p.wait()
        print("burn 15 s    ", timed_decode(f, a.steps), flush=True)
    for name, env in (("llama-bench", None), ("llama-bench-clean", ENV0)):
        t = time.time()
        r = subprocess.run(bench, capture_output=True, text=True, env=env)
        import json
        rows = json.loads(r.stdout)
        lb = " ".join(f"{'tg' if x['n_gen'] else 'pp'} {x['avg_ts']:.2f}" for x in rows)
        print(f"  ({name} ran {time.time() - t:.0f} s: {lb})", flush=True)
        print(f"{name:13s}", timed_decode(f, a.steps), flush=True)
        print(f"{name:13s}", timed_decode(f, a.steps), flush=True)
    for k in range(a.alternate):          # the same moment's load: this process, then a new one
        print("in-process   ", timed_decode(f, a.steps), flush=True)
        r = subprocess.run([sys.executable, "-m", "bench.harness_probe", a.gguf, "--steps", str(a.steps),
                            "--fresh-only"], capture_output=True, text=True, env=ENV0)
        print([ln for ln in r.stdout.splitlines() if ln.startswith("fresh")][-1] if "fresh" in r.stdout
              else r.stderr[-2000:], flush=True)


if __name__ == "__main__":
    main()
