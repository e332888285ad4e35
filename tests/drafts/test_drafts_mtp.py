"""MTP drafts (server/drafts/mtp.py, server/families/nextn.py): the checkpoint's NextN layer
guesses, the round verifies, so drafted == plain byte for byte (token ids, logprobs, top
logprobs, finish reasons), greedy and seeded, penalties, bias, stop tokens, solo and
concurrent, on pages and on windows, for glm4moe and deepseek2 (dummy:tiny-glm4moe-mtp,
dummy:tiny-deepseek3-mtp: the tiny shapes with a NextN layer of seeded random weights).

Random MTP weights guess badly (their acceptance is measured below, not asserted). So that
the verify walk is seen taking MTP drafts too, `echo` engines get an MTP layer that hands
on the trunk's own next-token guess (eh_proj = [0 | I], the layer's inputs zeroed): on the
tiny models' repetitive greedy replies it is often right.

The MTP layer's own KV rows (layer n_layers of the stream's pages) are checked by the
guesses themselves: every guess made while serving (rows written a round at a time, chain
rows past the valid ones rewritten) equals the guess of one pass over the whole sequence
on a fresh pool, and the guesses are the same solo and concurrent, on pages and windows.
"""
from __future__ import annotations

import numpy as np
import pytest

from server.engine.build import open_model
from server.ranks.steps import (EVERY_ROW, BeginStep, Chunk, EndStep, MtpChunk, MtpStep,
                                PoolStep, RoundStep, pack, unpack)
from server.requests import SamplingParams as P
from server.step_driver import LocalDriver

from drafts_run import serve
from test_drafts_exact import REP, cases

MTP_SHAPES = ["tiny-glm4moe-mtp", "tiny-deepseek3-mtp"]
_ENGINES: dict = {}


def engine(name: str, echo: bool = False):
    key = (name, echo)
    if key not in _ENGINES:
        eng = open_model(f"dummy:{name}", progress=False, mtp=True).engine
        if echo:
            make_echo(eng)
        _ENGINES[key] = eng
    return _ENGINES[key]


def make_echo(eng) -> None:
    """The MTP layer hands on the trunk's guess: x = hnorm(h_i), and the decoder layer's
    sublayers read zeros (their input norms' weights zeroed; what is left is the attention's
    bias-only output, small), so g ~ the trunk's normed h_i."""
    W, d = eng.model.w.mtp, eng.spec.d_model
    W.eh_proj[:] = 0
    W.eh_proj[d:] = np.eye(d, dtype=np.float32)           # [2d, d]: x = the h half
    W.layer.attn_norm[:] = 0
    W.layer.mlp_norm[:] = 0


class Recording(LocalDriver):
    """Every step run, and what an MtpStep returned."""

    def __init__(self, engine):
        super().__init__(engine)
        self.log = []

    def run(self, step):
        got = super().run(step)
        self.log.append((step, got))
        return got


def guesses(rec: Recording) -> dict:
    """{(request index, rows valid): guess} from a recorded run: streams are mapped to
    requests by their BeginSteps, in admission order (FIFO: the request order)."""
    out, of, n = {}, {}, 0
    for step, got in rec.log:
        if isinstance(step, BeginStep):
            of[step.stream] = n
            n += 1
        elif isinstance(step, MtpStep):
            for c, g in zip(step.chunks, got):
                if c.depth:
                    out[(of[c.stream], c.start + len(c.tokens))] = g
    return out


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
@pytest.mark.parametrize("together", [True, False], ids=["concurrent", "solo"])
@pytest.mark.parametrize("name", MTP_SHAPES)
def test_mtp_drafted_equals_plain(name, paged, together):
    eng = engine(name, echo=True)
    plain, _ = serve(eng, cases(), draft=False, paged=paged, together=together, streams=6)
    drafted, s = serve(eng, cases(), draft=True, paged=paged, together=together, streams=6,
                       source="mtp")
    for i, (p, d) in enumerate(zip(plain, drafted)):
        assert d == p, f"case {i}: drafted {d!r} != plain {p!r}"
    # both ways of a verify walk ran on MTP drafts: taken and refused
    assert 0 < s.accepted_tokens_done < s.draft_tokens_done, s.stats()


