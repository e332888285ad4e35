import sys, time, os
from pathlib import Path
import bench.moe_cpu as B
f = B.Foldserve(Path("/tmp/moe-bench/glm-4.5-air-L3-Q4_K_M.gguf"), 2)
tg, _ = f.decode(1, 32)
print(f"tg {tg:.2f}", end=" | ")
for _ in range(2):
    pp, share = f.prefill(512)
    print(f"pp512 {pp:.1f}", end=" | ", flush=True)
b8, _ = f.decode(8, 32)
print(f"b8 {b8:.2f} load {os.getloadavg()[0]:.1f}")
