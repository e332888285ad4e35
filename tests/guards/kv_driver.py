"""A stand-in engine that keeps what the rounds write (no model, no device).

Its pages (or windows, and the cache pages of windows) hold the token written at each row;
a row's logits are a function of every row the stream reads through its table (rows 0..p),
and reading a row nobody wrote since the page was handed out (a poisoned row) fails the
round. So a stream that resumes from kept pages answers as a fresh one does only when the
kept rows are its own prompt's and were written before it reads them (resumed == fresh),
and a chunk asking for every row's logits (EVERY_ROW, prompt_logprobs) gets one row per
token, each row distinct for its prefix, as the real engine returns them.

`reply(prompt, n)` and `prompt_rows(prompt)` are the oracle: what a greedy reply and the
prompt's per-row logits are, computed from the prompt alone."""
from __future__ import annotations

import numpy as np

from server.ranks.steps import EVERY_ROW, BeginStep, CopyStep, EndStep, RoundStep
from server.host_sampling import HostSampling

V = 97


def _hash(prefix) -> int:
    h = 17
    for t in prefix:
        h = (h * 31 + int(t) + 1) % 1_000_003
    return h


def next_of(prefix) -> int:
    """The arg-max of the row at the end of `prefix`: the greedy next token."""
    return _hash(prefix) % V


def row_of(prefix) -> np.ndarray:
    """The logits row of the last position of `prefix`: distinct values below 0.5 that
    depend on the whole prefix, 1.0 at next_of(prefix)."""
    h = _hash(prefix)
    row = ((np.arange(V) * (h % 89 + 1) + h) % 101).astype(np.float32) / 202.0
    row[next_of(prefix)] = 1.0
    return row


def reply(prompt, n) -> list:
    ids, out = list(prompt), []
    for _ in range(n):
        out.append(next_of(ids))
        ids.append(out[-1])
    return out


def prompt_rows(prompt) -> np.ndarray:
    """Rows 0 .. len(prompt) - 2 of the prompt: row p predicts prompt[p + 1]."""
    return np.stack([row_of(prompt[:p + 1]) for p in range(len(prompt) - 1)])


class UnwrittenRead(AssertionError):
    pass


class KVDriver(HostSampling):
    """Its own rank-0 sampling (`sampling` is itself), so a test overrides a sampling
    method on its driver."""
    ranks, ok = 1, True

    def __init__(self, paged: bool, page_rows: int, context: int):
        super().__init__("cpu")
        self.sampling = self
        self.paged, self.page_rows, self.context = paged, page_rows, context
        self.pages: dict[int, list] = {}     # page id -> row tokens (None: not written)
        self.tables: dict[int, tuple] = {}   # paged: stream -> page ids
        self.windows: dict[int, list] = {}   # windows: stream -> row tokens
        self.steps: list = []
        self.checks = 0
        self.closed = 0

    # rows of a stream, through its table or window
    def _cell(self, stream: int, row: int):
        if self.paged:
            return self.pages[self.tables[stream][row // self.page_rows]], row % self.page_rows
        return self.windows[stream], row

    def _write(self, stream, row, tok):
        store, i = self._cell(stream, row)
        store[i] = tok

    def _read(self, stream, last) -> list:
        """Rows 0 .. last of a stream (none for last = -1)."""
        out = []
        for r in range(last + 1):
            store, i = self._cell(stream, r)
            if store[i] is None:
                raise UnwrittenRead(f"stream {stream} reads row {r}, never written")
            out.append(store[i])
        return out

    def run(self, step):
        self.steps.append(step)
        if isinstance(step, BeginStep):
            if self.paged:
                self.tables[step.stream] = tuple(step.page_ids)
                for pid in step.page_ids[step.kept:]:       # fresh pages: poisoned
                    self.pages[pid] = [None] * self.page_rows
            else:
                self.windows[step.stream] = [None] * self.context
        elif isinstance(step, CopyStep):                    # windows <-> cache pages
            P = self.page_rows
            for i, pid in enumerate(step.page_ids):
                a, b = i * P, min(i * P + P, step.rows)
                if a >= b:
                    break
                if pid < 0:
                    continue
                if step.to_pages:
                    self.pages[pid] = list(self.windows[step.stream][a:b]) + [None] * (P - (b - a))
                else:
                    self.windows[step.stream][a:b] = self.pages[pid][:b - a]
        elif isinstance(step, EndStep):
            self.tables.pop(step.stream, None)
            self.windows.pop(step.stream, None)
        elif isinstance(step, RoundStep):
            # a chunk reads the rows written before this round, and its own: never another
            # chunk's of the same round (their order within a round is the engine's)
            rows = []
            for c in step.chunks:
                seq = self._read(c.stream, c.start - 1) + list(c.tokens)
                ends = range(len(c.tokens)) if c.logits == EVERY_ROW else \
                    ([len(c.tokens) - 1] if c.logits else [])
                rows += [row_of(seq[:c.start + j + 1]) for j in ends]
            for c in step.chunks:
                for j, t in enumerate(c.tokens):
                    self._write(c.stream, c.start + j, t)
            return np.stack(rows) if rows else np.zeros((0, V), np.float32)
        return None

    def check(self):
        self.checks += 1

    def close(self):
        self.closed += 1