@pytest.mark.parametrize("name", MTP_SHAPES)
def test_random_mtp_weights_drafted_equals_plain(name):
    """The seeded random NextN layer as the file gives it: its guesses are poor, the replies
    the same. The acceptance is what it is (printed with -s)."""
    eng = engine(name)
    plain, _ = serve(eng, cases(), draft=False, streams=6)
    drafted, s = serve(eng, cases(), draft=True, streams=6, source="mtp")
    assert drafted == plain
    assert s.draft_tokens_done > 0
    print(f"{name}: random MTP weights, {s.accepted_tokens_done} of {s.draft_tokens_done} "
          "drafted tokens accepted")


@pytest.mark.parametrize("name", MTP_SHAPES)
def test_guesses_equal_one_pass_over_the_sequence(name):
    """Every guess made while serving (the MTP rows written round by round: prompt chunks,
    verify chunks, chain rows past the valid ones rewritten by the next pass) equals the
    guess of one MTP pass over the whole sequence so far, on a fresh pool. A row written at
    the wrong position, skipped, or read from the wrong trunk row changes the guesses."""
    eng = engine(name)
    rec = Recording(eng)
    reqs = cases()[:3]
    out, s = serve(eng, reqs, draft=True, streams=3, chunk=8, driver=rec, source="mtp")
    seen = guesses(rec)
    assert len(seen) > 20 and s.draft_tokens_done > 0
    seqs = [list(prompt) + [e[0] for e in evs if e[0] is not None]
            for (prompt, _), evs in zip(reqs, out)]
    eng.apply(PoolStep(True, 64, 4, (eng.page_bytes(4),), 1, 256))
    checked = 0
    for (i, fed), guess in sorted(seen.items()):
        ids = seqs[i]
        eng.apply(BeginStep(0, tuple(range(64))))
        eng.apply(RoundStep((Chunk(0, 0, tuple(ids[:fed]), False),)))
        (ref,) = eng.apply(MtpStep((MtpChunk(0, 0, tuple(ids[1:fed + 1]), 0, len(guess)),)))
        eng.apply(EndStep(0))
        assert ref == guess, f"request {i} at {fed} rows: served {guess}, one pass {ref}"
        checked += 1
    assert checked == len(seen)


