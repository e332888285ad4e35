"""The CPU block kernels pickle the same in every process, before and after they compile, so
numba's cache finds them and the functions that close over them (kernels/blocks_vec.py,
stable_pickle): without it every new process compiled each kind again on its first call
(~3.5 s a kind) and the fused forward over them (~20 s for the default model's first round)."""
from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")
from numba.core.serialize import dumps  # noqa: E402

from kernels import blocks_vec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PICKLES = ("import hashlib, kernels; kernels.init(); from numba.core.serialize import dumps; "
           "from kernels import blocks_vec; "
           "print(' '.join(hashlib.sha256(dumps(blocks_vec.KERNELS[k])).hexdigest() for k in sorted(blocks_vec.KERNELS)))")


def _here() -> str:
    return " ".join(hashlib.sha256(dumps(blocks_vec.KERNELS[k])).hexdigest() for k in sorted(blocks_vec.KERNELS))


def _call(kind: str) -> None:
    n, k = 8, 256                                     # a block of the K-quants (Q4_K, Q6_K)
    per = blocks_vec.VEC_BYTES[kind] * 8 if kind in blocks_vec.VEC_BYTES else blocks_vec.K_BYTES[kind]
    data = np.zeros((n, k // 256 * per), np.uint8)
    blocks_vec.KERNELS[kind](np.ones((1, k), np.float32), np.zeros((1, k // 32), np.float32), data,
                             np.zeros((1, n), np.float32))


def test_kernels_pickle_alike_in_another_process_and_after_compiling():
    for kind in blocks_vec.KERNELS:
        _call(kind)                                   # compiled (or loaded) here
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    other = subprocess.run([sys.executable, "-c", PICKLES], env=env, cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    assert other == _here().split()


def test_a_pickled_kernel_is_the_same_kernel():
    for kind, mm in blocks_vec.KERNELS.items():
        assert pickle.loads(dumps(mm)) is mm, kind


def test_the_cache_folder_is_named_by_every_kernel_source(tmp_path):
    import shutil

    import kernels
    for p in (ROOT / "kernels").glob("*.py"):
        shutil.copy(p, tmp_path / p.name)
    before = kernels.numba_cache_dir(tmp_path)
    assert before == kernels.numba_cache_dir(tmp_path)
    vec_ir = tmp_path / "vec_ir.py"                  # a file the cached functions call into
    vec_ir.write_text(vec_ir.read_text() + "\n# changed\n")
    assert kernels.numba_cache_dir(tmp_path) != before


def test_numba_caches_where_kernels_names_it():
    import kernels
    from numba.core import config
    if os.environ.get("NUMBA_CACHE_DIR") != kernels.numba_cache_dir():
        pytest.skip("NUMBA_CACHE_DIR set by the environment: kept as set")
    assert config.CACHE_DIR == kernels.numba_cache_dir()
    assert blocks_vec.KERNELS["Q4_1"].stats.cache_path.startswith(config.CACHE_DIR)
