import sys, os, json
sys.path.insert(0, os.getcwd())
import numba; numba.set_num_threads(2)
from server.engine.build import open_model
from bench.cpu_fused_ab import steps as run_steps
eng = open_model(None, progress=False).engine
run_steps(eng, 1, 64, 4, 1); run_steps(eng, 8, 64, 4, 1)
r1 = [run_steps(eng, 1, 64, 64, 2 + i)[0] for i in range(2)]
r8 = [run_steps(eng, 8, 64, 24, 2 + i)[0] for i in range(1)]
print(json.dumps({"wt": os.path.basename(os.getcwd()), "b1": [round(x, 2) for x in r1], "b8": [round(x, 2) for x in r8]}))
