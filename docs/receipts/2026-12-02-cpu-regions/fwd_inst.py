import sys, os
sys.path.insert(0, os.getcwd())
import numba; numba.set_num_threads(2)
from server.engine.build import open_model
from bench.cpu_fused_ab import steps as run_steps
eng = open_model(None, progress=False).engine
run_steps(eng, 1, 64, 4, 1)
import kernels.forward_cpu as F
F._ACC, F._NR = None, 0
print([run_steps(eng, 1, 64, 125, 2 + i) for i in range(4)])
