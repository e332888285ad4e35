# The draft breaks of tools/guard_breaks.py against the MoE families alone (the tool runs
# test_drafted_equals_plain with -x, so its llama case fails first). Run from the tree root:
#   PYTHONPATH=$PWD python docs/receipts/2026-12-05-drafts/guard_breaks_moe.py
import tempfile, shutil
from pathlib import Path
from tools.guard_breaks import BREAKS, copy_tree, apply, run_test
work = Path(tempfile.mkdtemp(prefix="gb-moe-")); copy_tree(work)
T = "tests/drafts/test_drafts_exact.py::test_drafted_equals_plain"
for fam in ("tiny-qwen3moe", "tiny-glm4moe"):
    tests = [f"{T}[{fam}-concurrent-pages]", f"{T}[{fam}-solo-windows]"]
    for t in tests:
        ok, line, s = run_test(work, t); print("unchanged", t.split("::")[1], "passes" if ok else "FAILS")
    for b in BREAKS:
        if b.test != T: continue
        for t in tests:
            saved = apply(work, b)
            try: ok, line, s = run_test(work, t)
            finally:
                for p, txt in saved.items(): (work / p).write_text(txt)
            print(b.name, "|", t.split("::")[1], "|", "PASSES (missed)" if ok else "fails (caught)")
shutil.rmtree(work)
