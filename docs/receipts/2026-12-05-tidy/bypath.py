import importlib.util, sys, tempfile, hashlib
from pathlib import Path
R = Path("/work/wt/tidy/tools/refs")
assert not any("wt/tidy" in p for p in sys.path if p), sys.path
def load(n):
    s = importlib.util.spec_from_file_location(n, R / f"{n}.py"); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
kc, gc, nc, n35 = load("kimi_checkpoint"), load("glm53_checkpoint"), load("next_checkpoint"), load("next35_checkpoint")
print("tools importable:", importlib.util.find_spec("tools") is not None)
with tempfile.TemporaryDirectory() as t:
    t = Path(t)
    for name, m in (("kimi", kc), ("glm53", gc), ("next", nc), ("next35", n35)):
        for f, h in m.write(t / name / "hf").items():
            print(h, f"{name}/hf/{f}")
    print(kc.write_gguf(t / "kimi/hf", t / "kimi/kimi-F32.gguf"), "kimi/kimi-F32.gguf")
    print(gc.write_gguf(t / "glm53/hf", t / "glm53/glm53-F32.gguf"), "glm53/glm53-F32.gguf")
