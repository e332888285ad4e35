"""`foldserve bench` in `vllm bench serve`'s names: --backend / --endpoint (the chat
endpoint), --dataset-name custom | sharegpt with --dataset-path, --num-warmups, --save-result
(vLLM's JSON layout and file name). Against a real `serve --model dummy:tiny` on the CPU
(a dummy model's text is ids written <1><2>; its chat template here renders the messages'
content alone, so a prompt's tokens are known exactly), and the flags' errors without one."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from free_ports import free_port
from server import bench

ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    return p.parse_args(list(argv))


def ids_text(ids) -> str:
    return "".join(f"<{i}>" for i in ids)


# ------------------------------------------------------------------ no server
def test_backend_and_endpoint_imply_each_other():
    assert bench.resolve_api(None, None) == ("openai", "/v1/completions")
    assert bench.resolve_api("openai-chat", None) == ("openai-chat", "/v1/chat/completions")
    assert bench.resolve_api(None, "/v1/chat/completions") == ("openai-chat", "/v1/chat/completions")
    assert bench.resolve_api("vllm", None) == ("vllm", "/v1/completions")
    with pytest.raises(bench.BenchError, match="--backend openai-chat sends to /v1/chat/completions, "
                                               "not --endpoint /v1/completions"):
        bench.resolve_api("openai-chat", "/v1/completions")
    with pytest.raises(bench.BenchError, match="--endpoint wants one of"):
        bench.resolve_api(None, "/v1/embeddings")


@pytest.mark.parametrize("argv,words", [
    (["--dataset-name", "custom"], "--dataset-name custom wants --dataset-path FILE"),
    (["--dataset-path", "x.jsonl"], "--dataset-path goes with --dataset-name custom or sharegpt"),
    (["--result-dir", "out"], "--result-dir goes with --save-result"),
    (["--result-filename", "r.json"], "--result-filename goes with --save-result"),
    (["--save-detailed"], "--save-detailed goes with --save-result"),
    (["--save-result", "--metadata", "novalue"], "--metadata wants KEY=VALUE, got 'novalue'"),
    (["--backend", "openai-chat", "--endpoint", "/v1/completions"], "not --endpoint /v1/completions"),
    (["--num-warmups", "-1"], "--num-warmups wants an integer >= 0, got -1"),
    (["--num-prompts", "0"], "--num-prompts wants an integer >= 1, got 0"),
    (["--max-concurrency", "0"], "--max-concurrency wants an integer >= 1, got 0"),
    (["--dataset-name", "custom", "--dataset-path", "/nonexistent/p.jsonl"],
     "--dataset-path /nonexistent/p.jsonl: no such file"),
])
def test_bad_flags_are_refused_by_name_before_any_request(argv, words, capsys):
    # port 9: nothing listens; a flag error must come first (status 2), not "cannot reach"
    assert bench.run(parse("--url", "http://127.0.0.1:9", *argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: ") and words in err and "Traceback" not in err, err


@pytest.mark.parametrize("argv", [["--backend", "tgi"], ["--dataset-name", "sonnet"],
                                  ["--endpoint", "/v1/embeddings"]])
def test_unknown_choices_are_argparse_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        parse("--url", "x", *argv)
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("text,words", [
    ('{"prompt": "<1>"}\n{"prompt": \n', "line 2: not JSON"),
    ('{"prompt": "<1>"}\n\n{"text": "<2>"}\n', "line 3: wants an object with a non-empty 'prompt'"),
    ('{"prompt": ""}\n', "line 1: wants an object with a non-empty 'prompt'"),
])
def test_a_bad_custom_file_names_its_line(tmp_path, text, words, capsys):
    f = tmp_path / "p.jsonl"
    f.write_text(text)
    assert bench.run(parse("--url", "http://127.0.0.1:9", "--dataset-name", "custom",
                           "--dataset-path", str(f))) == 2
    err = capsys.readouterr().err
    assert f"--dataset-path {f} {words}" in err, err


def test_sharegpt_takes_the_first_two_turns_and_skips_short_conversations(tmp_path):
    conv = [{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"},
                               {"from": "human", "value": "c"}]},
            {"conversations": [{"from": "human", "value": "alone"}]},
            {"id": "no conversations"},
            {"conversations": [{"from": "human", "value": "d"}, {"from": "gpt", "value": "e"}]}]
    f = tmp_path / "sg.json"
    f.write_text(json.dumps(conv))
    assert bench.load_sharegpt(f) == [("a", "b"), ("d", "e")]
    g = tmp_path / "sg.jsonl"                                 # the same entries, one a line
    g.write_text("\n".join(json.dumps(c) for c in conv))
    assert bench.load_sharegpt(g) == [("a", "b"), ("d", "e")]
    h = tmp_path / "none.json"
    h.write_text(json.dumps(conv[1:3]))
    with pytest.raises(bench.BenchError, match="no conversation of two turns or more"):
        bench.load_sharegpt(h)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"conversations": [{"from": "human"}, {"value": "x"}]}]))
    with pytest.raises(bench.BenchError, match="entry 1: a turn without a 'value' string"):
        bench.load_sharegpt(bad)


def test_samples_shuffle_with_the_seed_and_oversample_as_vllm(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"<{i}>"}) + "\n" for i in range(10)))
    base = ["--url", "x", "--dataset-name", "custom", "--dataset-path", str(f)]
    in_order = bench.samples(parse(*base, "--num-prompts", "10", "--disable-shuffle"))
    assert [s.prompt for s in in_order] == [f"<{i}>" for i in range(10)]
    assert all(s.output_len == bench.OUTPUT_LEN for s in in_order)
    a = bench.samples(parse(*base, "--num-prompts", "10", "--seed", "3"))
    assert [s.prompt for s in a] == [s.prompt for s in bench.samples(parse(*base, "--num-prompts",
                                                                           "10", "--seed", "3"))]
    assert sorted(s.prompt for s in a) == sorted(s.prompt for s in in_order) != [s.prompt for s in a]
    more = bench.samples(parse(*base, "--num-prompts", "25", "--custom-output-len", "7"))
    assert len(more) == 25 and {s.prompt for s in more} <= {f"<{i}>" for i in range(10)}
    assert {s.output_len for s in more} == {7}
    assert len(bench.samples(parse(*base, "--num-prompts", "25", "--no-oversample"))) == 10
    assert {s.output_len for s in bench.samples(parse(*base, "--output-len", "5"))} == {5}


def test_result_file_name_is_vllms_pattern(tmp_path):
    args = parse("--url", "x", "--save-result", "--result-dir", str(tmp_path), "--max-concurrency", "3")
    args.backend, args.endpoint = bench.resolve_api(None, None)
    assert bench.result_path(args, "org/some-model", "20261205-010203") == \
        tmp_path / "openai-infqps-concurrency3-some-model-20261205-010203.json"
    args = parse("--url", "x", "--save-result", "--request-rate", "2.5", "--label", "run1",
                 "--result-filename", "mine.json")
    args.backend, args.endpoint = bench.resolve_api("openai-chat", None)
    assert bench.result_path(args, "m", "d") == Path(".") / "mine.json"


# ------------------------------------------------------------------ a real dummy:tiny server
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench-tiny")
    template = d / "content.jinja"
    template.write_text('{% for m in messages %}{{ m["content"] }}{% endfor %}')
    port = free_port()
    log = open(d / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--model", "dummy:tiny",
                             "--port", str(port), "--context", "512", "--chat-template", str(template)],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, (d / "serve.log").read_text()[-2000:]
            assert time.time() < deadline, "the dummy:tiny server did not come up"
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        log.close()


def finished(url: str) -> int:
    """Requests the server has finished (its vLLM-named counter, every reason)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    return round(sum(float(m) for m in re.findall(
        r'^vllm:request_success_total\{[^}]*\} (\S+)$', text, re.M)))


