"""Stop strings cut out of streamed text, in time linear in the text.

`StopSet` is an Aho-Corasick automaton over a request's stop strings, built once (in
time linear in their total length) and shared by the request's choices; `StopMatcher`
walks it over one reply's text as it streams. A node of the automaton is the longest
suffix of the text so far that is a prefix of some stop string, so:

- a stop completes where the walk reaches a node whose `out` is non-zero: `out` is the
  length of the longest stop string that ends there (the node's own, else its failure
  link's), which is the rule "the stop that ends first wins, then the longest"; `word`
  is that stop string itself (the matcher reports it as `matched`);
- the text held back (it could still grow into a stop) is the node's depth, and is
  never longer than the longest stop string less one.

Each character costs an amortised constant number of dictionary steps (the failure
links climb at most as far as the walk descended), whatever the number or length of
the stop strings; the held text is kept in pieces, so emitting costs the size of what
is emitted.
"""
from __future__ import annotations

from collections import deque


class StopSet:
    """The automaton over a list of stop strings (empty strings dropped: an empty stop
    would match everywhere). Immutable once built."""

    def __init__(self, stops):
        self.stops: tuple[str, ...] = tuple(dict.fromkeys(s for s in stops if s))
        goto: list[dict] = [{}]
        depth = [0]
        out = [0]
        word: list[str | None] = [None]
        for s in self.stops:
            node = 0
            for c in s:
                nxt = goto[node].get(c)
                if nxt is None:
                    nxt = len(goto)
                    goto[node][c] = nxt
                    goto.append({})
                    depth.append(depth[node] + 1)
                    out.append(0)
                    word.append(None)
                node = nxt
            out[node] = len(s)
            word[node] = s
        fail = [0] * len(goto)
        queue = deque(goto[0].values())          # depth 1: failure link to the root
        while queue:
            u = queue.popleft()
            for c, v in goto[u].items():
                f = fail[u]
                while f and c not in goto[f]:
                    f = fail[f]
                fail[v] = goto[f].get(c, 0)
                if not out[v]:
                    out[v] = out[fail[v]]        # a shorter stop ending here, if any
                    word[v] = word[fail[v]]
                queue.append(v)
        self.goto, self.fail, self.depth, self.out, self.word = goto, fail, depth, out, word

    def __bool__(self) -> bool:
        return bool(self.stops)


class _Held:
    """Text not yet emitted, as pieces; taking k characters from the front costs k."""

    def __init__(self):
        self._pieces: deque[str] = deque()
        self._skip = 0          # characters of the first piece already taken
        self.size = 0

    def add(self, text: str) -> None:
        if text:
            self._pieces.append(text)
            self.size += len(text)

    def take(self, k: int) -> str:
        out = []
        self.size -= k
        while k:
            first = self._pieces[0]
            part = first[self._skip:self._skip + k]
            out.append(part)
            k -= len(part)
            if self._skip + len(part) == len(first):
                self._pieces.popleft()
                self._skip = 0
            else:
                self._skip += len(part)
        return "".join(out)

    def clear(self) -> None:
        self._pieces.clear()
        self._skip = self.size = 0


class StopMatcher:
    """Cuts streamed text at the first stop string; the stop string itself is not emitted
    (unless include_stop: then the text ends with it).

    The stop that ends first wins (then the longest of those), however the text was
    chunked: with stops ">" and "<><", the text "<><" stops at "<>" and emits "<". A
    tail that could still grow into a stop string is held back until a later push
    decides it: with stop "</s>", "ab</" emits "ab" and holds "</". push(text,
    armed=False) (before min_tokens) matches nothing, holds nothing back and forgets
    any partial match; so does flush(). `matched` is the stop string that ended the text
    (None until one does).
    """

    def __init__(self, stops, include_stop: bool = False):
        self._set = stops if isinstance(stops, StopSet) else StopSet(stops)
        self._include = include_stop
        self._node = 0
        self._held = _Held()
        self.stopped = False
        self.matched: str | None = None

    def push(self, text: str, armed: bool = True) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        held = self._held
        if not armed or not self._set:
            out = held.take(held.size) + text
            self._node = 0
            return out, False
        goto, fail, out_len = self._set.goto, self._set.fail, self._set.out
        node = self._node
        base = held.size
        for j, c in enumerate(text):
            while True:
                nxt = goto[node].get(c)
                if nxt is not None:
                    node = nxt
                    break
                if not node:
                    break
                node = fail[node]
            n = out_len[node]
            if n:
                end = base + j + 1
                held.add(text[:j + 1])
                emit = held.take(end if self._include else end - n)
                held.clear()
                self._node, self.stopped = 0, True
                self.matched = self._set.word[node]
                return emit, True
        self._node = node
        held.add(text)
        return held.take(held.size - self._set.depth[node]), False

    def flush(self) -> str:
        """At the end of generation: the held tail was not a stop after all."""
        out = "" if self.stopped else self._held.take(self._held.size)
        self._held.clear()
        self._node = 0
        return out
