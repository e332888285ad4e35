import sys, time, os
from pathlib import Path
import bench.moe_cpu as B
f = B.Foldserve(Path("/tmp/moe-bench/glm-4.5-air-L3-Q4_K_M.gguf"), 2)
print("q80", f.eng.model.ops.q80, end=" | ")
for _ in range(int(sys.argv[1])):
    pp, share = f.prefill(512)
    print(f"pp512 {pp:.1f} (moe {share:.0%})", end=" | ", flush=True)
tg, _ = f.decode(1, 16)
print(f"tg {tg:.2f} load {os.getloadavg()[0]:.1f}")
