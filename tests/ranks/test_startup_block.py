"""What rank 0 says at startup: the block an operator reads, with the same plan line that
`foldserve plan` prints for the same arguments, and each note said once."""
from __future__ import annotations

import subprocess
import sys

from serve_procs import HOST, REPO, free_port, wait_health

ARGS = ["--model", "dummy:tiny", "--tp", "3", "--context", "512", "--parallel", "4",
        "--prompt-cache-gib", "0.001"]
ENV = {"TF_ROOM_GIB": "0.004", "TF_KV_POISON": "1"}


def test_serve_prints_the_block_and_the_same_plan_line_as_plan(group):
    port = free_port()
    proc = group.start([*ARGS, "--port", str(port)], env=ENV, name="rank0")
    wait_health(f"http://{HOST}:{port}", [proc])
    err = proc.stderr
    planned = subprocess.run([sys.executable, "-m", "server.cli", "plan", *ARGS], cwd=REPO,
                             capture_output=True, text=True, env={**_env(), **ENV})
    assert planned.returncode == 0, planned.stderr
    line = planned.stdout.strip()
    assert f"  plan          {line}\n" in err, err
    block = err[err.index("foldserve 0.1.0: the pool is planned"):].splitlines()
    rows = {l[2:15].strip(): l[16:] for l in block[1:10]}
    assert rows["model"].startswith("dummy:tiny (llama, 2 layers), weights ")
    assert rows["ranks"] == "TP 3 on cpu, KV float32; rank 0 of 3 governs (the smallest room)"
    assert rows["KV pool"].startswith("pages: ") and " tokens, " in rows["KV pool"]
    assert rows["streams"].startswith("4 at once, context 512 tokens")
    assert rows["prompt cache"] == "262 pages = 4192 tokens, 1.02 MiB"     # 0.001 GiB of 4 KiB pages
    assert rows["room"] == "4.10 MiB (TF_ROOM_GIB)"          # 0.004 GiB
    assert rows["modes"] == ("TF_KV_PAGES=auto (pages at 3 ranks), TF_KV_POISON=1 "
                             "(pages NaN-filled before use: debugging)")
    assert err.count("TF_KV_PAGES=auto: pages at 3 ranks") == 1     # in the plan line, once


def _env():
    import os
    return {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
