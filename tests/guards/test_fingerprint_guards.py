"""Every fingerprint field is made, compared and named: a rank that differs in any one of
them stops with that field's label, both values and the fix."""
from __future__ import annotations

import json

import pytest

import server
from server.ranks import fingerprint as fpm
from server.ranks.rank_errors import FingerprintMismatch
from server.ranks.rendezvous import PROTOCOL

MODEL = {"architecture": "llama", "config": {"n_heads": 9}, "tensors": [["w", [2, 2], "bf16"]],
         "content_hash": "ab" * 32}
ARGS = dict(model=MODEL, tp=2, kv_pages="on", kv_poison=False, page_rows=16,
            page_bytes=[1024, 1024], kv_dtype="bfloat16", context=4096, parallel=4,
            prefill_chunk=256, prompt_cache_gib=1.5, verify_window=1, seed_salt=0)
# a different value for each make() argument, and the field it lands in
OTHER = {
    "tp": ("tp", 3), "kv_pages": ("kv_pages", "off"), "kv_poison": ("kv_poison", True),
    "page_rows": ("page_rows", 32), "page_bytes": ("page_bytes", [1024, 512]),
    "kv_dtype": ("kv_dtype", "float32"), "context": ("context", 2048),
    "parallel": ("parallel", 8), "prefill_chunk": ("prefill_chunk", 128),
    "prompt_cache_gib": ("prompt_cache_gib", 2.0), "verify_window": ("verify_window", 4),
    "seed_salt": ("seed_salt", 7),
}
MODEL_OTHER = {"architecture": "qwen2", "config": {"n_heads": 8},
               "tensors": [["w", [2, 3], "bf16"]], "content_hash": "cd" * 32}


def make(rank=0, **over):
    a = dict(ARGS, shard=f"shard{rank}")
    a.update(over)
    return json.loads(json.dumps(fpm.make(rank=rank, **a)))


def test_make_fills_every_field_the_check_knows_and_only_those():
    fp = make()
    # the model file's identity and the device are compared before the load (make_early);
    # after it the content hash stands for the file
    early_only = {"model.file", "device"}
    full = [k for k in fpm.FIELDS if k not in early_only]
    assert set(fp) == set(full) | set(fpm.PER_RANK)
    assert list(fp)[:len(full)] == full
    early = fpm.make_early(rank=0, tp=1, model_file="f", device="cpu", kv_pages="auto",
                           kv_poison=False, page_rows=16, context=None, parallel=4,
                           prefill_chunk=256, prompt_cache_gib=0.25, verify_window=0, seed_salt=0)
    assert early_only <= set(early) <= set(fpm.FIELDS) | set(fpm.PER_RANK)
    assert fp["protocol"] == PROTOCOL and fp["version"] == server.__version__
    assert fp["model.architecture"] == "llama" and fp["model.content_hash"] == "ab" * 32
    assert fp["model.config"] == fpm.digest(MODEL["config"])
    assert fp["model.tensors"] == fpm.digest(MODEL["tensors"])
    assert fp["kv_poison"] == 0 and make(kv_poison=True)["kv_poison"] == 1
    assert fp["prompt_cache_gib"] == 1.5 and isinstance(fp["prompt_cache_gib"], float)
    assert fp["page_bytes"] == [1024, 1024] and fp["kv_dtype"] == "bfloat16"
    assert fp["rank"] == 0 and fp["shard"] == "shard0"
    for k, v in ARGS.items():
        if k not in ("model", "kv_poison", "page_bytes"):
            assert fp[k] == v, k


def test_a_model_without_its_identity_is_refused():
    with pytest.raises(ValueError, match=r"^model identity lacks config, tensors$"):
        fpm.make(rank=0, shard="s", **dict(ARGS, model={"architecture": "a", "content_hash": "h"}))
    for k in fpm.MODEL_KEYS:
        m = {x: v for x, v in MODEL.items() if x != k}
        with pytest.raises(ValueError, match=k):
            fpm.make(rank=0, shard="s", **dict(ARGS, model=m))