def mtp_rows(eng, stream: int, n: int) -> bytes:
    """The MTP layer's KV rows (layer n_layers, every array) of positions 0 .. n-1 of a
    mapped stream, as bytes."""
    kv, li = eng.kv, eng.spec.n_layers
    table, P = kv.address(stream, eng.tables[stream])
    return b"".join(a[li][table[p // P], p % P].tobytes() for a in kv.arrays for p in range(n))


class RowsAtEnd(Recording):
    """Also each stream's MTP rows of its valid positions, read just before its EndStep."""

    def __init__(self, engine):
        super().__init__(engine)
        self.valid, self.rows, self.of, self.n = {}, {}, {}, 0

    def run(self, step):
        if isinstance(step, BeginStep):
            self.of[step.stream] = self.n
            self.n += 1
        elif isinstance(step, MtpStep):
            for c in step.chunks:
                if c.tokens and not c.defer:          # a deferred chunk writes no row
                    self.valid[c.stream] = c.start + len(c.tokens)
        elif isinstance(step, EndStep) and step.stream in self.valid:
            n = self.valid.pop(step.stream)
            self.rows[self.of[step.stream]] = (n, mtp_rows(self.engine, step.stream, n))
        return super().run(step)


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
@pytest.mark.parametrize("name", MTP_SHAPES)
def test_mtp_rows_equal_one_pass_over_the_sequence(name, paged):
    """A stream's MTP KV rows when it ends (written round by round: prompt chunks, decode
    and verify chunks, the chain's rows past the valid ones rewritten by the next pass)
    equal, byte for byte, the rows one MTP pass over its whole sequence writes on a fresh
    pool: every valid position has its row, from the right trunk row and token."""
    eng = engine(name, echo=False)
    rec = RowsAtEnd(eng)
    reqs = cases()
    out, s = serve(eng, reqs, draft=True, streams=6, chunk=8, paged=paged, driver=rec,
                   source="mtp")
    assert len(rec.rows) == len(reqs) and s.draft_tokens_done > 0
    seqs = [list(prompt) + [e[0] for e in evs if e[0] is not None]
            for (prompt, _), evs in zip(reqs, out)]
    eng.apply(PoolStep(True, 64, 4, (eng.page_bytes(4),), 1, 256))
    for i, (n, got) in sorted(rec.rows.items()):
        ids = seqs[i]
        assert n >= len(reqs[i][0])                  # the prompt's rows at least
        eng.apply(BeginStep(0, tuple(range(64))))
        eng.apply(RoundStep((Chunk(0, 0, tuple(ids[:n]), False),)))
        eng.apply(MtpStep((MtpChunk(0, 0, tuple(ids[1:n + 1]), 0, 0),)))
        want = mtp_rows(eng, 0, n)
        eng.apply(EndStep(0))
        assert got == want, f"request {i}: its {n} MTP rows differ from one pass's"


def one_pass_rows(eng, ids, n) -> bytes:
    """The MTP rows of positions 0 .. n-1 one pass over ids writes on a fresh pool."""
    eng.apply(PoolStep(True, 64, 4, (eng.page_bytes(4),), 1, 256))
    eng.apply(BeginStep(0, tuple(range(64))))
    eng.apply(RoundStep((Chunk(0, 0, tuple(ids[:n]), False),)))
    eng.apply(MtpStep((MtpChunk(0, 0, tuple(ids[1:n + 1]), 0, 0),)))
    want = mtp_rows(eng, 0, n)
    eng.apply(EndStep(0))
    return want


def decodes(step) -> int:
    """A RoundStep's decode chunks (one token, or a verify chunk; the prompts here are
    prefilled in chunks of more)."""
    return sum(len(c.tokens) == 1 or c.logits == EVERY_ROW for c in step.chunks)


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
@pytest.mark.parametrize("name", MTP_SHAPES)
def test_a_full_round_defers_the_mtp_pass(name, paged):
    """Sixteen streams (greedy and seeded + logprobs) fill the round: once the decodes of
    a round fill the rows a round may hold (9: no stream may draft), the MTP pass after it
    is deferred for every stream (no MTP row written, no guess: the ranks keep the trunk
    rows); every MTP draft verified comes from a pass that ran for its stream (caught up).
    The two streams that outlive the others then catch up: their MTP rows when they end
    (past the rows kept under load) equal, byte for byte, one pass over their whole
    sequence. The replies equal the plain ones."""
    eng = engine(name)
    rec = RowsAtEnd(eng)
    reqs = [(REP[i % 8:], P(max_tokens=64 if i < 2 else 20, temperature=0.0) if i % 2 == 0
             else P(max_tokens=64 if i < 2 else 20, temperature=0.9, seed=i, logprobs=1))
            for i in range(16)]
    out, s = serve(eng, reqs, draft=True, streams=16, chunk=64, paged=paged, driver=rec,
                   source="mtp")
    plain, _ = serve(eng, reqs, draft=False, streams=16, chunk=64, paged=paged)
    assert out == plain
    of = {st.stream: n for n, st in enumerate(x for x, _ in rec.log if isinstance(x, BeginStep))}
    steps = [(st, got) for st, got in rec.log if isinstance(st, (RoundStep, MtpStep))]
    deferred = passes = verified = 0
    last_pass, kept_to = None, {}
    for i, (st, got) in enumerate(steps):
        if isinstance(st, RoundStep):
            for c in st.chunks:          # every MTP draft comes from a pass that ran for it
                if c.logits == EVERY_ROW and len(c.tokens) > 1:
                    d = c.tokens[1:]
                    (m, g), = [(m, g) for m, g in zip(*last_pass) if m.stream == c.stream]
                    assert not m.defer and m.depth >= len(d) and tuple(g[:len(d)]) == d
                    verified += 1
            continue
        last_pass = (st.chunks, got)
        nxt = next((x for x, _ in steps[i + 1:] if isinstance(x, RoundStep)), None)
        if nxt is not None and decodes(nxt) >= 9:     # the next round: no room for drafts
            assert all(c.defer and not c.depth for c in st.chunks), st
            deferred += 1
            for c in st.chunks:          # how far each request's rows were kept under load
                kept_to[of[c.stream]] = c.start + len(c.tokens)
        else:
            passes += any(not c.defer for c in st.chunks)
    assert deferred > 5 and passes > 5 and verified > 0
    seqs = [list(prompt) + [e[0] for e in evs if e[0] is not None]
            for (prompt, _), evs in zip(reqs, out)]
    for i in (0, 1):                                   # the two that outlived the load
        n, got = rec.rows[i]
        assert n > kept_to[i] + 8, (i, n, kept_to[i])   # caught up past the rows kept under load
        assert got == one_pass_rows(eng, seqs[i], n), f"request {i}: its MTP rows differ"


@pytest.mark.parametrize("name", MTP_SHAPES)
def test_guesses_the_same_solo_concurrent_pages_windows(name):
    """The MTP layer's rows are a stream's own: its guesses do not depend on the streams
    beside it or on where its rows lie (pages or a window). How many it guesses does: a
    fuller round leaves it fewer rows (server/drafts/policy.py), so its pace differs; the
    guesses made at the same point agree as far as both go."""
    eng = engine(name)
    runs = []
    for paged, together in ((True, False), (True, True), (False, True)):
        rec = Recording(eng)
        serve(eng, cases(), draft=True, streams=6, paged=paged, together=together, driver=rec,
              source="mtp")
        runs.append(guesses(rec))
    for other in runs[1:]:
        both = set(runs[0]) & set(other)
        assert len(both) > 0.8 * len(runs[0]), (len(both), len(runs[0]))
        for key in both:
            a, b = runs[0][key], other[key]
            n = min(len(a), len(b))
            assert n > 0 and a[:n] == b[:n], (key, a, b)


def test_a_request_that_says_draft_false_is_never_drafted_by_mtp():
    eng = engine("tiny-glm4moe-mtp", echo=True)
    (p,), _ = serve(eng, cases()[:1], draft=False)
    (d,), s = serve(eng, [(*cases()[0], {"draft": False})], draft=True, source="mtp")
    assert d == p and s.draft_tokens_done == 0


def test_mtp_step_on_the_wire():
    st = MtpStep((MtpChunk(3, 17, (5, 6, 7), 4, 2), MtpChunk(0, 40, (9,), 7, 0)))
    assert unpack(pack(st)) == st


def test_mtp_rows_are_planned_as_a_layer_after_the_trunk():
    """The KV layout counts the MTP layer's rows: (n + 1) / n of the trunk's bytes a token,
    the plan and the engine alike, and says so."""
    from server.planner.layout import layouts
    from server.shapes.spec import shape
    from server.families.nextn import with_mtp
    for name in MTP_SHAPES:
        base = shape(name)
        spec = with_mtp(base)
        n = base.n_layers
        a = layouts(base, 1, 4, 16)[0].bytes_per_token
        b = layouts(spec, 1, 4, 16)[0].bytes_per_token
        assert b * n == a * (n + 1), (a, b)
        assert engine(name).bytes_per_token == b
        assert "the MTP layer's included" in layouts(spec, 1, 4, 16)[0].kv_spec.describe()


def test_plan_cli_counts_the_mtp_rows(capsys):
    from server.plan_cli import main
    got = {}
    for draft in ("ngram", "mtp"):
        assert main(["--model", "dummy:tiny-glm4moe-mtp", "--draft", draft, "--context", "256",
                     "--json"]) == 0
        import json
        got[draft] = json.loads(capsys.readouterr().out)
    a, b = got["ngram"], got["mtp"]
    key = "bytes_per_token" if "bytes_per_token" in a else next(k for k in a if "bytes_per_token" in k)
    assert b[key] * 3 == a[key] * 4, (a[key], b[key])          # 3 trunk layers, and the MTP's
    assert main(["--model", "dummy:tiny-glm4moe-mtp", "--draft", "mtp", "--context", "256"]) == 0
    assert "KV as K and V rows on 4 layers, the MTP layer's included" in capsys.readouterr().out


@pytest.mark.parametrize("name, why", [
    ("tiny", "has no MTP layer foldserve runs"),
    ("tiny-qwen3moe", "has no MTP layer foldserve runs"),
    ("tiny-glm4moe", "carries no MTP / NextN layer"),
    ("tiny-deepseek3", "carries no MTP / NextN layer")])
def test_draft_mtp_is_refused_by_name_without_an_mtp_layer(name, why):
    from server.shapes.spec import UnsupportedModel
    with pytest.raises(UnsupportedModel) as e:
        open_model(f"dummy:{name}", progress=False, mtp=True)
    assert "--draft mtp" in str(e.value) and name in str(e.value) and why in str(e.value)
    from argparse import Namespace
    from server.flags import drafts_for
    from server.shapes.spec import shape
    with pytest.raises(UnsupportedModel, match=why):
        drafts_for(Namespace(draft="mtp", tp=1), shape(name))


@pytest.mark.parametrize("kind", ["F32", "Q8_0"])
def test_a_glm_gguf_nextn_block_drafts(tmp_path, caplog, kind):
    """A GLM GGUF with its whole NextN block (llama.cpp's names: blk.3.nextn.eh_proj / enorm /
    hnorm / shared_head_norm beside the block's decoder tensors): --draft mtp reads it
    (the dummy's tensors, byte for byte at F32) and drafts, drafted == plain; without
    --draft mtp the block is counted and left unread, as before."""
    import logging
    from model.moe_files import write_gguf
    from server.engine.engine import Engine
    from server.engine.weights import load
    from server.engine.weights.dummy import dummy_tensor
    from server.families import nextn
    from server.shapes.spec import shape
    spec = nextn.with_mtp(shape("tiny-glm4moe-mtp"))
    path = write_gguf(tmp_path / f"mtp-{kind}.gguf", spec, kind, mtp=True)
    with caplog.at_level(logging.INFO, logger="foldserve"):
        plain_ld = load(str(path), progress=False)
    assert plain_ld.spec.mtp_layers == 0 and plain_ld.spec.nextn_layers == 1
    n_block = len(nextn.shapes(spec)) - 3 * spec.n_experts + 3   # experts: 3 3-D tensors
    assert f"MTP/NextN block blk.3 ({n_block} tensors" in caplog.text and "not run" in caplog.text
    ld = load(str(path), progress=False, mtp=True)
    assert ld.spec.mtp_layers == 1
    if kind == "F32":
        for name in nextn.own_shapes(spec):
            assert np.array_equal(np.asarray(ld.tensors[name]), dummy_tensor(spec, name)), name
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    assert eng.model.w.mtp is not None
    plain, _ = serve(eng, cases(), draft=False, streams=6)
    drafted, s = serve(eng, cases(), draft=True, streams=6, source="mtp")
    assert drafted == plain and s.draft_tokens_done > 0


def refs_with_mtp(name: str, folder):
    """tools/refs' checkpoint `name` (HF folder) with an MTP layer n_layers added
    (num_nextn_predict_layers 1; the layer's tensors under DeepSeek-V3's / GLM's names,
    seeded random, and the trunk's embedding / head copies such files carry, which are not
    read) -> (the folder, its MoeSpec, every HF tensor float32)."""
    import json
    import shutil
    from dataclasses import replace
    from safetensors.numpy import load_file, save_file
    from server.engine.weights import load
    from server.families import nextn
    from tools.refs import moe_checkpoint as mc
    built = mc.build_once(name)
    shutil.copytree(built.hf_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["num_nextn_predict_layers"] = 1
    (folder / "config.json").write_text(json.dumps(cfg))
    t = load_file(str(folder / "model.safetensors"))
    spec = replace(load(str(built.hf_dir), progress=False).spec, nextn_layers=1, mtp_layers=1)
    rng = np.random.default_rng(35)
    for nm, shp in nextn.shapes(spec).items():
        x = rng.standard_normal(shp).astype(np.float32) * 0.05
        t[nm] = x + 1 if nm.endswith(("norm.weight", "layernorm.weight")) else x
    n = spec.n_layers
    t[f"model.layers.{n}.embed_tokens.weight"] = t["model.embed_tokens.weight"]
    t[f"model.layers.{n}.shared_head.head.weight"] = t.get("lm_head.weight", t["model.embed_tokens.weight"])
    save_file(t, str(folder / "model.safetensors"))
    return folder, built.spec, t


REFS = ["glm4moe-tiny", "deepseek3-tiny"]


@pytest.mark.parametrize("name", REFS)
def test_mtp_logits_equal_the_float64_definition(name, tmp_path):
    """The MTP layer as foldserve runs it (its KV rows on pages, one pass over a sequence)
    against tools/refs/moe_numpy.mtp_forward, float64 and written apart from it (concat
    order, which norms, positions, the layer's attention over the MTP rows): logits within
    1e-3 relative, the same arg-max but near ties."""
    from server.engine.engine import Engine
    from server.engine.mtp_pass import row_logits
    from server.engine.weights import load
    from tools.refs import moe_numpy
    folder, mspec, w = refs_with_mtp(name, tmp_path / "m")
    ld = load(str(folder), progress=False, mtp=True)
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    ids = [5, 17, 99, 3, 250, 41, 7, 7, 300, 12, 64, 128, 9, 33, 411, 2, 1000, 77]
    eng.apply(PoolStep(True, 8, 4, (eng.page_bytes(4),), 1, 32))
    eng.apply(BeginStep(0, tuple(range(8))))
    eng.apply(RoundStep((Chunk(0, 0, tuple(ids), False),)))
    got = row_logits(eng, MtpChunk(0, 0, tuple(ids[1:]), 0))
    want = moe_numpy.mtp_forward(mspec, w, ids)
    assert got.shape == want.shape == (len(ids) - 1, ld.spec.vocab)
    scale = np.abs(want).max(axis=1, keepdims=True)
    err = float(np.max(np.abs(got - want) / scale))
    print(f"{name}: MTP logits vs float64, max error {err:.2e} of the row's largest")
    assert err < 1e-3
    for r in range(len(want)):
        top2 = np.sort(want[r])[-2:]
        if top2[1] - top2[0] >= 2e-3 * scale[r, 0]:
            assert int(np.argmax(got[r])) == int(np.argmax(want[r])), r


def test_a_deepseek_v3_folder_with_its_mtp_layer_drafts(tmp_path, caplog):
    """tools/refs' DeepseekV3 checkpoint with an MTP layer added (refs_with_mtp): --draft
    mtp loads it and drafts, drafted == plain; without, it is counted, not run."""
    import logging
    from server.engine.engine import Engine
    from server.engine.weights import load
    d, _, _ = refs_with_mtp("deepseek3-tiny", tmp_path / "v3-mtp")
    with caplog.at_level(logging.INFO, logger="foldserve"):
        assert load(str(d), progress=False).spec.mtp_layers == 0
    assert "MTP/NextN layer(s) 3" in caplog.text and "not run" in caplog.text
    ld = load(str(d), progress=False, mtp=True)
    assert ld.spec.mtp_layers == 1
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    plain, _ = serve(eng, cases(), draft=False, streams=6)
    drafted, s = serve(eng, cases(), draft=True, streams=6, source="mtp")
    assert drafted == plain and s.draft_tokens_done > 0


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_resumed_mtp_drafted_equals_plain(paged):
    """Each request twice with a prompt cache: the second resumes from the first's kept
    prompt pages (their MTP rows those the first left) and drafts from there; every reply,
    fresh and resumed, drafted == plain."""
    eng = engine("tiny-deepseek3-mtp", echo=True)
    reqs = [r for r in cases()[:4] for _ in range(2)]
    got = {}
    for draft in (False, True):
        cached = []
        got[draft] = serve(eng, reqs, draft=draft, paged=paged, together=False, streams=2,
                           cache_pages=64, cached=cached, source="mtp")
        assert all(c == 0 for c in cached[0::2]) and all(c > 0 for c in cached[1::2]), cached
    (plain, _), (drafted, s) = got[False], got[True]
    for i, (p, d) in enumerate(zip(plain, drafted)):
        assert d == p, f"request {i}: drafted {d!r} != plain {p!r}"
    assert 0 < s.accepted_tokens_done < s.draft_tokens_done, s.stats()


def test_structured_output_with_mtp_drafts_equals_plain(tmp_path):
    """A json_schema request on a GLM GGUF with a tokenizer and its NextN block: the MTP
    layer guesses without the grammar (the echo layer: the trunk's unconstrained choice),
    the verify walk draws each row through the grammar's mask, so a guess the grammar
    forbids is refused; replies equal the plain ones, greedy and seeded."""
    import json
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))        # tests/ (text)
    from model.moe_files import spec_with_vocab, write_gguf
    from server.engine.grammar import compile_grammar
    from server.families import nextn
    from server.shapes.spec import shape
    from text.tiny import train_byte_bpe
    tok = train_byte_bpe()
    vocab = len(json.loads(tok.to_str())["model"]["vocab"])
    spec = nextn.with_mtp(spec_with_vocab(shape("tiny-glm4moe-mtp"), vocab))
    path = write_gguf(tmp_path / "glm-mtp.gguf", spec, "F32", tokenizer=tok, mtp=True)
    opened = open_model(str(path), progress=False, mtp=True)
    make_echo(opened.engine)
    t = opened.tokenizer
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "items": {"type": "array", "items": {"type": "integer"}}},
              "required": ["name", "items"]}
    ids = t.encode('hello world says {"name": "lamp", "items": [1, 2, 3]}')

    def reqs():
        extra = lambda: {"grammar": compile_grammar(t, "json_schema", schema),
                         "eos_ids": frozenset(t.eos_ids)}
        return [(ids, P(max_tokens=40, temperature=0.0), extra()),
                (ids, P(max_tokens=40, temperature=0.8, seed=3), extra())]

    plain, _ = serve(opened.engine, reqs(), draft=False)
    drafted, s = serve(opened.engine, reqs(), draft=True, source="mtp")
    assert drafted == plain
    assert s.draft_tokens_done > s.accepted_tokens_done
    print(f"json_schema with MTP drafts: {s.accepted_tokens_done} of {s.draft_tokens_done} taken")


