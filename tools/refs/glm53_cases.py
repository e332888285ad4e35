"""Seeded inputs of GLM-5.3-Flash's definition cases (numpy only: the recording script in the
reference venv and the tests in the project's venv make the same bytes; the recorded file
keeps their sha256 so a changed generator is seen)."""
from __future__ import annotations

import hashlib

import numpy as np

# mHC: T tokens of N streams of D, the config's constants
MHC = {"seed": 5301, "T": 6, "N": 4, "D": 64, "iters": 20, "hc_eps": 1e-6, "norm_eps": 1e-5}


def mhc_inputs(c: dict = MHC) -> dict:
    """streams [T, N, D], fn [(2 + N) N, N D], base [(2 + N) N], scale [3], y [T, D] (the
    block's output), float32."""
    rng = np.random.default_rng(c["seed"])
    T, N, D = c["T"], c["N"], c["D"]
    m = (2 + N) * N
    f = np.float32
    return {
        "streams": rng.standard_normal((T, N, D)).astype(f),
        "fn": (rng.standard_normal((m, N * D)) * 0.08).astype(f),
        "base": (rng.standard_normal(m) * 0.5).astype(f),
        # comb's scale large: sharp logits, a Sinkhorn still moving at its 20th iteration
        "scale": (rng.uniform(0.5, 2.0, 3) * np.array([1.0, 1.0, 6.0])).astype(f),
        "y": rng.standard_normal((T, D)).astype(f),
    }


def digest(arrays: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


# the DSA indexer: T tokens of D, q_resid of Q, Hi heads of Di, pools of kpool, index_topk
DSA = {"seed": 5302, "T": 61, "D": 32, "Q": 24, "Hi": 8, "Di": 16, "kpool": 4, "topk": 16}


def dsa_inputs(c: dict = DSA) -> dict:
    """h [T, D], q_resid [T, Q] and the indexer's weights (transformers' names), float32."""
    rng = np.random.default_rng(c["seed"])
    T, D, Q, Hi, Di, kp = c["T"], c["D"], c["Q"], c["Hi"], c["Di"], c["kpool"]
    f = np.float32
    return {
        "h": rng.standard_normal((T, D)).astype(f),
        "q_resid": rng.standard_normal((T, Q)).astype(f),
        "wq_b": (rng.standard_normal((Hi * Di, Q)) * 0.3).astype(f),
        "wk": (rng.standard_normal((Di, D)) * 0.3).astype(f),
        "k_norm_w": rng.uniform(0.5, 1.5, Di).astype(f),
        "k_norm_b": (rng.standard_normal(Di) * 0.1).astype(f),
        "weights_proj": (rng.standard_normal((Hi, D)) * 0.3).astype(f),
        "ape": (rng.standard_normal((kp, Di)) * 0.5).astype(f),
        "gate": (rng.standard_normal((Di, D)) * 0.3).astype(f),
    }
