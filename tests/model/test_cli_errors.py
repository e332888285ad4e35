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
    """tiny has head dim 16: on cuda (a GPU assumed present) the open stops with
    UnsupportedModel naming the dims, before Engine (which would need cupy) is built."""
    from server.engine import build, device
    from server.shapes.spec import UnsupportedModel

    def no_engine(*a, **k):
        raise AssertionError("the engine was built")
    monkeypatch.setattr(build, "Engine", no_engine)
    monkeypatch.setattr(device, "require_cuda", lambda: None)   # as on a machine with a GPU
    with pytest.raises(UnsupportedModel, match=r"head dim 16.*64, 128.*--device cpu"):
        build.open_model("dummy:tiny", device="cuda")


def test_cuda_without_cupy_says_what_to_install(monkeypatch, capsys):
    """--device cuda where cupy cannot be imported: one line naming the extra, exit 2, for
    serve (before any follower starts) and generate."""
    import builtins
    real = builtins.__import__

    def no_cupy(name, *a, **k):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_cupy)
    for argv in (["serve", "--device", "cuda", "--tp", "2", "--model", "dummy:tiny"],
                 ["generate", "--device", "cuda", "--model", "dummy:tiny", "hi"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("foldserve: --device cuda needs cupy") == 1 and "foldserve[cuda12]" in err, err
        assert "Traceback" not in err


@pytest.mark.parametrize("value", ["abc", "0", "-3"])
def test_parallel_takes_a_count_or_auto(capsys, value):
    with pytest.raises(SystemExit) as e:
        main(["serve", "--model", "dummy:tiny", "--parallel", value])
    assert e.value.code == 2
    assert "argument --parallel" in capsys.readouterr().err


def test_a_port_in_use_is_said_before_the_model_loads(monkeypatch, capsys):
    import socket
    from server.engine import build

    def no_load(*a, **k):
        raise AssertionError("the model was opened")
    monkeypatch.setattr(build, "open_model", no_load)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["serve", "--model", "dummy:tiny", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"foldserve: cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err


@pytest.mark.parametrize("template,words", [
    ("{% for m in messages %}{{ m['content'] }", "does not parse (line 1)"),
    (None, "no such file"),
    (b"\xff\xfe{{ x }}", "cannot read it"),
])
def test_a_bad_chat_template_stops_serve_before_the_model_loads(monkeypatch, capsys, tmp_path,
                                                                template, words):
    """--chat-template is read and compiled first: a missing, unreadable or broken template
    costs no load (it used to be read after the model had loaded)."""
    from server.engine import build

    def no_load(*a, **k):
        raise AssertionError("the model was opened")
    monkeypatch.setattr(build, "open_model", no_load)
    f = tmp_path / "chat.jinja"
    if isinstance(template, bytes):
        f.write_bytes(template)
    elif template is not None:
        f.write_text(template)
    assert main(["serve", "--model", "dummy:tiny", "--port", "0", "--chat-template", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("foldserve: --chat-template ") and words in err, err
    assert "Traceback" not in err and err.count("\n") == 1


def test_a_port_in_use_moves_on_with_port_retries_and_is_let_go_after(monkeypatch, capsys):
    """deploy/one-host.sh passes --port-retries 10: beside `make serve` (port 8000) it takes
    the next free port and says which before the model loads; a start that fails lets the
    port go."""
    import socket
    from server.api.http_socket import claim
    from server.engine import build

    class Loaded(Exception):
        pass

    def stop_at_load(*a, **k):
        raise Loaded
    monkeypatch.setattr(build, "open_model", stop_at_load)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(Loaded):
            main(["serve", "--model", "dummy:tiny", "--port", str(port), "--port-retries", "10"])
        err = capsys.readouterr().err
        assert f"foldserve: port {port} on 127.0.0.1 is in use" in err
        got = int(err.split("serving on port ")[1].split()[0])
        assert port < got <= port + 10
    sock, _ = claim("127.0.0.1", got)                  # let go: it can be claimed again
    sock.close()
