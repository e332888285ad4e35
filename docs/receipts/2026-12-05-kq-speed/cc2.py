import time, sys
import kernels; kernels.init()
import numpy as np, numba
from kernels import kquant_cpu as KQ, blocks_vec as V
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
rng=np.random.default_rng(0)
t=time.time(); KQ.quantize(np.ones((4,256),np.float32)); print("quantize", round(time.time()-t,1))
tt=0
for kind in ["Q4_K","Q6_K"]:
    w=random_rows(rng,kind,64,512); x=rng.standard_normal((5,512)).astype(np.float32)
    t=time.time(); KQ.matmul(x,kind,w); d=time.time()-t; tt+=d; print(kind,"matmul first call", round(d,2))
print("total", round(tt,2))
