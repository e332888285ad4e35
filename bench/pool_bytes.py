"""A stream's KV bytes at a context under the model's own layout (foldserve plan's KV spec)
against a full-attention layout of the same layers, heads and head size (issue 37's target:
a window layout under 60% of the full one at 32k).

    PYTHONPATH=$PWD python -m bench.pool_bytes FILE.gguf [--context 32768] [--page-rows 16]
        [--verify 9]

Per stream: pages' bytes = bytes_per_token * context (rounded up to pages) + the window kind's
rings (KVSpec.ring_bytes: each window layer's last W - 1 + max(P, V) rows, in pages); the full
layout is KVSpec.mha over every layer. The sampling and scratch parts of a stream's fixed
bytes are the same in both and left out (printed apart).
"""
from __future__ import annotations

import argparse

from server.planner.layout import KV_BYTES, layouts
from server.plan_cli import load_spec
from server.shapes.kv_layout import KVSpec


def pool_bytes(model: str, context: int, page_rows: int = 16, verify: int = 9) -> dict:
    spec = load_spec(model)
    L = layouts(spec, 1, KV_BYTES["cpu"], page_rows, 256)[0]
    kv, nb = L.kv_spec, KV_BYTES["cpu"]
    pages = -(-context // page_rows)
    own = pages * page_rows * kv.bytes_per_token(nb) + kv.ring_bytes(nb, page_rows, verify)
    full_spec = KVSpec.mha(kv.n_layers, *kv.arrays[0][1])
    full = pages * page_rows * full_spec.bytes_per_token(nb)
    return {"model": model, "context": context, "kind": kv.kind, "layers": kv.n_layers,
            "window_layers": len(kv.window_layers), "window": kv.window,
            "bytes_per_token": kv.bytes_per_token(nb), "full_bytes_per_token": full_spec.bytes_per_token(nb),
            "rings": kv.ring_bytes(nb, page_rows, verify), "stream_bytes": own, "full_stream_bytes": full,
            "ratio": own / full, "other_fixed": L.fixed_bytes(context, True, verify) - kv.ring_bytes(nb, page_rows, verify)
            - kv.fixed_bytes}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--context", type=int, default=32768)
    ap.add_argument("--page-rows", type=int, default=16)
    ap.add_argument("--verify", type=int, default=9, help="the verify window (drafts: 8 + 1 on the CPU)")
    a = ap.parse_args(argv)
    r = pool_bytes(a.model, a.context, a.page_rows, a.verify)
    for k, v in r.items():
        print(f"{k:22s} {v}")
    print(f"a stream at {a.context} tokens: {r['stream_bytes'] / 2**20:.1f} MiB of KV ({r['kind']}: "
          f"{r['bytes_per_token']} B a token on pages + {r['rings'] / 2**20:.2f} MiB of rings) vs "
          f"{r['full_stream_bytes'] / 2**20:.1f} MiB full attention ({r['full_bytes_per_token']} B a token): "
          f"{r['ratio']:.1%}")


if __name__ == "__main__":
    main()
