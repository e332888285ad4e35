import server, time
import kernels; kernels.init()
import numba, numpy as np
numba.set_num_threads(1)
from kernels import dsa_cpu, dsa
f32=np.float32; rng=np.random.default_rng(0)
QL, Hi, Di, d = 1536, 32, 128, 4096
wq_t = (rng.standard_normal((QL, Hi*Di))*0.05).astype(f32); wproj_t=(rng.standard_normal((d, Hi))*0.05).astype(f32)
wk_t = (rng.standard_normal((d, Di))*0.05).astype(f32)
for T in (1, 512):
    qr = rng.standard_normal((T, QL)).astype(f32); h = rng.standard_normal((T, d)).astype(f32)
    dsa_cpu.index_query(qr, wq_t, h, wproj_t, Hi)
    t=time.process_time(); [dsa_cpu.index_query(qr, wq_t, h, wproj_t, Hi) for _ in range(5)]; print("index_query T", T, (time.process_time()-t)/5*1e3, "ms CPU")
    t=time.process_time(); [dsa.index_keys(h, wk_t, np.ones(Di,f32), np.zeros(Di,f32), wk_t) for _ in range(5)]; print("index_keys T", T, (time.process_time()-t)/5*1e3, "ms CPU")
