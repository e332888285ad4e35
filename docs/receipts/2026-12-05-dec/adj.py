import server  # noqa
import sys
from pathlib import Path
from bench.moe_cpu import Foldserve
f = Foldserve(Path(sys.argv[1]), 2)
for li, L in enumerate(f.eng.model.w.layers):
    g, u, d = L.experts_gu.gate.data, L.experts_gu.up.data, L.experts_down.data
    ga, ua, da = (a.__array_interface__['data'][0] for a in (g, u, d))
    print(li, "gate", g.shape, g.flags.c_contiguous, g.flags.writeable, "up - (gate end):", ua - (ga + g.nbytes), "down - (up end):", da - (ua + u.nbytes), "gate - (down end):", ga - (da + d.nbytes))
