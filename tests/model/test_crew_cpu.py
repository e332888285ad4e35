"""kernels/team_cpu.Crew and the products run as crew rounds (kernels/blocks_vec.crew_grouped:
blocks_vec.matmul and kernels/moe_cpu's grouped experts): the bytes of the prange regions they
replace, for every vector kind, whoever takes the pieces; a round finishes while a helper is
stalled (the caller takes its pieces); a helper's error is raised to the caller."""
from __future__ import annotations

import threading
import time

import numba
import numpy as np
import pytest

from kernels import blocks_vec, moe_cpu, qmatmul, team_cpu
from kernels.blocks import ExpertStack
from tests.model.test_moe_grouped import random_blocks

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)
KINDS = ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"]


@pytest.fixture
def two_threads():
    n = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    yield
    numba.set_num_threads(n)


def _both(fn):
    old = blocks_vec.CREW
    try:
        blocks_vec.CREW = True
        a = fn()
        blocks_vec.CREW = False
        b = fn()
    finally:
        blocks_vec.CREW = old
    return a, b


@pytest.mark.parametrize("kind", KINDS)
def test_crew_rounds_give_the_prange_bytes(kind, two_threads):
    rng = np.random.default_rng(len(kind) + 3)
    w = random_blocks(rng, kind, 300, 1024)               # 300 rows: a piece left short
    for m in (1, 8, 33):
        x = rng.standard_normal((m, 1024)).astype(np.float32)
        a, b = _both(lambda: blocks_vec.matmul(x, kind, w.data))
        assert np.abs(a).max() > 0 and a.tobytes() == b.tobytes(), (kind, m)
    stack = ExpertStack([random_blocks(rng, kind, 300, 1024) for _ in range(5)])
    x = rng.standard_normal((9, 1024)).astype(np.float32)
    experts, offs = np.array([0, 2, 4], np.int64), np.array([0, 1, 6, 9], np.int64)
    a, b = _both(lambda: moe_cpu.grouped_matmul(x, stack, experts, offs))
    assert np.abs(a).max() > 0 and a.tobytes() == b.tobytes(), kind


class _Stalled(team_cpu.Crew):
    """A crew whose helpers wait for `go` before serving their first round."""

    def __init__(self, member):
        super().__init__(member)
        self.go = threading.Event()

    def _serve(self, inbox, outbox):
        self.go.wait()
        super()._serve(inbox, outbox)


def test_a_round_finishes_while_its_helper_is_stalled():
    rng = np.random.default_rng(5)
    kind = "Q4_K"
    w = random_blocks(rng, kind, 512, 2048)
    x = rng.standard_normal((2, 2048)).astype(np.float32)
    want = np.empty((2, 512), np.float32)
    blocks_vec.KERNELS[kind](x, np.zeros((2, 64), np.float32), w.data, want)
    crew = _Stalled(blocks_vec._made("crew", kind, blocks_vec.TABLE))
    for _ in range(2):                   # the helper never runs: the caller does every piece
        out = np.zeros((2, 512), np.float32)
        ctr = np.zeros((2, team_cpu.WIDTH), np.int64)
        crew.run(2, (ctr, x, np.zeros((2, 64), np.float32), w.data[None], np.zeros(1, np.int64),
                     np.array([0, 2], np.int64), out))
        assert out.tobytes() == want.tobytes()
    assert crew.threads[0][2] == 2       # two rounds queued to it, unanswered
    crew.go.set()                        # it wakes, finds both rounds done, answers
    deadline = time.time() + 10
    while crew.threads[0][1].qsize() < 2 and time.time() < deadline:
        time.sleep(0.01)
    out = np.zeros((2, 512), np.float32)
    crew.run(2, (np.zeros((2, team_cpu.WIDTH), np.int64), x, np.zeros((2, 64), np.float32), w.data[None],
                 np.zeros(1, np.int64), np.array([0, 2], np.int64), out))
    assert out.tobytes() == want.tobytes() and crew.threads[0][2] <= 1


def test_a_helpers_error_reaches_the_caller():
    def member(m, n, ctr):
        if m == 1:
            raise ValueError("member 1 failed")
    crew = team_cpu.Crew(member)
    with pytest.raises(ValueError, match="member 1 failed"):
        for _ in range(50):              # raised on the round that finds its reply
            crew.run(2, (np.zeros((2, team_cpu.WIDTH), np.int64),))
            time.sleep(0.02)