def write_deepseek_gguf_with_nextn(name: str, folder, path) -> tuple:
    """refs_with_mtp's DeepSeek checkpoint as a GGUF the way llama.cpp's converter lays out a
    NextN block: block_count n_layers + 1, deepseek2.nextn_predict_layers 1, the block's
    decoder tensors as blk.{n}.* (kv_b split into attn_k_b / attn_v_b) and its own as
    blk.{n}.nextn.* -> (path, MoeSpec, HF weights)."""
    from dataclasses import replace
    import gguf
    from server.families import nextn
    from tools.refs import moe_checkpoint as mc
    _, mspec, w = refs_with_mtp(name, folder)
    with4 = replace(mspec, n_layer=mspec.n_layer + 1)
    n = mspec.n_layer
    wr = gguf.GGUFWriter(str(path), mspec.family)
    wr.add_name(mspec.name)
    mc._add_arch_keys(wr, with4)                     # block_count n + 1
    wr.add_nextn_predict_layers(1)
    mc._copy_tokenizer_keys(wr, mc.default_gguf())
    for g, arr in mc.gguf_tensors(with4, w):
        wr.add_tensor(g, np.ascontiguousarray(arr, dtype=np.float32))
    for g, hf in nextn.GGUF_NEXTN.items():
        wr.add_tensor(f"blk.{n}.{g}", np.ascontiguousarray(w[f"model.layers.{n}.{hf}"]))
    wr.add_tensor(f"blk.{n}.nextn.embed_tokens.weight", np.ascontiguousarray(w["model.embed_tokens.weight"]))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path, mspec, w


