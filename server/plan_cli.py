"""`foldserve plan`: the plan from shapes only, so an operator can plan on paper.

    foldserve plan --model dummy:llama3-8b --tp 3 --context 1048576 --room 60,60,60 --json

A model file is read for its shapes alone (GGUF metadata, or a folder's config.json);
no weight is loaded. For a GGUF a second line gives each rank's weight bytes as the file
stores them (server/engine/weights/stored_bytes.py; a split that would cut a block is refused). The weights modules are imported lazily, here only: the planner's
core stays free of numpy.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from server.config import ConfigError, Env
from server.shapes.spec import ModelSpec, UnsupportedModel, shape
from server.flags import add_plan_flags, resolve_context, verify_window
from server.planner.describe import startup_line
from server.planner.layout import KV_BYTES, layouts
from server.planner.plan import PlanError, plan
from server.planner.units import GIB


def parse_rooms(text: str) -> list:
    try:
        rooms = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--room {text!r}: GiB per rank, e.g. 40 or 40,38,40") from None
    if any(r <= 0 for r in rooms):
        raise argparse.ArgumentTypeError(f"--room {text!r}: every room must be positive")
    return rooms


def add_arguments(p: argparse.ArgumentParser) -> None:
    """serve's plan flags (server/flags.py: the same names and defaults), then plan's own."""
    add_plan_flags(p)
    p.add_argument("--room", type=parse_rooms,
                   help="each rank's room in GiB, comma separated; one value applies to every rank "
                        "(default: TF_ROOM_GIB, else this host's room measured as serve does, "
                        "before any weights are loaded)")
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
    from server.engine.weights.gguf_file import GGUFFile
    from server.engine.weights.gguf_spec import Fields, spec_from_gguf
    reader = GGUFFile(model)                 # the loader's reader: the same spec, its header
                                             # walked without the tokenizer's strings
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
        if spec.moe and args.device == "cuda":
            from server.shapes.spec import moe_on_gpu
            raise UnsupportedModel(moe_on_gpu(spec))
        tp = args.tp or int(env.torchrun.get("WORLD_SIZE", 1))
        rooms_gib = args.room or ([env.room_gib] if env.room_gib else None)
        reserve = None
        if rooms_gib:
            if len(rooms_gib) == 1:
                rooms_gib = rooms_gib * tp
            if len(rooms_gib) != tp:
                raise PlanError(f"--room names {len(rooms_gib)} rooms for --tp {tp}: give one or one per rank")
            if env.room_gib:
                rooms_gib = [min(r, env.room_gib) for r in rooms_gib]
            rooms = [int(r * GIB) for r in rooms_gib]
        else:                       # as serve measures it (lazily: room.py may import cupy)
            from server.engine.room import measure
            room, reserve = measure(args.device, args.reserve_gib, None)
            rooms = [room] * tp
        from server.flags import drafts_for
        spec = drafts_for(args, spec)       # as serve: a recurrent family plans no verify rows;
                                            # --draft mtp plans the MTP layer's KV rows
        shards = layouts(spec, tp, KV_BYTES[args.device], args.page_rows, args.prefill_chunk)
        p = plan(shards, rooms, resolve_context(args.context, spec.max_context),
                 args.parallel, int(args.prompt_cache_gib * GIB), env.kv_pages, verify_window(args))
        stored = None
        if os.path.isfile(model):           # a GGUF: each rank's weight bytes as the file stores them
            from server.engine.weights import stored_bytes
            stored = stored_bytes.from_gguf(model, spec, tp)
    except (PlanError, ConfigError, UnsupportedModel, FileNotFoundError, ValueError) as e:
        print(f"foldserve plan: {e}", file=sys.stderr)
        return 2
    if args.json:
        d = p.as_dict()
        d.update(model=model, device=args.device, kv_dtype_bytes=KV_BYTES[args.device])
        if stored is not None:
            d.update(weight_bytes_per_rank=stored)
        if spec.moe:
            d.update(params=spec.n_params, active_params=spec.n_active_params)
        print(json.dumps(d, indent=2))
    else:
        print(startup_line(p, reserve))
        if spec.moe:
            from server.shapes.spec import describe_experts
            print(describe_experts(spec))
        if stored is not None:
            from server.engine.weights import stored_bytes
            print(stored_bytes.describe(stored))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="foldserve plan", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
