"""Every numba function cached in a folder with more than one compiled signature:
python sigs.py CACHE_DIR [name filter]."""
import pickle, glob, os, sys, collections
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import kernels; kernels.init()
d = sys.argv[1]
pat = sys.argv[2] if len(sys.argv) > 2 else ""
for f in sorted(glob.glob(d + "/**/*.nbi", recursive=True)):
    if pat not in f: continue
    with open(f, "rb") as fh:
        version = pickle.load(fh)
        data = fh.read()
    try:
        stamp, overloads = pickle.loads(data)
    except Exception as e:
        print(f, "unpickle", e); continue
    if len(overloads) > 1:
        print(os.path.basename(f), len(overloads))
        for k in overloads:
            print("   ", ", ".join(str(a).replace("Array(","A(").replace(", False, aligned=True","") for a in k[0])[:400])
