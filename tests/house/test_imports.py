"""The house's import rules, read from the sources (ast), so they hold without importing anything.

- No circles: no module reaches itself, counting imports inside functions too (each circle
  the tree once had was held open by one).
- The control plane (planner, scheduler, steps, fingerprint, rendezvous) reaches neither
  server/engine nor kernels, nor numpy or cupy; and in a fresh interpreter importing it
  loads neither numpy nor cupy.
- No two modules under server/ share a file name.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "kernels")
CONTROL = ("server.planner", "server.scheduler", "server.round_build", "server.round_take",
           "server.finishing", "server.active", "server.ranks.steps", "server.ranks.fingerprint",
           "server.ranks.rendezvous", "server.requests", "server.drafts")
DATA = ("server.engine", "kernels")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports(name: str, path: Path, known: dict) -> set[str]:
    """Every module `name` imports, anywhere in the file (module level or inside a function)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            for a in node.names:              # `from pkg import submodule` imports the submodule
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in known else mod)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {n: imports(n, p, known) for n, p in known.items()}


def reach(g: dict, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for m in g.get(todo.pop(), ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_no_import_circles():
    g = graph()
    # a package's __init__ re-exporting its modules is not a circle of the modules themselves
    inner = {n: {m for m in ms if m in g and not (g[m] and n.startswith(m + "."))}
             for n, ms in g.items()}
    circles = sorted(n for n in inner if n in reach(inner, n))
    assert not circles, f"modules that import themselves through others: {circles}"


def test_control_plane_reaches_no_engine_kernels_or_arrays():
    g = graph()
    control = [n for n in g if under(n, CONTROL)]
    assert "server.planner.layout" in control and "server.scheduler" in control
    bad = {}
    for n in control:
        hit = sorted(m for m in reach(g, n) | g[n]
                     if under(m, DATA) or under(m, ("numpy", "cupy", "cupyx")))
        if hit:
            bad[n] = hit
    assert not bad, f"control-plane modules reaching the data plane: {bad}"


def test_control_plane_imports_without_numpy_or_cupy():
    mods = [n for n in modules() if under(n, CONTROL)]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods) +
            "print(sorted(m for m in ('numpy', 'cupy', 'kernels', 'server.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"importing the control plane loaded {out.stdout.strip()}"


def test_no_two_server_modules_share_a_file_name():
    names = Counter(p.name for p in (ROOT / "server").rglob("*.py") if p.name != "__init__.py")
    assert not [n for n, k in names.items() if k > 1], sorted(n for n, k in names.items() if k > 1)


def test_kernels_import_nothing_from_server():
    """kernels/ is the ground floor: the engine imports kernels, never the other way."""
    g = graph()
    bad = {n: sorted(m for m in ms if under(m, ("server",))) for n, ms in g.items()
           if under(n, ("kernels",))}
    bad = {n: ms for n, ms in bad.items() if ms}
    assert not bad, f"kernels modules importing from server/: {bad}"


def _imports_numba(path: Path) -> list[int]:
    """The lines of `path` that import numba (or a numba submodule)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n == "numba" or n.startswith("numba.") for n in names):
            lines.append(node.lineno)
    return lines


def test_each_numba_kernel_is_listed_and_refuses_to_import_before_init():
    """kernels.NUMBA_MODULES is every kernels file that imports numba, and each calls
    require_init(__name__) at module level before its first numba import."""
    import kernels
    found, late = set(), []
    for p in sorted((ROOT / "kernels").glob("*.py")):
        lines = _imports_numba(p)
        if not lines or p.name == "__init__.py":      # init() reloads a loaded numba's config
            continue
        found.add(p.stem)
        guard = [n.lineno for n in ast.parse(p.read_text()).body
                 if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                 and getattr(n.value.func, "id", None) == "require_init"]
        if not guard or guard[0] > min(lines):
            late.append(p.name)
    assert found == set(kernels.NUMBA_MODULES)
    assert late == [], f"numba imported before require_init(__name__) in {late}"


def test_importing_kernels_changes_no_environment_and_init_does():
    """In a fresh interpreter: importing kernels and every kernel module that needs neither
    numba nor cupy leaves os.environ as it was; a numba kernel imported before kernels.init()
    is refused by name; init() sets numba's cache folder (numba_cache_dir) and numba caches
    there."""
    code = """
import os, sys, importlib
before = dict(os.environ)
import kernels
plain = sorted(p[:-3] for p in os.listdir(os.path.dirname(kernels.__file__))
               if p.endswith('.py') and p != '__init__.py' and not p.endswith('_cuda.py')
               and p[:-3] not in kernels.NUMBA_MODULES)
for m in plain:
    importlib.import_module('kernels.' + m)
assert dict(os.environ) == before, sorted(set(os.environ.items()) ^ set(before.items()))
assert 'numba' not in sys.modules and not kernels.ready()
try:
    import kernels.blocks_vec
    raise SystemExit('imported before init')
except RuntimeError as e:
    assert 'kernels.blocks_vec imported before kernels.init()' in str(e), e
sys.modules.pop('kernels.blocks_vec', None)
folder = kernels.init()
assert folder == kernels.numba_cache_dir() == os.environ['NUMBA_CACHE_DIR']
assert os.environ['NUMBA_SLP_VECTORIZE'] == '1' and os.environ['GOMP_SPINCOUNT'] == '10000'
changed = {k for k in set(os.environ) | set(before) if os.environ.get(k) != before.get(k)}
assert changed == {'NUMBA_CACHE_DIR', 'NUMBA_SLP_VECTORIZE', 'GOMP_SPINCOUNT'}, changed
from numba.core import config
import kernels.blocks_vec as V
assert config.CACHE_DIR == folder
assert V.KERNELS['Q8_0']._cache._cache_path.startswith(folder)
print('ok', len(plain))
"""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stderr + out.stdout
    assert out.stdout.split()[0] == "ok" and int(out.stdout.split()[1]) >= 10


def test_init_keeps_freed_large_blocks_unless_the_user_set_glibcs_own():
    """After kernels.init() a freed 24 MB array's pages serve the next one (no new page
    faults: kernels.keep_freed_blocks); with MALLOC_MMAP_THRESHOLD_ set, init leaves malloc
    alone and the same reallocation faults its pages in again."""
    code = """
