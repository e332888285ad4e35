"""The MTP pass (`MtpStep`, server/ranks/steps.py): the MTP layer's rows for the round just
run, and each stream's drafts (server/families/nextn.py for the layer, server/drafts/mtp.py
for the drafting).

Every rank runs it alike: the trunk's hidden rows are the same on every rank (the layer's
sums all-reduced in rank order), the MTP layer is split as the trunk's layers are, the LM
head replicated; so every rank picks the same arg-max drafts without a collective of its
own, and writes the same latent rows (deepseek2) or its own heads' K/V rows (glm4moe).

A deferred chunk (MtpChunk.defer: the round was full, no stream drafts next round) only
keeps its trunk rows (`engine.mtp_kept`); the stream's next chunk that is not deferred
starts at the first kept row and reads the kept rows before the round's, so its MTP rows
are those the pass would have written round by round (the layer's row j reads h_j, the
token after it and the rows before it only). A stream that ends first never has them
written: under load the pass costs nothing.

A draft is a guess: its arithmetic never reaches a reply (every drafted token is verified
against the trunk's own row, server/drafts/verify.py), so the pass may take any rows.
"""
from __future__ import annotations

import numpy as np

from server.engine.rows import RoundChunk
from server.families import nextn as mtp_layer


def run(engine, step) -> tuple:
    """-> one tuple of drafted token ids per chunk of `step` (depth of them at most)."""
    m, kv = engine.model, engine.kv
    W = m.w.mtp
    if W is None:
        raise ValueError(f"{engine.spec.name or engine.spec.arch}: an MTP step, but the MTP "
                         "layer is not loaded (serve with --draft mtp)")
    hid = m.hidden
    if hid is None:
        raise ValueError("an MTP step with no round's hidden rows before it")
    for c in step.chunks:
        if c.defer and c.tokens:
            _keep(engine, c.stream, c.start, hid[c.src:c.src + len(c.tokens)])
    live = [c for c in step.chunks if c.tokens and not c.defer]
    out = {c.stream: [] for c in step.chunks}
    g_last: dict = {}
    if live:
        rc = []
        for c in live:
            table, prow = kv.address(c.stream, engine.tables[c.stream])
            rc.append(RoundChunk(table, prow, c.start, c.tokens, bool(c.depth), (), c.stream))
        src = np.concatenate([np.arange(c.src, c.src + len(c.tokens)) for c in live])
        g = _layer(m, W, rc, _with_kept(engine, live, hid, src), kv)
        o = 0
        for c in live:
            o += len(c.tokens)
            if c.depth:
                g_last[c.stream] = g[o - 1:o]
    at = {c.stream: c.start + len(c.tokens) for c in step.chunks}
    want = {c.stream: c.depth for c in step.chunks}
    for j in range(max(want.values(), default=0)):
        ss = [s for s in want if want[s] > j and s in g_last]
        if not ss:
            break
        gs = np.concatenate([g_last[s] for s in ss])
        toks = _argmax(m.ops.linear(np.ascontiguousarray(gs), m.w.lm_head))
        for s, t in zip(ss, toks):
            out[s].append(int(t))
        nxt = [s for s in ss if want[s] > j + 1]
        if not nxt:
            break
        rc = []
        for s in nxt:                   # the next row: the token just drafted, at the row after
            table, prow = kv.address(s, engine.tables[s])
            rc.append(RoundChunk(table, prow, at[s] - 1 + j + 1, (out[s][-1],), True, (), s))
        g = _layer(m, W, rc, np.concatenate([g_last[s] for s in nxt]), kv)
        g_last = {s: g[i:i + 1] for i, s in enumerate(nxt)}
    return tuple(tuple(out[c.stream]) for c in step.chunks)


def _keep(engine, stream: int, start: int, rows) -> None:
    """Keep a deferred chunk's trunk rows (positions start ..) for the stream's next pass."""
    kept = engine.mtp_kept.get(stream)
    if kept is None:
        engine.mtp_kept[stream] = kept = [start, []]
    at = kept[0] + sum(len(r) for r in kept[1])
    if start != at:
        raise ValueError(f"stream {stream}: a deferred MTP chunk at position {start}, its kept "
                         f"rows end at {at}")
    kept[1].append(np.array(rows, dtype=np.float32, copy=True))


def _with_kept(engine, live, hid, src):
    """The trunk rows the live chunks read, in order: a stream's kept rows (its chunk starts
    at the first of them) before its rows of this round (src: the round rows after them)."""
    if not any(c.stream in engine.mtp_kept for c in live):
        return hid[src]
    parts, o = [], 0
    for c in live:
        n = len(c.tokens)
        kept = engine.mtp_kept.pop(c.stream, None)
        nk = 0
        if kept is not None:
            if c.start != kept[0]:
                raise ValueError(f"stream {c.stream}: an MTP chunk at position {c.start}, its "
                                 f"kept rows start at {kept[0]}")
            rows = np.concatenate(kept[1])
            nk = len(rows)
            if nk > n:
                raise ValueError(f"stream {c.stream}: an MTP chunk of {n} rows, {nk} kept rows")
            parts.append(rows)
        parts.append(hid[src[o:o + n - nk]])
        o += n
    return np.concatenate(parts)


def row_logits(engine, c):
    """The MTP layer's logits of every row of one MtpChunk (after the round that made its
    hidden rows), [len(c.tokens), vocab] float32: for tests and inspection; writes its KV
    rows as a pass does."""
    m, kv = engine.model, engine.kv
    table, prow = kv.address(c.stream, engine.tables[c.stream])
    rc = [RoundChunk(table, prow, c.start, c.tokens, True, (), c.stream)]
    g = _layer(m, m.w.mtp, rc, m.hidden[c.src:c.src + len(c.tokens)], kv)
    return np.asarray(m.ops.linear(np.ascontiguousarray(g), m.w.lm_head))


def _layer(m, W, chunks, hidden, kv):
    r = m.rows(chunks)
    return mtp_layer.forward(m.ops, m, W, r.ids, np.ascontiguousarray(hidden, dtype=np.float32),
                             r, kv)


def _argmax(logits) -> list:
    return [int(i) for i in np.asarray(logits).argmax(axis=1)]
