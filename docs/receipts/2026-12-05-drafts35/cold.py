"""The default model's open and first two rounds (a 40-row prompt chunk, a 9-row verify chunk)
on whatever numba cache NUMBA_CACHE_DIR names: an empty one gives the cold compile time."""
import os, sys, time
t0 = time.perf_counter()
import kernels
kernels.init()
from server.engine.build import open_model
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep
eng = open_model(None, progress=False).engine
t1 = time.perf_counter()
eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 128))
eng.apply(BeginStep(0, tuple(range(8))))
eng.apply(RoundStep((Chunk(0, 0, tuple(range(100, 140)), False),)))
eng.apply(RoundStep((Chunk(0, 40, tuple(range(200, 209)), EVERY_ROW),)))
t2 = time.perf_counter()
print(f"{sys.argv[1]}: open {t1 - t0:.1f} s, first two rounds (compiles) {t2 - t1:.1f} s, total {t2 - t0:.1f} s, cache {os.environ['NUMBA_CACHE_DIR']}")