def run_json(args, capsys) -> dict:
    rc = bench.run(args)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_chat_endpoint_custom_dataset_and_warmups(tiny, tmp_path, capsys):
    prompts = [list(range(10 + i, 10 + i + 3 + i)) for i in range(5)]    # 3..7 ids
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps({"prompt": ids_text(p)}) + "\n" for p in prompts))
    before = finished(tiny)
    m = run_json(parse("--base-url", tiny, "--backend", "openai-chat", "--dataset-name", "custom",
                       "--dataset-path", str(f), "--num-prompts", "5", "--disable-shuffle",
                       "--custom-output-len", "6", "--max-concurrency", "2", "--num-warmups", "3",
                       "--json"), capsys)
    assert (m["completed"], m["failed"], m["errors"]) == (5, 0, [])
    assert (m["backend"], m["endpoint"], m["dataset_name"]) == ("openai-chat", "/v1/chat/completions",
                                                                "custom")
    assert m["total_input_tokens"] == sum(len(p) for p in prompts)      # from the chat's usage
    assert m["total_output_tokens"] == 5 * 6                            # ignore_eos
    assert m["ttft_ms"]["mean"] > 0 and m["e2el_ms"]["mean"] > m["ttft_ms"]["mean"]
    assert (m["num_warmups"], m["warmups_failed"]) == (3, 0)
    assert finished(tiny) - before == 5 + 3                             # the warm-ups were sent