@pytest.mark.parametrize("arg", sorted(OTHER))
def test_each_field_that_differs_is_named_with_both_values_and_the_fix(arg):
    field, value = OTHER[arg]
    label, verb, fix = fpm.FIELDS[field]
    a, b = make(0), make(1, **{arg: value})
    msg = fpm.compare([a, b])
    assert msg is not None and msg.startswith(f"ranks disagree on {label}: rank 0 {verb} "), msg
    assert f", rank 1 {verb} {fpm.show(b[field], a[field])}; {fix}" in msg
    assert fpm.show(a[field], b[field]) in msg
    with pytest.raises(FingerprintMismatch) as e:
        fpm.exchange_and_check(Gather([a, b]), a)
    assert str(e.value) == msg


@pytest.mark.parametrize("key", sorted(MODEL_OTHER))
def test_each_model_field_is_named(key):
    label, verb, fix = fpm.FIELDS["model." + key]
    b = make(1, model=dict(MODEL, **{key: MODEL_OTHER[key]}))
    msg = fpm.compare([make(0), b])
    assert msg.startswith(f"ranks disagree on {label}: rank 0 {verb} ") and msg.endswith(fix)


@pytest.mark.parametrize("field", ["protocol", "version"])
def test_protocol_and_version_are_named(field):
    a, b = make(0), make(1)
    b[field] = 99
    label, verb, fix = fpm.FIELDS[field]
    assert fpm.compare([a, b]) == (f"ranks disagree on {label}: rank 0 {verb} {a[field]}, "
                                   f"rank 1 {verb} 99; {fix}")


def test_the_first_field_in_order_and_the_first_rank_win():
    a, b, c = make(0, tp=3), make(1, tp=3), make(2, tp=3)
    c["context"], b["seed_salt"], c["seed_salt"] = 1, 5, 6
    assert "on context:" in fpm.compare([a, b, c]) and "rank 2" in fpm.compare([a, b, c])
    b["context"] = 2
    assert "rank 1 has 2" in fpm.compare([a, b, c])


def test_an_unknown_field_is_still_compared():
    a, b = make(0), make(1)
    a["future"], b["future"] = "x", "y"
    assert fpm.compare([a, b]) == ("ranks disagree on future: rank 0 has x, rank 1 has y; "
                                   f"{fpm.SAME_VERSION}")
    a["future"], b["future"] = "a" * 30, "b" * 30          # long values are cut where they differ
    assert fpm.compare([a, b]) == ("ranks disagree on future: rank 0 has " + "a" * 12 + ".., rank 1 "
                                   "has " + "b" * 12 + ".." + f"; {fpm.SAME_VERSION}")
    b["future"] = "a" * 30
    assert fpm.compare([a, b]) is None
    del b["future"]
    assert "rank 1 has <missing>" in fpm.compare([a, b])


def test_rank_numbers_tp_and_shards_are_checked_apart():
    a, b = make(0), make(1)
    assert fpm.compare([a, b]) is None
    assert fpm.compare([a, b], ["shard0", "shard1"]) is None
    assert fpm.compare([a, b], ["shard0", "other"]) == (
        "rank 1 holds shard shard1, but the shard rule gives rank 1 other; " + fpm.SAME_VERSION)
    assert fpm.compare([a, b], ["other", "shard1"]).startswith("rank 0 holds shard shard0")
    b["rank"] = 0
    assert fpm.compare([a, b]) == "rank 1 calls itself rank 0; give each process its own --rank"
    one = make(0)
    assert fpm.compare([one]) == "TP size is 2 but 1 ranks joined; start every rank with --tp 1"
    assert fpm.compare([make(0, tp=1)]) is None


