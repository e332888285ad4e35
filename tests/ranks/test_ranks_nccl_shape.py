"""NcclComm's calls, against a stand-in cupy (the real NCCL path runs in tests/gpu on a GPU).

This checks what the CPU can: the unique id survives the hand-over byte for byte, and
each collective calls NCCL with the right pointer, count, type and stream.
"""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from server.ranks.nccl_comm import uid_from_bytes, uid_to_bytes
from server.ranks.rendezvous import Link

NCCL_INT32, NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64, NCCL_SUM = 2, 6, 7, 8, 0


def test_unique_id_survives_the_hand_over():
    uid = tuple(range(-128, 0))           # cupy hands out C chars, signed
    assert uid_from_bytes(uid_to_bytes(uid)) == uid
    assert len(uid_to_bytes(uid)) == 128


class FakeArray:
    def __init__(self, a):
        self.a = np.asarray(a)
        self.dtype, self.size = self.a.dtype, self.a.size
        self.flags = self.a.flags
        self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)

    def get(self):
        return self.a


@pytest.fixture
def fake_cupy(monkeypatch):
    calls = []

    class Communicator:
        def __init__(self, world, uid, rank):
            calls.append(("init", world, uid, rank))

        def bcast(self, ptr, count, dtype, root, stream):
            calls.append(("bcast", count, dtype, root, stream))

        def allReduce(self, send, recv, count, dtype, op, stream):
            calls.append(("allReduce", send == recv, count, dtype, op, stream))

        def destroy(self):
            calls.append(("destroy",))

    nccl = types.SimpleNamespace(
        get_unique_id=lambda: tuple([-1] * 128), NcclCommunicator=Communicator,
        NCCL_INT32=NCCL_INT32, NCCL_FLOAT16=NCCL_FLOAT16, NCCL_FLOAT32=NCCL_FLOAT32,
        NCCL_FLOAT64=NCCL_FLOAT64, NCCL_SUM=NCCL_SUM)
    stream = types.SimpleNamespace(ptr=1234, synchronize=lambda: None)
    cuda = types.SimpleNamespace(nccl=nccl, get_current_stream=lambda: stream)
    cupy = types.SimpleNamespace(cuda=cuda, int32=np.int32,
                                 array=lambda v, dtype: FakeArray(np.array(v, dtype)),
                                 asarray=lambda v, dtype: FakeArray(np.asarray(v, dtype)),
                                 empty=lambda n, dtype: FakeArray(np.empty(n, dtype)))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", nccl)
    return calls


def test_a_communicator_of_one(fake_cupy):
    from server.ranks.nccl_comm import NcclComm
    comm = NcclComm(Link(0, 1, "127.0.0.1", 1))
    assert fake_cupy[0] == ("init", 1, bytes([255] * 128), 0)   # cupy 14 takes bytes (seen on the H200)
    x = FakeArray(np.ones(6, np.float32))
    assert comm.all_reduce(x) is x
    assert fake_cupy[-1] == ("allReduce", True, 6, NCCL_FLOAT32, NCCL_SUM, 1234)
    assert comm.broadcast_step([4, 5]) == [4, 5]          # steps over the host link by default
    assert comm.all_gather_bytes(b"fp") == [b"fp"]
    comm.barrier()
    comm.close()
    assert fake_cupy[-1] == ("destroy",)


def test_steps_over_nccl_send_the_length_then_the_buffer(fake_cupy):
    from server.ranks.nccl_comm import NcclComm
    comm = NcclComm(Link(0, 1, "127.0.0.1", 1), steps_over_nccl=True)
    assert comm.broadcast_step([7, 8, 9]) == [7, 8, 9]
    assert fake_cupy[-2:] == [("bcast", 1, NCCL_INT32, 0, 1234), ("bcast", 3, NCCL_INT32, 0, 1234)]


def test_all_reduce_refuses_what_it_cannot_reduce_in_place(fake_cupy):
    from server.ranks.nccl_comm import NcclComm
    comm = NcclComm(Link(0, 1, "127.0.0.1", 1))
    with pytest.raises(ValueError, match="contiguous"):
        comm.all_reduce(FakeArray(np.ones((4, 4), np.float32)[:, 1]))
    with pytest.raises(TypeError, match="no NCCL type for int8"):
        comm.all_reduce(FakeArray(np.ones(4, np.int8)))


def test_close_is_bounded_when_nccl_holds_on(fake_cupy, caplog):
    """ncclCommDestroy waits for every CUDA graph that captured a collective; a rank whose
    destroy never returns must still exit: close() gives up after its timeout, says why, and
    closes the host link."""
    import threading
    import time
    from server.ranks.nccl_comm import NcclComm
    comm = NcclComm(Link(0, 1, "127.0.0.1", 1))
    held = threading.Event()
    comm.nccl.destroy = lambda: held.wait(30)
    closed = []
    comm.host.close = lambda: closed.append(True)
    t = time.monotonic()
    with caplog.at_level("WARNING", logger="foldserve"):
        comm.close(timeout_s=0.2)
    assert time.monotonic() - t < 5
    assert closed == [True]
    assert "did not close in 0.2 s" in caplog.text and "rank 0" in caplog.text
    held.set()


def test_close_reports_a_failed_destroy(fake_cupy):
    from server.ranks.nccl_comm import NcclComm
    comm = NcclComm(Link(0, 1, "127.0.0.1", 1))

    def fail():
        raise RuntimeError("NCCL error: unhandled cuda error")
    comm.nccl.destroy = fail
    with pytest.raises(RuntimeError, match="unhandled cuda error"):
        comm.close()


def test_after_a_lost_rank_close_aborts_once(fake_cupy):
    """The heartbeat's verdict breaks the host link (comm.lose); closing then aborts the
    communicator (destroy would wait on the lost peer), and a close after the watchdog's
    abort does nothing (NCCL must not see a second call on a freed communicator)."""
    from server.ranks.rank_errors import RankLost
    from server.ranks.nccl_comm import NcclComm
    comm = NcclComm(Link(0, 1, "127.0.0.1", 1))
    comm.nccl.abort = lambda: fake_cupy.append(("abort",))
    comm.lose(RankLost(1, "no answer to the heartbeat for 5 s"))
    with pytest.raises(RankLost, match="heartbeat"):
        comm.check_peers()
    comm.abort()                          # the driver, a step in flight
    comm.close()                          # the rank's exit
    assert [c for c in fake_cupy if c[0] in ("abort", "destroy")] == [("abort",)]
    comm2 = NcclComm(Link(0, 1, "127.0.0.1", 1))
    comm2.nccl.abort = lambda: fake_cupy.append(("abort",))
    comm2.lose(RankLost(1, "x"))
    comm2.close()                         # no abort() before: close aborts by itself
    assert fake_cupy[-1] == ("abort",)
