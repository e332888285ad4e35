"""gpt-oss at TP=2 and TP=3 on CPU ranks (real processes over HostComm) equals TP=1: a tiny
checkpoint (tools/refs/gptoss_checkpoint.py's, its experts' width 96 so that it splits into
3 whole MXFP4 blocks of 32 columns: 2|1 at TP=2, 1|1|1 at TP=3, and heads of 32 so that a
rank's o_proj columns are whole Q8_0 blocks) as the MXFP4 GGUF and the HF folder;
the sinks follow their q heads (at TP=3 the 2 kv heads are replicated and their q heads
split), the o and down biases added on rank 0 only. Every step's logits within
float32 reordering of TP=1's (the same tokens fed), and the same greedy id at every step
whose top1-top2 margin is 2e-3 or more (the ranks are fed TP=1's ids, so a near tie at one
step does not end the comparison). The prompt (16 tokens) and 12 steps cross the sliding
window (8). Rank 0 writes its logits to a file (the results
pipe is read only after every rank has exited, too late for 2 MB)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rank_procs import HOST, run

PROMPT = (5, 17, 99, 3, 250, 41, 7, 7, 300, 12, 64, 128, 9, 33, 411, 2)
STEPS = 12
NEAR_TIE = 2e-3


def forward(path: str, tp: int, rank: int, all_reduce, forced):
    from server.engine.build import open_model
    from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep
    eng = open_model(path, tp=tp, rank=rank, all_reduce=all_reduce, progress=False).engine
    eng.apply(PoolStep(True, 16, 16, tuple(eng.page_bytes(16) for _ in range(tp)), 1, 256))
    eng.apply(BeginStep(0, tuple(range(16))))
    lg = eng.apply(RoundStep((Chunk(0, 0, PROMPT, True),)))
    rows, ids, start = [], [], len(PROMPT)
    for k in range(STEPS):
        row = np.asarray(lg[0], np.float32)
        rows.append(row)
        ids.append(int(np.argmax(row)) if forced is None else forced[k])
        lg = eng.apply(RoundStep((Chunk(0, start, (ids[-1],), True),)))
        start += 1
    return np.stack(rows), ids


def rank_target(rank, world, port, path, forced, out):
    from server.ranks.comm import HostComm
    from server.ranks.rendezvous import join
    comm = HostComm(join(rank, world, HOST, port, 10.0), timeout_s=60)
    try:
        rows, ids = forward(path, world, rank, comm.all_reduce, forced)
    finally:
        comm.close()
    if rank == 0:
        np.save(out, rows)
    return ids


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tools.refs import gptoss_checkpoint as g
    d = tmp_path_factory.mktemp("gptoss-tp")
    spec = replace(g.SPECS["gptoss-tiny"], name="gptoss-tiny-tp3", expert_ff=96, head_dim=32)
    g.write_hf(spec, d / "hf")
    return d, {"MXFP4": str(g.write_gguf(spec, d / "gptoss-tp3-MXFP4.gguf", "MXFP4")),
               "hf": str(d / "hf")}


@pytest.mark.parametrize("tp", [2, 3])
@pytest.mark.parametrize("form", ["MXFP4", "hf"])
def test_tp_equals_tp1(files, form, tp):
    d, paths = files
    path = paths[form]
    want_rows, want_ids = forward(path, 1, 0, None, None)
    out = str(d / f"rows-{form}-{tp}.npy")
    res = run(rank_target, tp, path, want_ids, out, deadline_s=240)
    assert not res.left_behind, res
    outs = [res.outcomes[r] for r in range(tp)]
    assert all(o.status == "ok" for o in outs), [(o.error, o.message) for o in outs]
    got_rows = np.load(out)
    assert got_rows.shape == want_rows.shape == (STEPS, want_rows.shape[1])
    n_checked = 0
    for k, (got, want) in enumerate(zip(got_rows, want_rows)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"step {k}")
        top = np.sort(want)[-2:]
        if top[1] - top[0] >= NEAR_TIE:      # every rank was fed TP=1's ids: steps stand alone
            assert int(np.argmax(got)) == want_ids[k], f"step {k}"
            n_checked += 1
    assert n_checked >= STEPS // 2


def test_tp_beyond_the_blocks_is_refused_by_name():
    """The recorded tiny checkpoint's experts are 64 wide: 2 MXFP4 blocks, so TP 3 is refused
    naming the experts' columns (before any weight is split)."""
    from server.shapes.shard import shard_of
    from server.shapes.spec import shape
    with pytest.raises(ValueError, match="TP 3 exceeds the routed experts.s 64 columns in units of 32"):
        shard_of(shape("tiny-gptoss"), 3, 0)