def test_show_cuts_long_strings_only_past_where_they_differ():
    assert fpm.show(2.0, None) == "2" and fpm.show(2.5, None) == "2.5"
    assert fpm.show([1, 2], None) == "[1, 2]" and fpm.show(None, 1) == "<missing>"
    a, b = "sha256:" + "0" * 40 + "a", "sha256:" + "0" * 40 + "b"
    assert fpm.show(a, b) == a                               # differs at the end: all of it
    c, d = "x" * 30 + "A" * 10, "y" * 40
    assert fpm.show(c, d) == "x" * 12 + ".."                 # differs at 0: 12 kept
    e, f = "z" * 20 + "A" + "q" * 20, "z" * 20 + "B" + "q" * 20
    assert fpm.show(e, f) == e[:24] + ".."                   # 4 past the first difference
    assert fpm.show("q" * 21, "r" * 21) == "q" * 12 + ".."
    assert fpm.show("q" * 20, "r" * 20) == "q" * 20          # 20 and under: never cut
    assert fpm.show("q" * 16, 5) == "q" * 16
    g = "k" * 30
    assert fpm.show(g, 3) == g                               # the other is no string: whole
    assert fpm.show(True, None) == "True"
    assert fpm.show("q" * 30, "q" * 25) == "q" * 30            # no difference within the shorter
    h, i = "z" * 20 + "A" + "qqq", "z" * 20 + "B" + "qqq"
    assert fpm.show(h, i) == h                               # the cut would be the whole string


def test_digest_is_stable_and_order_free():
    import hashlib
    assert fpm.digest({"a": 1, "b": [1, 2]}) == fpm.digest({"b": [1, 2], "a": 1})
    assert fpm.digest({"a": 1}).startswith("sha256:") and len(fpm.digest(1)) == 7 + 64
    assert fpm.digest({"a": 1}) != fpm.digest({"a": 2})
    assert fpm.digest(b"ab") == "sha256:" + hashlib.sha256(b'"b\'ab\'"').hexdigest()   # str() of the rest
    import hashlib
    assert fpm.digest({"b": 1, "a": [1, 2]}) == "sha256:" + hashlib.sha256(
        b'{"a":[1,2],"b":1}').hexdigest()


class Gather:
    """A comm whose all_gather returns the given fingerprints (as JSON bytes)."""

    def __init__(self, fps):
        self.fps, self.sent = fps, []

    def all_gather_bytes(self, data):
        self.sent.append(data)
        return [json.dumps(f).encode() for f in self.fps]


def test_exchange_sends_compact_json_and_returns_the_list():
    a, b = make(0), make(1)
    g = Gather([a, b])
    assert fpm.exchange_and_check(g, a) == [a, b]
    assert g.sent == [json.dumps(a, separators=(",", ":")).encode()]
    with pytest.raises(FingerprintMismatch, match="shard rule"):
        fpm.exchange_and_check(Gather([a, b]), a, ["shard0", "x"])


def test_a_files_identity_reads_its_first_mib_only():
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d, "a"), Path(d, "b")
        head = b"GGUF" + bytes((1 << 20) - 4)
        a.write_bytes(head + b"tail-a")
        b.write_bytes(head + b"tail-b")                        # the same size, other bytes past 1 MiB
        assert fpm.file_identity(str(a)) == fpm.file_identity(str(b))


def test_a_folders_identity_is_its_files_names_sizes_and_heads(tmp_path):
    def folder(name, files, subdir=False):
        d = tmp_path / name
        d.mkdir()
        for n, data in files.items():
            (d / n).write_bytes(data)
        if subdir:
            (d / "sub").mkdir()
            (d / "sub" / "inner").write_bytes(b"not read")
        return fpm.file_identity(str(d))
    base = {"config.json": b"{}", "model.safetensors": b"\x00" * 64}
    one = folder("one", base)
    assert folder("two", dict(base), subdir=True) == one     # folders inside do not count
    assert folder("three", {**base, "model.safetensors": b"\x01" + b"\x00" * 63}) != one
    assert folder("four", {**base, "extra.txt": b""}) != one
    assert folder("five", {"config.json": b"{}", "model2.safetensors": b"\x00" * 64}) != one
    assert one != fpm.file_identity(str(tmp_path / "one" / "model.safetensors"))


def test_a_dummy_source_is_named_as_given_even_beside_a_file_of_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dummy:tiny").write_bytes(b"a file that happens to have the name")
    assert fpm.file_identity("dummy:tiny") == "dummy:tiny"
    assert fpm.file_identity("missing.gguf") == "missing.gguf"
