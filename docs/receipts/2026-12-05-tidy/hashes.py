"""sha256 of every file the numpy-written tiny checkpoints write (run with PYTHONPATH=<tree>)."""
import hashlib, sys, tempfile
from pathlib import Path
from tools.refs import next_checkpoint as nc, next35_checkpoint as n35, kimi_checkpoint as kc
from tools.refs import glm53_checkpoint as gc, next_gguf as ng
print("tree", Path(nc.__file__).parent)
with tempfile.TemporaryDirectory() as t:
    t = Path(t)
    nc.write(t / "next/hf"); n35.write(t / "next35/hf")
    kc.write(t / "kimi/hf"); kc.write_gguf(t / "kimi/hf", t / "kimi/kimi-F32.gguf")
    gc.write(t / "glm53/hf"); gc.write_gguf(t / "glm53/hf", t / "glm53/glm53-F32.gguf")
    for qt in ("F32", "Q8_0"):
        for arch in ("qwen3next", "qwen35moe"):
            ng.write_gguf(t / f"gguf/{arch}-{qt}.gguf", qt, arch=arch)
    ng.write_gguf(t / "gguf/next-F32-w8.gguf", "F32", weights_of="Q8_0")
    for p in sorted(t.rglob("*")):
        if p.is_file():
            print(hashlib.sha256(p.read_bytes()).hexdigest(), p.relative_to(t))
