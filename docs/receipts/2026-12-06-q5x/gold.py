import kernels; kernels.init()
import sys, numpy as np
sys.path.insert(0, '.')
from tests.model import test_moe_golden as T
from tests.model.q8_0_x import float_x, on_q8_0_x
from tools.refs import moe_checkpoint as mc
from server.engine.build import open_model
rec = T.record("glm4moe-tiny")
b = mc.build_once("glm4moe-tiny", ("F32", "Q8_0", "Q4_K_M"), hf=False)
which = sys.argv[1]
if which == "float":
    with float_x():
        op = open_model(str(b.gguf["Q4_K_M"]), progress=False)
    key = "Q4_K_M"
else:
    op = open_model(str(b.gguf["Q4_K_M"]), progress=False); key = "Q4_K_M q8_0"
print(which, on_q8_0_x(op.engine.model))
for c in rec["references"][key]["cases"]:
    try:
        T.check_reference(op, rec, key, "Q4_K_M", only=c["name"]); print(c["name"], "ok")
    except AssertionError as e:
        print(c["name"], "FAIL", str(e).splitlines()[0][:200])
