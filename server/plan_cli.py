"""`foldserve plan`: the plan from shapes only, so an operator can plan on paper.

    foldserve plan --model dummy:llama3-8b --tp 3 --context 1048576 --room 60,60,60 --json

A model file is read for its shapes alone (GGUF metadata, or a folder's config.json);
no weight is loaded. The weights modules are imported lazily, here only: the planner's
core stays free of numpy.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from server.config import ConfigError, Env
from server.shapes.spec import ModelSpec, UnsupportedModel, shape
from server.planner.describe import startup_line
from server.planner.layout import KV_BYTES, default_page_rows, layouts
from server.planner.plan import PlanError, plan
from server.planner.units import GIB


def parse_parallel(text: str) -> int:
    if text.strip().lower() == "auto":
        return 0
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--parallel {text!r}: give a number of streams or auto") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--parallel {n}: at least 1, or auto")
    return n


def parse_rooms(text: str) -> list:
    try:
        rooms = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--room {text!r}: GiB per rank, e.g. 40 or 40,38,40") from None
    if any(r <= 0 for r in rooms):
        raise argparse.ArgumentTypeError(f"--room {text!r}: every room must be positive")
    return rooms


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model file or folder (shapes only) or dummy:SHAPE")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (default 1)")
    p.add_argument("--context", type=int, help="the longest conversation in tokens (default: the model's)")
    p.add_argument("--parallel", type=parse_parallel, default=0, help="streams at once, or auto (default)")
    p.add_argument("--room", type=parse_rooms,
                   help="each rank's room in GiB, comma separated; one value applies to every rank "
                        "(default: TF_ROOM_GIB)")
    p.add_argument("--prompt-cache-gib", type=float, default=0.0, help="prompt cache budget (default 0)")
    p.add_argument("--page-rows", type=int, help="rows per KV page (default 16)")
    p.add_argument("--prefill-chunk", type=int, default=256, help="tokens per prefill chunk (default 256)")
    p.add_argument("--verify-window", type=int, default=1, help="rows a verify pass writes (1 without drafts)")
    p.add_argument("--device", choices=sorted(KV_BYTES), default="cuda",
                   help="KV dtype follows it: cuda bf16 (default), cpu float32")
    p.add_argument("--json", action="store_true", help="print every number as JSON")


def load_spec(model: str) -> ModelSpec:
    """Shapes only: dummy:SHAPE[:SEED], a .gguf file's metadata, or a folder's config.json."""
    if model.startswith("dummy:"):
        return shape(model.removeprefix("dummy:").partition(":")[0])
    if os.path.isdir(model):
        from server.engine.weights.hf_config import read_config, spec_from_config
        return spec_from_config(read_config(model), model)
    if not os.path.isfile(model):
        raise FileNotFoundError(f"--model {model}: no such file or folder")
    from gguf import GGUFReader
    from server.engine.weights.gguf_spec import Fields, spec_from_gguf
    reader = GGUFReader(model, "r")
    spec, _ = spec_from_gguf(Fields(reader, model), {t.name for t in reader.tensors})
    return spec


def run(args: argparse.Namespace, environ: dict | None = None) -> int:
    try:
        env = Env.read(environ)
        model = args.model or env.model
        if not model:
            from server.engine.locate import resolve
            model = resolve(None)
        spec = load_spec(model)
        rooms_gib = args.room or ([env.room_gib] if env.room_gib else None)
        if not rooms_gib:
            raise PlanError("give each rank's room: --room GIB[,GIB...] (or TF_ROOM_GIB)")
        if len(rooms_gib) == 1:
            rooms_gib = rooms_gib * args.tp
        if len(rooms_gib) != args.tp:
            raise PlanError(f"--room names {len(rooms_gib)} rooms for --tp {args.tp}: give one or one per rank")
        if env.room_gib:
            rooms_gib = [min(r, env.room_gib) for r in rooms_gib]
        page_rows = args.page_rows or default_page_rows(args.device)
        shards = layouts(spec, args.tp, KV_BYTES[args.device], page_rows, args.prefill_chunk)
        p = plan(shards, [int(r * GIB) for r in rooms_gib], args.context or spec.max_context,
                 args.parallel, int(args.prompt_cache_gib * GIB), env.kv_pages, args.verify_window)
    except (PlanError, ConfigError, UnsupportedModel, FileNotFoundError, ValueError) as e:
        print(f"foldserve plan: {e}", file=sys.stderr)
        return 2
    if args.json:
        d = p.as_dict()
        d.update(model=model, device=args.device, kv_dtype_bytes=KV_BYTES[args.device])
        print(json.dumps(d, indent=2))
    else:
        print(startup_line(p))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="foldserve plan", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
