import sys, os, time, threading, json
sys.path.insert(0, os.getcwd())
import numba; numba.set_num_threads(2)
from server.engine.build import open_model
from bench.cpu_fused_ab import steps as run_steps
B = int(sys.argv[1]); noise = float(sys.argv[2])
eng = open_model(None, progress=False).engine
run_steps(eng, B, 64, 4, 1)
stop = False
def disturb():           # a busy thread: `noise` of each 2 ms busy in Python (like the HTTP loop)
    while not stop:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.002 * noise: pass
        time.sleep(0.002 * (1 - noise))
th = None
if noise > 0:
    th = threading.Thread(target=disturb, daemon=True); th.start()
r = [run_steps(eng, B, 64, 40, 2 + i)[0] for i in range(3)]
stop = True
print(json.dumps({"wt": os.getcwd(), "batch": B, "noise": noise, "step_ms": r}))