def test_a_deepseek2_gguf_nextn_block_is_the_float64_definition(tmp_path):
    """A deepseek2 GGUF with its NextN block (kv_b of the block joined back at load as the
    trunk's): --draft mtp's logits equal the float64 definition, and it drafts, drafted ==
    plain."""
    from server.engine.mtp_pass import row_logits
    from server.engine.weights import load
    from server.engine.engine import Engine
    from tools.refs import moe_numpy
    path, mspec, w = write_deepseek_gguf_with_nextn("deepseek3-tiny", tmp_path / "hf",
                                                    tmp_path / "ds-mtp.gguf")
    ld = load(str(path), progress=False, mtp=True)
    assert (ld.spec.n_layers, ld.spec.nextn_layers, ld.spec.mtp_layers) == (3, 1, 1)
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    ids = [5, 17, 99, 3, 250, 41, 7, 7, 300, 12, 64, 128, 9, 33]
    eng.apply(PoolStep(True, 8, 4, (eng.page_bytes(4),), 1, 32))
    eng.apply(BeginStep(0, tuple(range(8))))
    eng.apply(RoundStep((Chunk(0, 0, tuple(ids), False),)))
    got = row_logits(eng, MtpChunk(0, 0, tuple(ids[1:]), 0))
    want = moe_numpy.mtp_forward(mspec, w, ids)
    assert np.max(np.abs(got - want) / np.abs(want).max(axis=1, keepdims=True)) < 1e-3
    eng.apply(EndStep(0))
    plain, _ = serve(eng, cases(), draft=False, streams=6)
    drafted, s = serve(eng, cases(), draft=True, streams=6, source="mtp")
    assert drafted == plain and s.draft_tokens_done > 0
