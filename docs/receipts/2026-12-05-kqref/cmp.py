import gguf,numpy as np,time,sys
from tools.refs import kquants_numpy as kq
f={t.name:t for t in gguf.GGUFReader('/tmp/kqref-w/glm4moe-k256/glm4moe-k256-F32.gguf').tensors}
b={t.name:t for t in gguf.GGUFReader('/tmp/kqref-w/lq.gguf').tensors}
names = sys.argv[1:] or [n for n in b if b[n].tensor_type.name in ('Q4_K','Q6_K')]
for n in names:
    t=b[n].tensor_type.name
    x=np.array(f[n].data,dtype=np.float32)
    t0=time.time()
    q=(kq.quantize_q4_k if t=='Q4_K' else kq.quantize_q6_k)(x)
    y=np.frombuffer(b[n].data.tobytes(),np.uint8)
    print(n,t,x.shape,'diff bytes',(q.reshape(-1)!=y).sum(),'of',y.size,'%.2fs'%(time.time()-t0),flush=True)
