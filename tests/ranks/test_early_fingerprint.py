"""The ranks compare what needs no weights right after they join: two ranks with different
TF_KV_PAGES stop within seconds of the second's start, before either reads a weight, and
rank 0 says who is missing while it waits."""
from __future__ import annotations

import time

import pytest

from serve_procs import HOST, free_port, rank_args

from server.ranks import fingerprint


def _real_model():
    from server.engine.locate import ModelNotFound, resolve
    try:
        return resolve(None)
    except ModelNotFound as e:
        pytest.skip(str(e))


def _wait_for(proc, text: str, within: float) -> None:
    t0 = time.monotonic()
    while text not in proc.stderr:
        assert proc.popen.poll() is None, proc.stderr[-2000:]
        assert time.monotonic() - t0 < within, f"no {text!r} in {within} s:\n{proc.stderr[-2000:]}"
        time.sleep(0.05)


def test_differing_tf_kv_pages_stop_both_ranks_before_the_weights_load(group):
    model = _real_model()                  # the 135M GGUF: about 10 s to load on a CPU
    master = f"{HOST}:{free_port()}"
    common = ["--model", model, "--port", str(free_port()), "--join-timeout", "20"]
    rank0 = group.start(rank_args(0, 2, master, *common), env={"TF_KV_PAGES": "on"}, name="rank0")
    _wait_for(rank0, "waiting for rank 1 of 2", within=15)   # said every 5 s while it waits
    t0 = time.monotonic()
    rank1 = group.start(rank_args(1, 2, master, *common), env={"TF_KV_PAGES": "off"}, name="rank1")
    while time.monotonic() - t0 < 30 and any(p.popen.poll() is None for p in (rank0, rank1)):
        time.sleep(0.05)
    took = time.monotonic() - t0
    assert took < 5, f"the ranks took {took:.1f} s to stop after rank 1 started"
    message = ("ranks disagree on TF_KV_PAGES: rank 0 resolved on, rank 1 resolved off; "
               "set it the same on every host")
    for p in (rank0, rank1):
        assert p.popen.returncode == 2, (p.name, p.popen.returncode, p.stderr[-2000:])
        assert message in p.stderr, p.stderr[-2000:]
        assert "loaded" not in p.stderr and "loading" not in p.stderr, p.stderr[-2000:]
    assert "(5 s of 20 s)" in rank0.stderr
    print(f"both ranks stopped {took:.2f} s after rank 1 started")


def test_file_identity_is_size_and_header_without_reading_the_rest(tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"GGUF" + bytes(3 << 20))
    b.write_bytes(b"GGUF" + bytes(3 << 20))
    assert fingerprint.file_identity(str(a)) == fingerprint.file_identity(str(b))
    b.write_bytes(b"GGUF" + bytes(3 << 20) + b"x")                  # another size
    assert fingerprint.file_identity(str(a)) != fingerprint.file_identity(str(b))
    b.write_bytes(b"GGUX" + bytes(3 << 20))                         # another header
    assert fingerprint.file_identity(str(a)) != fingerprint.file_identity(str(b))
    assert fingerprint.file_identity("dummy:tiny:3") == "dummy:tiny:3"


def test_early_fingerprints_name_the_first_difference():
    def early(rank, **kw):
        base = dict(rank=rank, tp=2, model_file="123:abc", device="cpu", kv_pages="auto",
                    kv_poison=False, page_rows=16, context=512, parallel=4, prefill_chunk=256,
                    prompt_cache_gib=0.25, verify_window=1, seed_salt=0)
        return fingerprint.make_early(**{**base, **kw})
    assert fingerprint.compare([early(0), early(1)]) is None
    assert fingerprint.compare([early(0), early(1, model_file="999:abc")]) == (
        "ranks disagree on model file: rank 0 has 123:abc, rank 1 has 999:abc; "
        "every rank must load the same model file")
    assert fingerprint.compare([early(0), early(1, kv_poison=True)]) == (
        "ranks disagree on TF_KV_POISON: rank 0 has 0, rank 1 has 1; set it the same on every host")
    assert fingerprint.compare([early(0), early(1, device="cuda")]).startswith(
        "ranks disagree on device: rank 0 has cpu, rank 1 has cuda")
