"""The one GGUF header walk (server/gguf_header.py) and the shapes its three readers keep:
the tokenizer's (lists, the wanted keys), the loader's (every key; numeric arrays as numpy,
string arrays counted, not decoded) and serve's early read; numpy-free for the text side."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from server import gguf_header
from server.engine.weights.gguf_file import GGUFFile, GGUFFormatError
from server.text.gguf_meta import GGUFMetadataError, read_metadata

TOKENS = ["a", "bé", "", "\u6771"]


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_uint8("general.u8", 7)
    w.add_int16("general.i16", -3)
    w.add_float64("general.f64", 0.1)
    w.add_bool("general.b", False)
    w.add_string("general.s", "héllo")
    w.add_uint32("llama.context_length", 2048)
    w.add_array("general.long", list(range(100)))
    w.add_array("general.short", [0.5, 1.5])
    w.add_array("tokenizer.ggml.tokens", TOKENS)
    w.add_array("general.nested", [[1, 2], [3]])
    w.add_tensor("t", np.arange(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p


def test_every_value_as_gguf_reads_it(path):
    head = gguf_header.read(path)
    theirs = gguf.GGUFReader(str(path)).fields
    assert list(head.values) == [k for k in theirs if not k.startswith("GGUF.")]   # its own three
    for key, value in head.values.items():                     # gguf flattens nested arrays
        assert value == (theirs[key].contents() if key != "general.nested" else [[1, 2], [3]]), key
    assert head.counts["tokenizer.ggml.tokens"] == 4 and head.counts["general.long"] == 100
    assert head.n_tensors == 1


def test_skipped_keys_are_stepped_over_and_still_counted(path):
    head = gguf_header.read(path, keep=lambda key: key == "general.s")
    assert head.values == {"general.s": "héllo"}
    assert head.counts["tokenizer.ggml.tokens"] == 4
    assert head.end == gguf_header.read(path).end


def test_the_three_readers_keep_their_shapes(path):
    meta = read_metadata(path)                                  # the tokenizer's
    assert meta["tokenizer.ggml.tokens"] == TOKENS and meta["general.long"] == list(range(100))
    assert "llama.context_length" not in meta
    f = GGUFFile(str(path))                                     # the loader's
    assert f.fields["tokenizer.ggml.tokens"].value is None and len(f.fields["tokenizer.ggml.tokens"].data) == 4
    long = f.fields["general.long"].value
    assert isinstance(long, np.ndarray) and long.dtype == np.int32 and long.tolist() == list(range(100))
    assert f.fields["general.short"].value == [0.5, 1.5] and f.fields["general.s"].contents() == "héllo"
    assert f.fields["general.nested"].value == [[1, 2], [3]] and len(f.fields["general.nested"].data) == 2
    assert [t.name for t in f.tensors] == ["t"] and f.tensors[0].data.view(np.float32).tolist() == list(range(8))
    from server.serve import _trained_context                   # serve's early read
    assert _trained_context(str(path)) == 2048


def test_refusals_name_the_file(tmp_path):
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(GGUFMetadataError, match=f"{bad}: not a GGUF file"):
        read_metadata(bad)
    with pytest.raises(GGUFFormatError, match=f"{bad}: not a GGUF file"):
        GGUFFile(str(bad))
    bad.write_bytes(b"GGUF" + (9).to_bytes(4, "little") + bytes(16))
    with pytest.raises(GGUFMetadataError, match="GGUF version 9 is not supported"):
        read_metadata(bad)


def test_the_walk_loads_no_numpy():
    code = "import sys, server.gguf_header, server.text.gguf_meta; print('numpy' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
