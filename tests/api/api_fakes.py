"""A byte-level fake tokenizer and a deterministic fake scheduler, for the API tests.

Tokenizer ids: 0 pad, 1 bos, 2 eos, 3..258 = bytes 0..255, 259.. = the word " w<id>".
The scheduler replies with the bytes of `reply` (cycled), one token per step, so
multi-byte UTF-8 characters arrive split across tokens. Like server/scheduler.py it ends
with a separate TokenEvent(None, finish_reason=...); inline_finish=True puts the reason
on the last token instead (the contract allows both).
"""
from __future__ import annotations

import asyncio

from server.api import AppState
from server.requests import SHUTTING_DOWN, TokenEvent

BOS, EOS, BYTE0 = 1, 2, 3
VOCAB = 32000


class FakeTokenizer:
    bos_id = BOS
    eos_ids = frozenset({EOS})
    bos_token = "<s>"
    eos_token = "</s>"
    vocab_size = VOCAB
    chat_template = None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([BOS] if add_special_tokens else []) + [b + BYTE0 for b in text.encode("utf-8")]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return b"".join(map(self.token_bytes, ids)).decode("utf-8", errors="replace")

    def token_bytes(self, i: int) -> bytes:
        if i == BOS:
            return b"<s>"
        if i == EOS:
            return b"</s>"
        if BYTE0 <= i < BYTE0 + 256:
            return bytes([i - BYTE0])
        return f" w{i}".encode() if i >= BYTE0 + 256 else b""


def fake_render(messages: list[dict]) -> str:
    return "".join(f"<{m['role']}>{m['content']}\n" for m in messages) + "<assistant>"


class FakeScheduler:
    def __init__(self, reply: str = "Hello, wörld! 你好. ", *, delay: float = 0.0,
                 eos_after: int | None = None, fail_after: int | None = None,
                 cached_tokens: int = 0, inline_finish: bool = False, push: bool = False,
                 reply_ids: list[int] | None = None):
        self.reply = reply.encode("utf-8")
        self.reply_ids = reply_ids      # token ids to reply with instead (a real tokenizer's)
        self.delay = delay
        self.eos_after = eos_after
        self.fail_after = fail_after
        self.cached_tokens = cached_tokens
        self.inline_finish = inline_finish
        self.push = push                # produce events whether or not they are read, as the
        self.finished: list[str] = []   # engine thread does (push=True); ids run to their end
        self.metrics = None             # create_app wires its Metrics in here
        self.cancelled: list[str] = []
        self.started: list = []
        self.produced: dict[str, int] = {}     # request id -> token events yielded
        self.active: set[str] = set()
        self.state = {"ranks": 1, "ranks_ok": True, "streams_busy": 0, "streams_total": 4,
                      "pages_free": 60, "pages_total": 64, "queue": 0, "context": 256}
        self.check_error: Exception | None = None
        self.closed: str | None = None
        self.ended: str | None = None

    def prompt_logprobs(self, req) -> tuple:
        """The entries for prompt tokens 1..n-1: token j + 1 has logprob -1 - j, rank
        j % 3 + 1 and alternatives (t + m, -0.25 - m) for m < prompt_logprobs."""
        k = req.params.prompt_logprobs
        return tuple((t, -1.0 - j, 1 + j % 3, tuple((t + m, -0.25 - m) for m in range(k)))
                     for j, t in enumerate(req.prompt_ids[1:]))

    def check(self, prompt_len: int, max_tokens: int) -> None:
        if self.check_error is not None:
            raise self.check_error

    def stats(self) -> dict:
        return dict(self.state, streams_busy=len(self.active))

    def cancel(self, req_id: str) -> None:
        self.cancelled.append(req_id)
        self.active.discard(req_id)

    def stop_admitting(self, message: str) -> None:
        """As the scheduler's: later requests end at once with a 503 shutting_down (this
        fake has no waiting list: every request runs)."""
        self.closed = message

    def end_running(self, message: str) -> None:
        self.ended = message            # each running request ends at its next token

    async def generate(self, req):
        if not self.push:
            async for ev in self._produce(req):
                yield ev
            return
        q: asyncio.Queue = asyncio.Queue()

        async def produce():
            async for ev in self._produce(req):
                q.put_nowait(ev)

        task = asyncio.ensure_future(produce())
        try:
            while True:
                ev = await q.get()
                yield ev
                if ev.finish_reason is not None:
                    return
        finally:
            if not task.done():
                self.cancel(req.id)
                await task

    async def _produce(self, req):
        if self.closed is not None:
            yield TokenEvent(None, finish_reason="error", error=self.closed, error_code=503,
                             code=SHUTTING_DOWN)
            return
        self.started.append(req)
        self.active.add(req.id)
        if self.metrics is not None:
            self.metrics.admitted(req, 0.002, 0)
        p = req.params
        try:
            for i in range(p.max_tokens):
                if self.delay:
                    await asyncio.sleep(self.delay)
                else:
                    await asyncio.sleep(0)
                if req.id not in self.active:
                    yield TokenEvent(None, finish_reason="abort")
                    return
                if self.ended is not None:
                    yield TokenEvent(None, finish_reason="error", error=self.ended,
                                     error_code=503, code=SHUTTING_DOWN)
                    return
                if self.fail_after is not None and i == self.fail_after:
                    yield TokenEvent(None, finish_reason="error", error="rank 1 is gone",
                                     error_code=503)
                    return
                last = i == p.max_tokens - 1
                if self.eos_after is not None and i == self.eos_after and not p.ignore_eos:
                    tok, finish = EOS, "stop"
                else:
                    tok = self.reply_ids[i % len(self.reply_ids)] if self.reply_ids \
                        else BYTE0 + self.reply[i % len(self.reply)]
                    finish = "length" if last else None
                top = tuple((tok + k, -0.5 - k) for k in range(p.logprobs or 0))
                n, c = len(req.prompt_ids), self.cached_tokens
                plp = None
                if i == 0 and p.prompt_logprobs is not None:
                    plp = self.prompt_logprobs(req)
                self.produced[req.id] = i + 1
                yield TokenEvent(tok, logprob=-0.5, top_logprobs=top, prompt_tokens=n,
                                 cached_tokens=c, finish_reason=finish if self.inline_finish else None,
                                 prompt_logprobs=plp)
                if finish:
                    self.finished.append(req.id)
                    if not self.inline_finish:
                        yield TokenEvent(None, finish_reason=finish, prompt_tokens=n, cached_tokens=c)
                    return
        finally:
            self.active.discard(req.id)


def make_state(scheduler=None, **kw) -> AppState:
    kw.setdefault("context", 256)
    return AppState(scheduler=scheduler or FakeScheduler(), tokenizer=FakeTokenizer(),
                    model_name="fake-model", render_chat=fake_render, **kw)


def default_tokenizer(added=(), special: bool = True):
    """The default model's tokenizer (the calling test skips without the model), with the
    strings `added` as added tokens: special ones (harmony's markers: dropped by
    skip_special_tokens) or not (GLM's markup: kept in the decoded text). Each added string
    then encodes to its one token."""
    import pytest
    from tokenizers import AddedToken
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        tok = Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))
    if added:
        new = [AddedToken(m, special=special, normalized=False) for m in added]
        (tok._hf.add_special_tokens if special else tok._hf.add_tokens)(new)
        assert all(tok.encode(m, add_special_tokens=False) == [tok.token_to_id(m)] for m in added)
    return tok