import resource, sys
import kernels
import numpy as np
kernels.init()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(6 << 20, np.float32)
del a
f0 = faults()
b = np.ones(6 << 20, np.float32)
print(faults() - f0)
"""
    got = {}
    for user in (None, str(1 << 20)):
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
        if user:
            env["MALLOC_MMAP_THRESHOLD_"] = user
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, env=env)
        assert out.returncode == 0, out.stderr + out.stdout
        got[user] = int(out.stdout.split()[-1])
    assert got[None] < 16, got                          # the freed block's pages, reused
    assert got[str(1 << 20)] > 100, got                 # mapped afresh: its pages faulted again


def test_ops_dispatch_by_backend_not_by_sniffing():
    """kernels.ops: the backend chosen once (kernels.ops.backend); no hasattr sniffing and no
    import by string in the op modules, and the CUDA backend's module (cupy) imported only by
    backend("cuda")."""
    for name in ("ops.py", "ops_cpu.py", "ops_cuda.py"):
        tree = ast.parse((ROOT / "kernels" / name).read_text())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name)}
        mods = imports(f"kernels.{name[:-3]}", ROOT / "kernels" / name, modules())
        assert not calls & {"hasattr", "__import__"}, name
        assert "importlib" not in mods, name
    code = """
import sys
from kernels import ops
o = ops.backend('numpy')
assert o.name == 'numpy' and ops.backend('cpu').name == 'cpu'
try:
    ops.backend('metal')
    raise SystemExit('an unknown backend was taken')
except ValueError as e:
    assert "'metal'" in str(e), e
print(sorted(m for m in sys.modules if m == 'cupy' or m.endswith('_cuda')))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                              "HOME": str(Path.home())})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"the CPU backends loaded {out.stdout.strip()}"
