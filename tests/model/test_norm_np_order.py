"""The "numpy" ops backend's norms as numba calls in numpy's own order
(kernels/rmsnorm_cpu.np_rms_norm, np_add_rms_norm): kernels/rmsnorm.ref's bytes, whatever the
width (below 8, one pairwise block, many, tails not a multiple of 8) and scale, so a family
served on that backend keeps its bytes (its golden records) while its norms cost a numba call."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import rmsnorm

WIDTHS = (1, 5, 8, 13, 64, 100, 128, 129, 136, 256, 383, 1000, 2048, 5120, 7168, 20000)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 40.0])
def test_numba_norms_are_numpys_bytes(scale):
    from kernels import rmsnorm_cpu
    rng = np.random.default_rng(7)
    for D in WIDTHS:
        x = (rng.standard_normal((3, D)) * scale).astype(np.float32)
        res = (rng.standard_normal((3, D)) * scale).astype(np.float32)
        w = rng.standard_normal(D).astype(np.float32)
        w.flags.writeable = D % 2 == 0                # a mapped file's weights are read-only
        y = np.empty_like(x)
        rmsnorm_cpu.np_rms_norm(x, w, np.float32(1e-6), y)
        assert y.tobytes() == rmsnorm.ref(x, w, 1e-6).tobytes(), D
        y2, h = np.empty_like(x), np.empty_like(x)
        rmsnorm_cpu.np_add_rms_norm(x, res, w, np.float32(1e-5), y2, h)
        ry, rh = rmsnorm.add_ref(x, res, w, 1e-5)
        assert y2.tobytes() == ry.tobytes() and h.tobytes() == rh.tobytes(), D


def test_the_numpy_backend_takes_them_and_keeps_the_definitions_bytes():
    """Ops (the "numpy" backend) runs its norms through them where numba loads; a strided
    view and a float64 weight go the definition's way, with its bytes."""
    from kernels.ops_cpu import Ops
    ops = Ops()
    if not ops.numba:
        pytest.skip(ops.why_not)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2 * 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    v = x[:, :256]                                   # a strided view of rows
    assert ops._np_order(v, w)
    assert ops.rms_norm(v, w, 1e-6).tobytes() == rmsnorm.ref(v, w, 1e-6).tobytes()
    got = ops.add_rms_norm(v, x[:, 256:], w, 1e-6)
    ref = rmsnorm.add_ref(v, x[:, 256:], w, 1e-6)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, ref))
    assert not ops._np_order(v, w.astype(np.float64))
    assert ops.rms_norm(v, w.astype(np.float64), 1e-6).tobytes() == \
        rmsnorm.ref(v, w.astype(np.float64), 1e-6).tobytes()
