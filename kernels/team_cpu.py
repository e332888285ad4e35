"""A team of threads running a round together (one nogil numba call each): work taken a
piece at a time, and each stage waited for as a whole.

A decode step on the default model is ~120 small matrices and the ops between them; as one
parallel region each (numba's prange through libgomp), every stage paid a fork and a join,
microseconds each on a quiet machine and far more on a busy one. kernels/forward_cpu.py
instead makes one call a thread a round (a Crew, below: the calling thread and daemon
helpers, each running the same nogil function): every member runs the same list of stages,
and a stage's pieces (a matrix's rows, attention's (row, kv head) jobs, a norm) are handed
out by atomic counters:

  next_piece(ctr, s)  the next piece of stage s nobody has taken (one counter for the stage)
  region_piece(ctr, s, r, per, back)
                      the next piece of region r of stage s, from its front or its back
  take(ctr, s)        whether this member takes a one-piece stage s: whoever asks first does
  finish(ctr, s)      one piece of stage s done
  wait(ctr, s, n)     until n pieces of stage s are done

A stage of one piece (a norm) is taken whole; attention's (row, kv head) jobs and SwiGLU's
spans are handed out a piece at a time in order, to whichever member asks next. A matrix's
rows are cut into one region a member, each region into pieces: a member takes its own
region's pieces from the front, in order (so it streams one contiguous run of the weights,
which the prefetch and the hardware's streams follow), then the other regions' from their
backs. Either way a member descheduled mid-stage (a 2-core machine shared with the HTTP
thread and the clients) holds up only the piece in its hands, not half the stage, and the
free member takes the rest. (Handing a matrix's pieces out in turn from one counter, as
attention's are, interleaves the members' rows: measured slower at 16 pieces a member than at
4, though the waits were shorter, receipt 2026-12-02-cpu-regions.)

A piece reads only what earlier stages wrote (every one of their pieces done) and writes its
own part of its stage's output, so what a piece computes never depends on which thread ran
it or when: the bytes are those of the same functions called one after another. Nothing
waits for a particular thread: a member that finds no piece left only waits for the pieces
in flight, so a team whose members run one after another (one thread, or a member started
late) still finishes, the first member doing all the work.

The counters are int64 arrays read and written with LLVM's atomic operations (seq_cst), which
also keep the compiler from moving a piece's loads or stores across them.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _atomic_add(typingctx, arr, i, v):
    sig = types.int64(arr, i, v)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", builder.gep(a.data, [args[1]]), args[2], "seq_cst")
    return sig, codegen


@intrinsic
def _atomic_load(typingctx, arr, i):
    sig = types.int64(arr, i)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(a.data, [args[1]]), "seq_cst", 8)
    return sig, codegen


WIDTH = 32             # int64 a stage's counters take (256 bytes: stages apart in the cache);
                       # a team is at most WIDTH - REGION members (a region each)


@njit(cache=True, nogil=True)
def next_piece(ctr, s):
    """The next piece of stage s nobody has taken (0, 1, 2, ...; past the last, the pieces are
    all taken). ctr: int64 [stages + 1, WIDTH], zeros at the round's start: [s, 0] counts the
    pieces done, [s, 1] the pieces taken; the last row is the abort row (non-zero: a member
    failed, see wait)."""
    return _atomic_add(ctr[s], 1, 1)


REGION = 8             # [s, REGION + r]: region r's pieces taken (front + back << 32)
_BACK = 1 << 32


@njit(cache=True, nogil=True)
def region_piece(ctr, s, r, per, back):
    """The next piece of stage s's region r (pieces r * per .. r * per + per - 1) nobody has
    taken, from its front (its own member, in order) or its back (a member whose own region is
    done), or -1 when the region's pieces are all taken. One atomic add a take: the add's old
    value counts the pieces taken from either end before it, so each take gets its own."""
    old = _atomic_add(ctr[s], REGION + r, _BACK if back else 1)
    front = old & (_BACK - 1)
    behind = old >> 32
    if front + behind >= per:
        return -1
    return r * per + (per - 1 - behind if back else front)


@njit(cache=True, nogil=True)
def take(ctr, s):
    """Whether this member takes stage s's one piece (the first to ask does)."""
    return next_piece(ctr, s) == 0


