"""kernels/gdn_cpu.py's 16-lane expf (the conv's silu, the gated norm's silu(z)): glibc's expf
(its x86-64 FMA build) operation for operation. Held to that algorithm in exact arithmetic
(each fma through Fractions, rounded once: host-independent), and to this host's libm as
numba calls it (math.exp on a float32: the scalar form the GDN kernels use for their tails and
used for every channel before): equal bits, so the Gated DeltaNet's bytes are the scalar
form's. Every float32 was compared on the build host (docs/receipts/2026-12-05-gdnstep)."""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest


def _bits(d: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", d))[0]


def _fma(a: float, b: float, c: float) -> float:
    return float(Fraction(a) * Fraction(b) + Fraction(c))     # exact, then one rounding


def _expf(x: float) -> np.float32:
    """The algorithm (sysdeps/ieee754/flt-32/e_expf.c as its FMA build runs it), in double."""
    from kernels.gdn_cpu import _T, EXPF_C, EXPF_EDGES, _d
    hi, lo, lo2 = EXPF_EDGES
    if x != x:
        return np.float32(x + x)
    if x > hi:
        return np.float32(np.inf)
    if x < lo:
        return np.float32(0.0)
    if x < lo2:
        return np.float32(2.0 ** -149)
    inv, sh, c0, c1, c2 = (_d(b) for b in EXPF_C)
    kd = _fma(inv, x, sh)
    ki = _bits(kd)
    kd = kd - sh
    r = _fma(inv, x, -kd)
    s = struct.unpack("<d", struct.pack("<Q", (_T[ki & 31] + (ki << 47)) & (2 ** 64 - 1)))[0]
    y = _fma(_fma(r, c0, c1), r * r, _fma(r, c2, 1.0)) * s
    return np.float32(y)


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(3)
    edges = [88.72283172607422, -103.97207641601562, -103.27892303466797, 88.0, -88.0, 0.0,
             -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30]
    e = np.array(edges, np.float32)
    near = np.concatenate([np.nextafter(e, np.float32(np.inf)), np.nextafter(e, np.float32(-np.inf))])
    xs = np.concatenate([e, near, np.linspace(-110, 95, 1500, dtype=np.float32),
                         (rng.standard_normal(1500) * 8).astype(np.float32)])
    return xs[: len(xs) // 16 * 16].astype(np.float32)


def _lanes(xs):
    from kernels.gdn_cpu import _exp16
    from numba import njit

    @njit
    def run(src, dst):
        for j in range(0, src.shape[0], 16):
            _exp16(src, dst, j)
    out = np.empty_like(xs)
    run(xs, out)
    return out


def test_the_lanes_are_the_algorithm():
    xs = _inputs()
    got = _lanes(xs)
    want = np.array([_expf(float(x)) for x in xs], np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), xs[~same][:5]


def test_the_lanes_are_this_hosts_scalar_exp():
    from numba import njit

    @njit
    def scalar(src, dst):
        for j in range(src.shape[0]):
            dst[j] = np.float32(math.exp(src[j]))
    xs = _inputs()
    ref = np.empty_like(xs)
    scalar(xs, ref)
    if not all((_expf(float(x)).view(np.uint32) == r.view(np.uint32)) or (np.isnan(r) and x != x)
               for x, r in zip(xs, ref)):
        pytest.skip("this host's libm expf is not glibc's FMA build: the GDN's lanes keep "
                    "that algorithm's bits, its scalar tails the host's")
    got = _lanes(xs)
    same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
    assert same.all(), xs[~same][:5]
