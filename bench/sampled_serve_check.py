"""Sampled requests through a real server: the same seed gives the same reply, alone or among
other requests, and the sampling settings reach the device sampler. Prints one JSON line.

Usage: python3 bench/sampled_serve_check.py [--device cuda] [--model dummy:smollm2-135m]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.multi_gpu import Server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="dummy:smollm2-135m")
    ap.add_argument("--out", default="/tmp/sampled")
    ap.add_argument("--greedy", action="store_true", help="temperature 0 everywhere (a control)")
    ap.add_argument("--server-args", default="", help="more serve flags, space-separated")
    ap.add_argument("--noise", default="sampled", choices=["sampled", "greedy", "none"],
                    help="the six other requests sent beside them")
    a = ap.parse_args()
    import httpx
    from pathlib import Path
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    s = Server(out, "sampled", ["--device", a.device, "--model", a.model, "--context", "1024",
                                "--parallel", "16", *a.server_args.split()])
    settings = [dict(temperature=0.8, seed=1), dict(temperature=1.0, top_k=50, seed=2),
                dict(temperature=0.7, top_p=0.9, seed=3), dict(temperature=1.2, min_p=0.05, seed=4),
                dict(temperature=0.9, top_k=40, top_p=0.95, seed=5),
                dict(temperature=0.8, seed=6, frequency_penalty=0.5)]      # host path

    if a.greedy:
        settings = [{**kw, "temperature": 0} for kw in settings]

    def one(i, kw):
        r = httpx.post(s.url + "/v1/completions", timeout=120, json={
            "prompt": [(17 * i + 3 * j) % 400 + 10 for j in range(9 + i)], "max_tokens": 24,
            "ignore_eos": True, **kw})
        r.raise_for_status()
        return r.json()["choices"][0]["text"]

    try:
        s.wait()
        solo = [one(i, kw) for i, kw in enumerate(settings)]
        again = [one(i, kw) for i, kw in enumerate(settings)]
        with cf.ThreadPoolExecutor(len(settings) * 2) as ex:
            futs = [ex.submit(one, i, kw) for i, kw in enumerate(settings)]
            nkw = dict(temperature=0) if a.noise == "greedy" else dict(temperature=1.0)
            noise = [] if a.noise == "none" else [
                ex.submit(one, 50 + i, dict(nkw, seed=100 + i)) for i in range(6)]
            together = [f.result() for f in futs]
            [f.result() for f in noise]
        other_seed = [one(i, {**kw, "seed": kw["seed"] + 1000}) for i, kw in enumerate(settings)]
        res = {"settings": len(settings),
               "same_seed_same_reply": sum(x == y for x, y in zip(solo, again)),
               "solo_equals_concurrent": sum(x == y for x, y in zip(solo, together)),
               "other_seed_differs": sum(x != y for x, y in zip(solo, other_seed))}
        # where each pair first parts (in characters of the reply), for the record
        res["first_diff_at"] = [next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), None)
                                for x, y in zip(solo, together)]
        (out / "replies.json").write_text(json.dumps({"solo": solo, "together": together}, indent=1))
    finally:
        res_exit = s.stop()
    res["server_exit"] = res_exit
    print(json.dumps(res))


if __name__ == "__main__":
    main()
