"""The engine checks the recurrent families' tests share (tests/model/test_qwen3next.py,
test_kimi_linear.py, test_glm53.py): a prompt fed in rounds of any size ends in the same state
and rows; a stream interleaved with another equals it alone; solo == concurrent; paged ==
window; `check-pages`; the guards' refusals; a tiny checkpoint's files are the ones its
references were made from; the golden rule against those references; one round == token by
token. Each assert_* fails naming the case (the round sizes, the position, the reference
case)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from server.engine.probe import solo_vs_concurrent
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep

from .test_moe_engine import PROMPT, greedy


def record(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def state_bytes(eng, stream=0) -> bytes:
    """Every fixed (recurrent) part of the stream, as bytes."""
    return b"".join(np.ascontiguousarray(a[:, stream]).tobytes() for a in eng.kv.fixed)


def prefill(eng, prompt, sizes, paged=True, context=128, page_rows=16):
    """The prompt fed in rounds of the given sizes (cycled); -> (every round's last logits
    row, the state bytes at the end)."""
    per = context // page_rows
    eng.apply(PoolStep(paged, per if paged else 0, page_rows, (eng.page_bytes(page_rows),), 1, context))
    eng.apply(BeginStep(0, tuple(range(per)) if paged else ()))
    pos, k, rows = 0, 0, {}
    while pos < len(prompt):
        m = min(sizes[k % len(sizes)], len(prompt) - pos)
        lg = eng.apply(RoundStep((Chunk(0, pos, tuple(prompt[pos:pos + m]), True),)))
        pos += m
        k += 1
        rows[pos] = np.asarray(lg[0]).tobytes()
    state = state_bytes(eng)
    eng.apply(EndStep(0))
    return rows, state


def greedy_ids(eng, prompt, n):
    """n greedy ids after the prompt (one round, then a token a round); -> (ids, the first
    step's logits row)."""
    eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 256))
    eng.apply(BeginStep(0, tuple(range(16))))
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(prompt), True),)))
    first, ids, pos = np.asarray(lg[0]), [], len(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(lg[0])))
        lg = eng.apply(RoundStep((Chunk(0, pos, (ids[-1],), True),)))
        pos += 1
    eng.apply(EndStep(0))
    return ids, first


def assert_rounds_of_every_size_equal(eng):
    """A prompt of 130 tokens in one round, in rounds of every size 2..128 and in uneven rounds
    ends in the same state bytes, and every round's last row equals the one-token-a-round
    run's row at that position; -> that run's (rows, state)."""
    prompt = [(i * 37 + 11) % 509 + 3 for i in range(130)]
    tok_rows, tok_state = prefill(eng, prompt, [1], context=256)
    for sizes in [[len(prompt)]] + [[s] for s in range(2, 129)] + [[3, 1, 7, 2], [129]]:
        rows, state = prefill(eng, prompt, sizes, context=256)
        assert state == tok_state, sizes
        for pos, row in rows.items():
            assert row == tok_rows[pos], (sizes, pos)
    return tok_rows, tok_state


def assert_interleaved_equals_alone(eng):
    """Stream 0's prompt in rounds of 3 beside stream 1 (another prompt, rounds of 2) ==
    stream 0 alone in one round: the same last logits and state bytes."""
    prompt = list(PROMPT)
    alone_rows, alone_state = prefill(eng, prompt, [len(prompt)])
    eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 2, 128))
    eng.apply(BeginStep(0, tuple(range(8))))
    eng.apply(BeginStep(1, tuple(range(8, 16))))
    other = [7, 300, 9, 11, 12, 400, 5, 6, 8, 90, 91]
    p0 = p1 = 0
    while p0 < len(prompt):
        chunks = [Chunk(0, p0, tuple(prompt[p0:p0 + 3]), True)]
        if p1 < len(other):
            chunks.insert(0, Chunk(1, p1, tuple(other[p1:p1 + 2]), True))
            p1 += 2
        lg = eng.apply(RoundStep(tuple(chunks)))
        p0 = min(p0 + 3, len(prompt))
    assert np.asarray(lg[-1]).tobytes() == alone_rows[len(prompt)]
    assert state_bytes(eng, 0) == alone_state
    eng.apply(EndStep(0))
    eng.apply(EndStep(1))


def assert_solo_equals_concurrent(eng, paged: bool):
    r = solo_vs_concurrent(eng, paged=paged, context=128)
    assert r["equal_steps"] == r["steps"], r


def assert_paged_equals_window(eng):
    """Greedy on pages == on a window == on 4-row pages == the prompt in three rounds."""
    whole = greedy(eng, [PROMPT])
    assert greedy(eng, [PROMPT], paged=False) == whole
    assert greedy(eng, [PROMPT], page_rows=4) == whole
    assert greedy(eng, [PROMPT[:7], PROMPT[7:13], PROMPT[13:]]) == whole


def assert_guards(eng):
    """A chunk that does not start where its stream's state stands, a stream begun on a kept
    prefix without its snapshot restored, and a row of a stream slot the store lacks are
    refused by name."""
    eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
    eng.apply(BeginStep(0, tuple(range(8))))
    eng.apply(RoundStep((Chunk(0, 0, (5, 6, 7), True),)))
    with pytest.raises(ValueError, match="recurrent state stands at 3"):
        eng.apply(RoundStep((Chunk(0, 2, (9,), True),)))
    eng.apply(EndStep(0))
    eng.apply(BeginStep(0, tuple(range(8)), kept=1))
    with pytest.raises(ValueError, match="kept prefix, but no snapshot"):
        eng.apply(RoundStep((Chunk(0, 16, (9,), True),)))
    eng.apply(EndStep(0))
    with pytest.raises(ValueError, match="stream slot"):
        eng.model.forward([((0, 1), 16, 0, (5,), True)], eng.kv)


