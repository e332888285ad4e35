"""Kimi Delta Attention's definition case: seeded inputs of kernels/kda.py's contract, numpy
only, so the recorder (tools/refs/record_kimi_linear.py, torch) and the tests (no torch) make
the same arrays from the same recipe.
"""
from __future__ import annotations

import numpy as np

# the definition cases: one chunk of n positions (n > 64 crosses transformers' chunk of 64),
# H heads of D; `lower_bound` None is Kimi-Linear's softplus gate, a number the safe gate
KDA_CASES = {
    "kimi": {"seed": 11, "n": 70, "H": 2, "D": 8, "K": 4, "eps": 1e-5, "lower_bound": None},
    "safe": {"seed": 12, "n": 70, "H": 2, "D": 8, "K": 4, "eps": 1e-5, "lower_bound": -5.0},
}


def kda_inputs(c: dict) -> dict:
    """A definition case's inputs from numpy's seeded generator."""
    rng = np.random.default_rng(c["seed"])
    n, H, D, K = c["n"], c["H"], c["D"], c["K"]
    C = 3 * H * D
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {"mix": f(n, C), "f": f(n, H * D), "b": f(n, H), "gate": f(n, H * D),
            "conv_w": (f(C, K) * 0.5).astype(np.float32),
            "A_log": np.log(rng.uniform(1.0, 16.0, H)).astype(np.float32),
            "dt_bias": (0.5 * f(H * D) - 2.0).astype(np.float32),
            "norm_w": (1 + 0.1 * f(D)).astype(np.float32)}
