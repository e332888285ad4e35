"""NCCL all-reduce time through our NcclComm: per call at decode shapes, and per decode step
(2 all-reduces a layer). Usage: python3 bench/nccl_allreduce.py --world 2 [--d 4096 --layers 32]"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rank_main(rank, world, port, d, layers, q):
    import cupy as cp
    from server.ranks.nccl_comm import NcclComm
    from server.ranks.rendezvous import join
    cp.cuda.Device(rank).use()
    comm = NcclComm(join(rank, world, "127.0.0.1", port, 60))
    res = {}
    for rows in (1, 64):
        x = cp.ones((rows, d), dtype=cp.float32)
        for dt in ("float32",):
            for _ in range(20):
                comm.all_reduce(x)
            cp.cuda.get_current_stream().synchronize()
            comm.barrier()
            s, e = cp.cuda.Event(), cp.cuda.Event()
            n = 500
            s.record()
            for _ in range(n):
                comm.all_reduce(x)
            e.record()
            e.synchronize()
            us = cp.cuda.get_elapsed_time(s, e) * 1e3 / n
            res[f"rows{rows}_{dt}_us_per_call"] = us
            res[f"rows{rows}_{dt}_ms_per_step"] = us * 2 * layers / 1e3
    if rank == 0:
        q.put(res)
    comm.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=32)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=rank_main, args=(r, a.world, port, a.d, a.layers, q)) for r in range(a.world)]
    for p in ps:
        p.start()
    res = q.get(timeout=240)
    for p in ps:
        p.join(60)
    print(json.dumps({"world": a.world, "d": a.d, "layers": a.layers, **res}))


if __name__ == "__main__":
    main()
