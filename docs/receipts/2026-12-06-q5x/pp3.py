import sys, time, os
from pathlib import Path
import bench.moe_cpu as B
f = B.Foldserve(Path("/tmp/moe-bench/glm-4.5-air-L3-Q4_K_M.gguf"), 2)
out = []
for step in ["p", "p", "d", "p", "p", "d", "p"]:
    if step == "p":
        out.append(f"p {f.prefill(512)[0]:.1f}")
    else:
        out.append(f"d {f.decode(1, 32)[0]:.1f}")
print(" | ".join(out), f"load {os.getloadavg()[0]:.1f}")
