# bytes a decode token reads from the file, by part (the header only: tensor sizes)
import sys, re
from collections import defaultdict
sys.path.insert(0, "/work/peers-build/llama.cpp/gguf-py")
import gguf
r = gguf.GGUFReader(sys.argv[1])
kv = {f.name: f for f in r.fields.values()}
def val(k):
    f = r.fields[k]; return f.parts[f.data[0]][0]
n_exp = int(val("glm5-next.expert_count")); n_used = int(val("glm5-next.expert_used_count"))
parts = defaultdict(int); tot = 0
for t in r.tensors:
    b = int(t.n_bytes); tot += b
    n = t.name
    if "_exps" in n:
        key = "experts (routed, 8 of 288)"; b = b * n_used // n_exp
    elif n == "token_embd.weight":
        key = "embedding (one row)"; b = b // t.shape[-1]
    elif n == "output.weight":
        key = "head"
    else:
        m = re.match(r"blk\.(\d+)\.(.*)", n)
        key = f"layer {m.group(1)}" if m else n
        if m and ("ffn_" in m.group(2)):
            key += " mlp" + (" (shared expert)" if "shexp" in n else "")
        elif m and m.group(2).startswith("hc_"):
            key += " mhc"
        elif m and "indexer" in m.group(2):
            key += " indexer"
        elif m:
            key += " attention"
    parts[key] += b
    print(f"{n:45s} {t.tensor_type.name:6s} {list(t.shape)} {t.n_bytes/1e6:9.2f} MB")
print("file tensors", tot / 1e9, "GB")
s = 0
for k, v in sorted(parts.items()):
    s += v; print(f"{k:40s} {v/1e6:9.2f} MB")
print(f"a decode token reads {s/1e9:.3f} GB")
