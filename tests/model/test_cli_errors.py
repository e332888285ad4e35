"""What a user sees when the model cannot be opened: one line naming the cause, exit status 2,
no traceback; and a GPU run of a model whose head dim the GPU kernel lacks says so before any
weights are read."""
from __future__ import annotations

import pytest

from server.cli import main


@pytest.mark.parametrize("argv,words", [
    (["serve", "--model", "/nonexistent/model.gguf"], "does not exist"),
    (["serve", "--model", "dummy:no-such-shape"], "unknown dummy shape"),
    (["generate", "--model", "/nonexistent/model.gguf", "hi"], "does not exist"),
    (["check-pages", "--model", "dummy:no-such-shape"], "unknown dummy shape"),
])
def test_a_model_that_cannot_open_is_one_line(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("foldserve: ") and words in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_a_file_that_is_not_gguf(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a GGUF file at all" * 10)
    assert main(["serve", "--model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"foldserve: {bad}: not a readable GGUF file") and "Traceback" not in err


def test_a_gpu_head_dim_the_kernel_lacks_is_refused_before_the_weights(monkeypatch):
    """tiny has head dim 16: on cuda the open stops with UnsupportedModel naming the dims,
    before Engine (which would need cupy) is built."""
    from server.engine import build
    from server.engine.spec import UnsupportedModel

    def no_engine(*a, **k):
        raise AssertionError("the engine was built")
    monkeypatch.setattr(build, "Engine", no_engine)
    with pytest.raises(UnsupportedModel, match=r"head dim 16.*64, 128.*--device cpu"):
        build.open_model("dummy:tiny", device="cuda")
