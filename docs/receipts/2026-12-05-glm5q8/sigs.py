"""The compiled signatures a numba cache folder holds: one line a (function, signature), read
from its index files (.nbi). With two folders: the lines of the first the second lacks.
    python sigs.py CACHE_DIR [OTHER_CACHE_DIR]"""
import pickle, sys
from pathlib import Path


def sigs(d):
    out = set()
    for p in Path(d).rglob("*.nbi"):
        with open(p, "rb") as f:
            pickle.load(f)
            _stamp, overloads = pickle.loads(f.read())
        fn = p.name.split(".py")[0]
        for k in overloads:
            out.add(f"{p.parent.name}/{fn} {k[0]}")
    return out


a = sigs(sys.argv[1])
if len(sys.argv) > 2:
    b = sigs(sys.argv[2])
    new = sorted(a - b)
    print(f"{len(a)} signatures, {len(new)} not in {sys.argv[2]}:")
    print("\n".join(new))
else:
    print(f"{len(a)} signatures"); print("\n".join(sorted(a)))
