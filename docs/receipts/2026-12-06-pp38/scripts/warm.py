import server, sys
from pathlib import Path
from bench.moe_cpu import Foldserve
for f in sys.argv[1:]:
    Foldserve(Path(f), 2)
print("warm ok")