def assert_check_pages(eng):
    """`foldserve check-pages`' run on the engine passes, with at least 5 comparisons equal."""
    from server.check_pages import run_check
    out = io.StringIO()
    assert run_check(eng, page_rows=8, prefill_chunk=16, decode=4, out=out) == 0, out.getvalue()
    assert out.getvalue().count("equal;") >= 5


def built_as_recorded(build_once, rec: dict) -> Path:
    """build_once()'s folder, each of its files' sha256 the record's (the files the
    references were made from)."""
    d, sha = build_once()
    for f, h in sha.items():
        assert rec["checkpoint"]["sha256"][f"hf/{f}"] == h, f
    return d


def assert_golden_rule(eng, rec: dict, llama: dict | None = None):
    """The golden rule on rec's reference cases: greedy ids equal through exact_prefix, the
    first step's top-5 logits within 1e-4 relative of transformers float32. With `llama`
    ({case name: llama.cpp's recorded case}), each case is also within llama.cpp's rule and its
    ids equal llama.cpp's through exact_prefix."""
    for case in rec["references"]["cases"]:
        n = case["exact_prefix"]
        if llama is not None:
            assert llama[case["name"]]["within_rule"], case["name"]
        ids, first = greedy_ids(eng, case["prompt_ids"], n)
        assert ids == case["greedy_ids"][:n], case["name"]
        if llama is not None:
            assert ids == llama[case["name"]]["greedy_ids"][:n], case["name"]
        ref = case["top5"][0]
        got, want = first[ref["ids"]], np.array(ref["logits"])
        assert np.max(np.abs(got - want) / np.abs(want)) < 1e-4, case["name"]


def assert_prefill_equals_decode(eng, rec: dict):
    """The record's longest prompt (its last case): one round == token by token, byte for
    byte (the state and the last row)."""
    prompt = rec["references"]["cases"][-1]["prompt_ids"]
    rows1, s1 = prefill(eng, prompt, [len(prompt)], context=128)
    rowsk, sk = prefill(eng, prompt, [1], context=128)
    assert s1 == sk and rows1[len(prompt)] == rowsk[len(prompt)]


def q8_0_engines(src, dst):
    """(engine on src's Q8_0 copy, tools/refs/kimi_checkpoint.q8_0_copy; engine on the same
    weights dequantized to float32 as they are read: the same values, float32 products)."""
    from server.engine.engine import Engine
    from server.engine.weights import load
    from tools.refs.kimi_checkpoint import q8_0_copy
    made = q8_0_copy(src, dst)
    assert any(".attn_q." in n for n in made) and any(".attn_v." in n for n in made)
    ld = load(str(dst), progress=False)

    def floats(name):
        a = ld.tensors[name]
        return a.dequantize() if hasattr(a, "dequantize") else a
    return Engine(ld.spec, ld.tensors.__getitem__), Engine(ld.spec, floats)


def assert_kda_blocks_equal_their_floats(q8, f32):
    """The KDA layers' q | k | v projections stay the file's Q8_0 blocks (the small b | f_a |
    g_a beside them float32), the float32 twin's one matrix [q | k | v | b | f_a | g_a]; the
    same greedy ids and every logits row and state within float32 reordering of the twin's
    (only which kernel sums the products changes); on the blocks a prompt in rounds of 1, of
    5 and in one round gives the same bytes."""
    from kernels.blocks import Blocks
    kda = [getattr(L, "inner", L) for L in q8.weights.layers]
    kda = [(i, L) for i, L in enumerate(kda) if hasattr(L, "w_bfg")]
    twin = [getattr(L, "inner", L) for L in f32.weights.layers]
    assert kda
    for i, L in kda:
        assert isinstance(L.w_in, Blocks) and L.w_in.kind == "Q8_0", i
        H, D = L.heads, q8.spec.lin_k_dim
        assert L.w_in.rows == 3 * H * D and L.w_bfg.shape == (q8.spec.d_model, H + 2 * D), i
        assert twin[i].w_bfg is None and twin[i].w_in.shape == (q8.spec.d_model, 3 * H * D + H + 2 * D)
        np.testing.assert_array_equal(L.w_in.dequantize().T, twin[i].w_in[:, :3 * H * D])
        np.testing.assert_array_equal(L.w_bfg, twin[i].w_in[:, 3 * H * D:])
    prompt = [(i * 37 + 11) % 509 + 3 for i in range(40)]
    rows, state = prefill(q8, prompt, [len(prompt)], context=256)
    for sizes in ([1], [5], [3, 7, 1]):
        r, s = prefill(q8, prompt, sizes, context=256)
        assert s == state and r[len(prompt)] == rows[len(prompt)], sizes
    frows, fstate = prefill(f32, prompt, [len(prompt)], context=256)
    np.testing.assert_allclose(np.frombuffer(rows[len(prompt)], np.float32),
                               np.frombuffer(frows[len(prompt)], np.float32), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.frombuffer(state, np.float32), np.frombuffer(fstate, np.float32),
                               rtol=1e-3, atol=1e-5)
    ids, first = greedy_ids(q8, prompt, 8)
    fids, ffirst = greedy_ids(f32, prompt, 8)
    assert ids == fids
    np.testing.assert_allclose(first, ffirst, rtol=1e-4, atol=1e-5)
