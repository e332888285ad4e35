"""`foldserve plan`: the acceptance numbers add up, and the smallest room governs."""
import argparse
import json
import math
import subprocess
import sys

from server import plan_cli
from server.planner.units import GIB


def run(argv, environ, capsys):
    p = argparse.ArgumentParser()
    plan_cli.add_arguments(p)
    rc = plan_cli.run(p.parse_args(argv), environ)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_acceptance_llama3_8b_at_131072_adds_up(capsys):
    rc, out, _ = run(["--model", "dummy:llama3-8b", "--context", "131072", "--parallel", "4",
                      "--room", "40", "--json"], {"TF_KV_PAGES": "on"}, capsys)
    assert rc == 0
    d = json.loads(out)
    for key in ("pages", "page_rows", "page_bytes", "bytes_per_token", "fixed_bytes",
                "prompt_cache_bytes", "floor_pages", "streams", "mode"):
        assert key in d
    assert d["mode"] == "on" and d["streams"] == 4
    assert d["pages"] * d["page_bytes"] + d["streams"] * d["fixed_bytes"] + d["prompt_cache_bytes"] <= 40 * GIB
    assert d["pages"] >= d["floor_pages"] >= math.ceil(131072 / d["page_rows"])
    assert d["page_bytes"] == d["bytes_per_token"] * d["page_rows"]


def test_at_tp3_the_smallest_room_governs(capsys):
    rc, out, _ = run(["--model", "dummy:llama3-8b", "--context", "8192", "--parallel", "4",
                      "--tp", "3", "--room", "3,2,4", "--json"], {}, capsys)
    d = json.loads(out)
    assert rc == 0 and d["governing_rank"] == 1 and d["room_bytes"] == 2 * GIB
    assert [r["room"] for r in d["ranks"]] == [3 * GIB, 2 * GIB, 4 * GIB]
    for r in d["ranks"]:
        assert d["pages"] * r["page_bytes"] + d["streams"] * r["fixed_bytes"] \
            + r["prompt_cache_bytes"] <= r["room"]


def test_room_under_the_floor_exits_2_with_the_numbers(capsys):
    rc, out, err = run(["--model", "dummy:llama3-8b", "--context", "131072", "--room", "4"],
                       {"TF_KV_PAGES": "on"}, capsys)
    assert rc == 2 and out == ""
    assert "room 4.00 GiB on rank 0 is under the floor" in err
    assert "the largest context that fits is" in err


def test_bad_tf_kv_pages_is_refused(capsys):
    rc, _, err = run(["--model", "dummy:tiny", "--room", "1"], {"TF_KV_PAGES": "maybe"}, capsys)
    assert rc == 2 and "TF_KV_PAGES='maybe' is not allowed" in err


def test_tf_room_gib_caps_and_fills_in(capsys):
    rc, out, _ = run(["--model", "dummy:tiny", "--device", "cpu", "--parallel", "2", "--json"],
                     {"TF_ROOM_GIB": "0.5", "TF_KV_PAGES": "off"}, capsys)
    d = json.loads(out)
    assert rc == 0 and d["room_bytes"] == GIB // 2 and d["mode"] == "off"


def test_startup_line_is_printed_without_json(capsys):
    rc, out, _ = run(["--model", "dummy:llama3-8b", "--context", "131072", "--parallel", "4",
                      "--room", "40"], {"TF_KV_PAGES": "all"}, capsys)
    assert rc == 0 and out.startswith("4 streams at once, the engine's own and 3 more taking ")
    assert out.rstrip().endswith("TF_KV_PAGES=all is the same as on: every stream on pages")


def test_the_planner_imports_no_numpy():
    code = ("import sys, server.planner, server.plan_cli; "
            "bad = [m for m in ('numpy', 'cupy') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_glm_4_7_flash_plan_says_latent_rows(capsys):
    """The KV layout spec's latent kind: bytes a token = layers x (latent + rope dims) x
    element size, the same on every rank at TP=2, and the plan line says so; an MHA model's
    line does not change."""
    argv = ["--model", "dummy:glm-4.7-flash", "--tp", "2", "--context", "131072", "--room", "40"]
    rc, out, _ = run(argv, {}, capsys)
    want = 47 * (512 + 64) * 4                       # float32 KV on the CPU
    assert rc == 0
    assert f"KV as latent rows (576 values a token and layer, the same on every rank), {want} bytes a token" in out
    rc, out, _ = run(argv + ["--json"], {}, capsys)
    d = json.loads(out)
    assert rc == 0 and d["bytes_per_token"] == want
    assert d["page_bytes"] == want * d["page_rows"]
    rc, out, _ = run(["--model", "dummy:llama3-8b", "--context", "8192", "--tp", "2",
                      "--room", "40"], {}, capsys)
    assert rc == 0 and "KV as" not in out and "latent" not in out


def test_latent_bytes_a_token_in_bf16_is_54_kb():
    """The issue's figure for the full 47-layer model in bf16 (the GPU's KV dtype): 54 KB."""
    from server.planner.layout import layouts
    from server.shapes.spec import shape
    spec = shape("glm-4.7-flash")
    for L in layouts(spec, 2, 2, 16):
        assert L.bytes_per_token == 47 * 576 * 2 == 54144
