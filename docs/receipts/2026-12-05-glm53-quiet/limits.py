# the profile's stages against this box's limits: bytes a decode step reads (the file's
# tensors: bytes.txt) and FLOPs a 512-row prefill does, per stage label of bench/moe_stage_profile
import re, sys
MB = 1e6
# decode: bytes read a step (weights; the head's label counts norm_linear and linear: halved)
dec = {
 "head (Q8_0)": (674.04 * MB, 0.5),
 "ops.linear (Q8_0, 24576 rows)": (6 * 106.95 * MB, 1),      # KDA q|k|v x3, dense gate|up x3
 "ops.linear (Q8_0, 4096 rows)": ((3 * 35.65 + 3 * 53.48 + 71.30 + 2 * 8.91 + 8.91) * MB, 1),
 "ops.moe": ((8 * 3 * 8.91 + 4.72) * MB, 1),                  # 8 experts' gate, up, down + router
 "ops.dsa_attend": ((33.55 * 2 + 2.10 * 2 + 0.52) * MB, 1),   # kv_b halves, indexer k / gate / proj
 "ops.linear (Q8_0, 16384 rows)": (26.74 * MB, 1),
 "ops.linear (Q8_0, 1536 rows)": (6.68 * MB, 1),
 "ops.linear (f32, 128x8192)": (6 * 4.19 * MB, 1),
 "ops.linear (f32, 4096x320)": (3 * 5.24 * MB, 1),
 "ops.linear (f32, 4096x512)": (8.39 * MB, 1),
 "ops.kda_round": (3 * 2 * 4.19 * MB, 1),                      # the states read and written
 "ops.mhc_pre": (8 * 1.57 * MB, 1),
}
G = 1e9
T = 512
pre = {   # FLOPs of a 512-row prefill (2 a multiply-add)
 "ops.linear (Q8_0, 24576 rows)": 6 * 2 * T * 4096 * 24576,
 "ops.linear (Q8_0, 4096 rows)": 2 * T * 4096 * (3 * 8192 + 3 * 12288 + 16384 + 4096 + 2048),
 "ops.moe": 2 * T * 8 * 3 * 4096 * 2048,
 # W_UK and W_UV^T a row and head (2 x 2 H N C), scores and o over rows 0..t (2 x 2 H C (t + 1))
 "ops.dsa_attend": 2 * 2 * 64 * 256 * 512 * T + 2 * 2 * 64 * 512 * (T * (T + 1) // 2),
 "ops.linear (Q8_0, 16384 rows)": 2 * T * 1536 * 16384,
 "ops.linear (f32, 128x8192)": 6 * 2 * T * 128 * 8192,
 "ops.linear (f32, 4096x320)": 3 * 2 * T * 4096 * 320,
 # two passes over a head's state a position: 3 + 4 FLOPs an element
 "ops.kda_round": 3 * T * 64 * 7 * 128 * 128,
}
def parse(path):
    out, sec = {}, None
    for ln in open(path):
        m = re.match(r"(decode b1|prefill 512): ([\d.]+) ms a step .* on ([\d.]+) cores", ln)
        if m:
            sec = m.group(1); out[sec] = {"_ms": float(m.group(2)), "_cores": float(m.group(3))}; continue
        m = re.match(r"  (.+?)\s{2,}([\d.]+) ms", ln)
        if m and sec:
            out[sec][m.group(1).strip()] = float(m.group(2))
    return out
p = parse(sys.argv[1])
d, f = p["decode b1"], p["prefill 512"]
print(f"decode b1 {d['_ms']:.1f} ms a step on {d['_cores']:.2f} cores; prefill 512 {f['_ms'] / 1e3:.2f} s on {f['_cores']:.2f} cores")
print("| stage | decode ms | bytes a step | GB/s | GB/s a core | prefill s | GFLOP | GFLOP/s | GFLOP/s a core |")
print("|---|---|---|---|---|---|---|---|---|")
for k in dec.keys() | pre.keys():
    pass
keys = sorted(set(dec) | set(pre), key=lambda k: -d.get(k, 0))
for k in keys:
    ms = d.get(k, 0) * dec.get(k, (0, 1))[1]
    by = dec.get(k, (0, 1))[0]
    s = f.get(k, 0) / 1e3
    fl = pre.get(k, 0)
    gbs = by / (ms / 1e3) / G if ms and by else 0
    gfs = fl / s / G if s and fl else 0
    print(f"| {k} | {ms:.1f} | {by / MB:.0f} MB | {gbs:.1f} | {gbs / d['_cores']:.1f} | {s:.2f} | {fl / G:.1f} | {gfs:.1f} | {gfs / f['_cores']:.1f} |")
