"""Engine-level probe: one prompt's logits alone (stream 0) against the same prompt on another
stream among others, byte for byte, step by step (server/engine/probe.py).
Usage: python3 bench/solo_concurrent_probe.py [--device cuda] [--model dummy:smollm2-135m]"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.engine.build import open_model  # noqa: E402
from server.engine.probe import solo_vs_concurrent  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="dummy:smollm2-135m")
    a = ap.parse_args()
    eng = open_model(a.model, device=a.device, progress=False).engine
    for paged in (True, False):
        print(json.dumps(solo_vs_concurrent(eng, paged=paged)))


if __name__ == "__main__":
    main()
