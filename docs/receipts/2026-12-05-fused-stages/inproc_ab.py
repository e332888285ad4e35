"""Before / after in ONE process, alternating round by round on the same loaded model (the
box is shared, so only alternation in one process compares like with like): the fused round
of main bd23a1e (kernels/forward_cpu.py as it was, loaded from BASE under another module name
and other recipe names) against this branch's composed round, and the op-by-op path.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-fused-stages/inproc_ab.py BASE_DIR \
      [--threads 1,2] [--rounds 6] [--steps 40] [--batch 1]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.getcwd())
import kernels  # noqa: E402

kernels.init()
from bench.cpu_decode import median  # noqa: E402
from bench.cpu_fused_ab import steps  # noqa: E402
from server.engine.build import open_model  # noqa: E402


def load_base(base_dir):
    """main's forward_cpu under the name forward_cpu_base, its recipes renamed (so its kernels
    and member pickle apart from this branch's)."""
    src = open(os.path.join(base_dir, "kernels", "forward_cpu.py")).read()
    for role in ("member", "matrix"):
        src = src.replace(f'"{role}"', f'"{role}_base"')
    d = tempfile.mkdtemp(prefix="fused-base-mod-")
    path = os.path.join(d, "forward_cpu_base.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location("kernels.forward_cpu_base", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=64)
    a = ap.parse_args()
    import numba
    base = load_base(a.base)
    eng = open_model(None, progress=False).engine
    m = eng.model
    new = m.fused
    assert new is not None
    old = base.Fused(m.w, m.spec)
    sides = (("before", old), ("after", new), ("ops", None))
    if os.environ.get("AB_TEAM"):          # the composed round on main's Team instead of the crew
        import copy
        on_team = copy.copy(new)
        on_team.team = base.Team(new.team.member)
        sides = (("before", old), ("after", new), ("after_team", on_team), ("ops", None))
    for name, f in sides:                              # compile / load both before timing
        m.fused = f
        steps(eng, a.batch, a.prompt_len, 5, 0)
    rows = []
    for t in [int(x) for x in a.threads.split(",")]:
        numba.set_num_threads(t)
        for rep in range(a.rounds):
            r = {"threads": t, "round": rep}
            order = sides if rep % 2 == 0 else sides[::-1]
            for name, f in order:
                m.fused = f
                r[f"{name}_ms"], r[f"{name}_cpu_ms"] = steps(eng, a.batch, a.prompt_len, a.steps, rep)
            r["loadavg"] = os.getloadavg()[0]
            print("round", json.dumps(r), flush=True)
            rows.append(r)
    m.fused = new
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for t in sorted({r["threads"] for r in rows}):
        rs = [r for r in rows if r["threads"] == t]
        ratio = sorted(r["after_ms"] / r["before_ms"] for r in rs)
        print(f"-t {t} batch {a.batch}: step before {median([r['before_ms'] for r in rs]):.2f} ms, "
              f"after {median([r['after_ms'] for r in rs]):.2f} ms, op-by-op {median([r['ops_ms'] for r in rs]):.2f} ms; "
              f"after/before median {median(ratio):.3f} (rounds {ratio[0]:.3f} .. {ratio[-1]:.3f}); "
              f"CPU a step before {median([r['before_cpu_ms'] for r in rs]):.2f} ms, "
              f"after {median([r['after_cpu_ms'] for r in rs]):.2f} ms")
        if "after_team_ms" in rs[0]:
            tr = sorted(r["after_team_ms"] / r["before_ms"] for r in rs)
            print(f"   after on main's Team: step {median([r['after_team_ms'] for r in rs]):.2f} ms, "
                  f"/before median {median(tr):.3f} (rounds {tr[0]:.3f} .. {tr[-1]:.3f}), CPU a step "
                  f"{median([r['after_team_cpu_ms'] for r in rs]):.2f} ms")
    print(json.dumps({"commit": commit, "batch": a.batch, "rows": rows}))


if __name__ == "__main__":
    main()