def test_sharegpt_on_completions_saves_vllms_json(tiny, tmp_path, capsys):
    conv = [([20, 21, 22], [30, 31, 32, 33, 34]), ([50, 51], [60, 61]), ([70], [80, 81, 82])]
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([{"conversations": [{"from": "human", "value": ids_text(p)},
                                                {"from": "gpt", "value": ids_text(r)}]}
                             for p, r in conv] + [{"conversations": []}]))
    out = tmp_path / "results"
    m = run_json(parse("--url", tiny, "--endpoint", "/v1/completions", "--dataset-name", "sharegpt",
                       "--dataset-path", str(f), "--num-prompts", "3", "--disable-shuffle",
                       "--save-result", "--save-detailed", "--result-dir", str(out),
                       "--metadata", "run=ci", "--metric-percentiles", "50,90", "--json"), capsys)
    (path,) = out.iterdir()
    assert re.fullmatch(r"openai-infqps-concurrency8-dummy:tiny-\d{8}-\d{6}\.json", path.name)
    r = json.loads(path.read_text())
    # max_tokens from each recorded reply's length (the server's /tokenize), ignore_eos
    assert r["output_lens"] == [len(rep) for _, rep in conv]
    assert r["input_lens"] == [len(p) for p, _ in conv]
    assert (r["completed"], r["failed"], r["num_prompts"], r["run"]) == (3, 0, 3, "ci")
    assert (r["backend"], r["model_id"], r["request_rate"], r["max_concurrency"]) == \
        ("openai", "dummy:tiny", "inf", 8)
    assert r["total_output_tokens"] == m["total_output_tokens"] == 10
    assert r["errors"] == ["", "", ""] and all(t > 0 for t in r["ttfts"])
    assert [len(x) for x in r["itls"]] == [n - 1 for n in r["output_lens"]]
    assert all(re.fullmatch(r"(<\d+>)+", t) for t in r["generated_texts"])
    for k in ("ttft", "tpot", "itl", "e2el"):
        assert {f"mean_{k}_ms", f"median_{k}_ms", f"std_{k}_ms", f"p50_{k}_ms", f"p90_{k}_ms"} <= set(r)
    assert r["mean_ttft_ms"] == pytest.approx(m["ttft_ms"]["mean"])
    assert r["median_e2el_ms"] == pytest.approx(m["e2el_ms"]["median"])
    assert r["duration"] == m["duration_s"] and r["output_throughput"] == m["output_throughput"]


def test_random_ids_reach_the_chat_endpoint_as_text(tiny, monkeypatch, capsys):
    monkeypatch.setattr(bench, "ID_RANGE", (10, 500))            # inside dummy:tiny's 512 ids
    m = run_json(parse("--url", tiny, "--backend", "openai-chat", "--num-prompts", "4",
                       "--random-input-len", "12", "--random-output-len", "5", "--json"), capsys)
    assert (m["completed"], m["failed"]) == (4, 0), m["errors"]
    assert m["total_input_tokens"] == 4 * 12 and m["total_output_tokens"] == 4 * 5
    assert m["dataset_name"] == "random"


def test_random_ids_the_server_cannot_write_are_a_clear_error(tiny, capsys):
    # the default ids [1000, 20000) lie past dummy:tiny's vocabulary: /detokenize refuses them
    assert bench.run(parse("--url", tiny, "--backend", "openai-chat", "--num-prompts", "1")) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench: the chat endpoint takes text: /detokenize") and "400" in err, err