@njit(cache=True, nogil=True)
def finish(ctr, s):
    """One piece of stage s done."""
    _atomic_add(ctr[s], 0, 1)


@intrinsic
def _yield(typingctx):
    """sched_yield(2): the core to another runnable thread (the partner, on a busy machine)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()
    return sig, codegen


SPINS = 4000           # polls (about 10 us) before a waiting member starts yielding its core


@njit(cache=True, nogil=True)
def wait(ctr, s, n):
    """Until n pieces of stage s are done: polling, then (after SPINS polls: the piece's member
    is descheduled, or the piece is long) yielding the core between polls, as libgomp's
    GOMP_SPINCOUNT does before it sleeps."""
    polls = 0
    abort = ctr.shape[0] - 1            # the last row: set when a member failed
    while _atomic_load(ctr[s], 0) < n and _atomic_load(ctr[abort], 0) == 0:
        polls += 1
        if polls > SPINS:
            _yield()


class Crew:
    """Helpers that join a caller's one-stage round when they get a core, without the caller
    ever waiting for them: the round is over when its pieces are done, whoever did them.

    run(n, args): member(0, n, *args) on the calling thread, and member(m, n, *args) queued to
    helper m = 1 .. n-1 (daemon threads, each its own inbox; members are nogil). A member
    takes pieces from the round's counters (args[0], fresh zeros each round) until none is
    left and returns once every piece is done (team_cpu.wait), so the caller returns as soon
    as the work is done: a helper the machine has descheduled (2 cores shared with other
    work) holds up only a piece it already took, never the round, and when it wakes it finds
    the round's pieces taken and returns at once (its args keep the round's arrays alive).
    What a piece writes depends on the piece alone, so the bytes are those of one thread
    doing every piece. Its replies are read without blocking on the next round; a member's
    error sets the round's abort row (the last row of args[0]): the caller then waits for
    that helper's reply and raises its error. A helper more than BACKLOG rounds behind is
    given no more until it catches up."""

    BACKLOG = 4

    def __init__(self, member):
        import os
        import threading
        self.member = member
        self.threads = []           # (inbox, outbox, rounds queued and not yet answered)
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def _grow(self, n):
        import os
        import queue
        import threading
        if self.pid != os.getpid():     # a forked child: its parent's helpers are not here
            self.threads, self.pid = [], os.getpid()
        while len(self.threads) < n:
            inbox, outbox = queue.SimpleQueue(), queue.SimpleQueue()
            t = threading.Thread(target=self._serve, args=(inbox, outbox), daemon=True,
                                 name=f"foldserve-crew-{len(self.threads) + 1}")
            t.start()
            self.threads.append([inbox, outbox, 0])

    def _serve(self, inbox, outbox):
        while True:
            m, n, args = inbox.get()
            try:
                self.member(m, n, *args)
                outbox.put(None)
            except BaseException as e:          # noqa: BLE001 (handed to the caller)
                args[0][-1, 0] = 1
                outbox.put(e)

    def _drain(self, h, block):
        import queue
        err = None
        while h[2] > 0:
            try:
                got = h[1].get() if block else h[1].get_nowait()
            except queue.Empty:
                break
            h[2] -= 1
            err = err or got
            block = False
        return err

    def run(self, n, args):
        with self.lock:
            if n > 1:
                self._grow(n - 1)
            for m in range(1, n):
                h = self.threads[m - 1]
                err = self._drain(h, False)
                if err is not None:
                    raise err
                if h[2] < self.BACKLOG:
                    h[0].put((m, n, args))
                    h[2] += 1
            try:
                self.member(0, n, *args)
            except BaseException:
                args[0][-1, 0] = 1
                raise
            err = None
            if args[0][-1, 0]:                  # a helper failed: its error
                for h in self.threads[:n - 1]:
                    while h[2] > 0 and err is None:
                        err = self._drain(h, True)
                raise err or RuntimeError("a crew member failed")
            for h in self.threads[:n - 1]:
                err = err or self._drain(h, False)
            if err is not None:
                raise err
