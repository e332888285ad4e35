"""NcclComm: the Comm interface over NCCL (cupy.cuda.nccl), for GPU ranks.

  unique id    rank 0 makes it (nccl.get_unique_id) and hands it over the rendezvous
               link; every rank then builds NcclCommunicator(world, uid, rank)
  all_reduce   in place on a contiguous cupy array, on the current stream
  all_gather   fingerprints and rooms: small host bytes, over the host link
  steps        over the host link by default (see below); steps_over_nccl=True sends
               them on the device instead: first the length, then the int32 buffer

Why steps default to the host link: a follower spends its idle time waiting for the
next step. A pending NCCL broadcast is a kernel that polls on the GPU, and the host
thread waiting on it polls too; a blocking recv on a socket does neither, and sees a
dead rank 0 as EOF. The follower needs the words on the host anyway (to unpack the
step), so the device path only adds a copy back. The cost is one small TCP message
per round.

Select the device (cupy.cuda.Device(local_rank).use()) before constructing.
"""
from __future__ import annotations

import logging
import threading

from server.ranks.comm import Comm, HostComm
from server.ranks.rank_errors import RankLost
from server.ranks.rendezvous import Link

log = logging.getLogger("foldserve")


def uid_to_bytes(uid) -> bytes:
    """cupy's unique id is a tuple of 128 C chars (-128..127 or 0..255)."""
    return bytes(int(c) & 0xFF for c in uid)


def uid_from_bytes(data: bytes) -> tuple:
    return tuple(b - 256 if b > 127 else b for b in data)


class NcclComm(Comm):
    def _communicator(self, nccl, uid: bytes):
        # cupy 14 takes the unique id as bytes (seen on the H200); older cupy as a tuple
        try:
            return nccl.NcclCommunicator(self.world, uid, self.rank)
        except TypeError:
            return nccl.NcclCommunicator(self.world, uid_from_bytes(uid), self.rank)

    def __init__(self, link: Link, timeout_s: float | None = None, steps_over_nccl: bool = False):
        import cupy
        from cupy.cuda import nccl
        self._cp, self._nccl_mod = cupy, nccl
        self.rank, self.world = link.rank, link.world
        self.host = HostComm(link, timeout_s)
        self.steps_over_nccl = steps_over_nccl
        self._closed = False
        uid = uid_to_bytes(nccl.get_unique_id()) if self.rank == 0 else b""
        uid = self.host.all_gather_bytes(uid)[0]            # rank 0's, on every rank
        self.nccl = self._communicator(nccl, uid)
        self._dtypes = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
                        "bfloat16": getattr(nccl, "NCCL_BFLOAT16", 9),   # ncclBfloat16 = 9 (NCCL >= 2.10)
                        "float64": nccl.NCCL_FLOAT64, "int32": nccl.NCCL_INT32}

    def _stream(self) -> int:
        return self._cp.cuda.get_current_stream().ptr

    def broadcast_step(self, words: list[int] | None) -> list[int]:
        if not self.steps_over_nccl:
            return self.host.broadcast_step(words)
        cp, i32 = self._cp, self._nccl_mod.NCCL_INT32
        n = cp.array([len(words) if self.rank == 0 else 0], dtype=cp.int32)
        self.nccl.bcast(n.data.ptr, 1, i32, 0, self._stream())
        count = int(n.get()[0])
        buf = cp.asarray(words, dtype=cp.int32) if self.rank == 0 else cp.empty(count, cp.int32)
        if count:
            self.nccl.bcast(buf.data.ptr, count, i32, 0, self._stream())
        return [int(w) for w in words] if self.rank == 0 else buf.get().tolist()

    def all_reduce(self, array):
        if not array.flags.c_contiguous:
            raise ValueError("all_reduce needs a contiguous array (it reduces in place)")
        dtype = self._dtypes.get(array.dtype.name)
        if dtype is None:
            raise TypeError(f"all_reduce: no NCCL type for {array.dtype}")
        self.nccl.allReduce(array.data.ptr, array.data.ptr, array.size, dtype,
                            self._nccl_mod.NCCL_SUM, self._stream())
        return array

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        return self.host.all_gather_bytes(data)

    def barrier(self) -> None:
        self._cp.cuda.get_current_stream().synchronize()
        self.host.barrier()

    def check_peers(self) -> None:
        self.host.check_peers()

    def report_failure(self, detail: str) -> None:
        self.host.report_failure(detail)

    def lose(self, err) -> None:
        """The heartbeat's verdict: the host link breaks (check_peers raises it from now on);
        rank 0's driver then aborts the communicator if a step is waiting on the peer."""
        self.host.lose(err)

    def abort(self) -> None:
        """From another thread, after a lost rank: collectives in flight return with an error."""
        self.close(abort=True)

    def close(self, abort: bool = False, timeout_s: float = 10.0) -> None:
        """abort=True after a lost rank: ncclCommAbort does not wait for the dead peer.

        Both wait inside NCCL until every CUDA graph that captured a collective of this
        communicator is destroyed (the engine drops its graphs at the StopStep). The wait is
        bounded: past timeout_s the rank logs why and goes on to exit without it.
        Once a peer is lost (RankLost on the host link) close aborts too: destroy would wait
        on that peer. A second call (the watchdog aborted, then the rank exits) does nothing."""
        if self._closed:
            return
        self._closed = True
        abort = abort or isinstance(self.host._broken, RankLost)
        failed: list = []

        def end():
            try:
                self.nccl.abort() if abort else self.nccl.destroy()
            except Exception as e:          # reported below, from the caller's thread
                failed.append(e)

        t = threading.Thread(target=end, name="foldserve-nccl-close", daemon=True)
        t.start()
        t.join(timeout_s)
        try:
            if t.is_alive():
                log.warning("rank %d: the NCCL communicator did not close in %g s (a CUDA "
                            "graph or a peer still holds it); exiting without it",
                            self.rank, timeout_s)
            elif failed and not abort:
                raise failed[0]
        finally:
            self.host.close()
