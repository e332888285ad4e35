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
