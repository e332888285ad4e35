"""foldserve serve | generate | plan | check-pages | bench"""
from __future__ import annotations

import argparse
import functools
import logging
import sys


def build_parser() -> argparse.ArgumentParser:
    from server.flags import HelpFormatter, add_model_flags as _model_args
    ap = argparse.ArgumentParser(prog="foldserve", description=__doc__)
    from server import __version__
    ap.add_argument("--version", action="version", version=f"foldserve {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser = functools.partial(sub.add_parser, formatter_class=HelpFormatter)

    g = sub.add_parser("generate", help="generate from one prompt, printing as it comes")
    _model_args(g)
    g.add_argument("--chat", action="store_true", help="send PROMPT as one user message")
    g.add_argument("--max-tokens", type=int, default=64, help="tokens to generate at most")
    g.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    g.add_argument("--seed", type=int, default=None, help="sampling seed (default: a random one)")
    g.add_argument("--prefill-chunk", type=int, default=256, help="prompt tokens prefilled a round")
    g.add_argument("--json", action="store_true",
                   help="print one JSON object {prompt_ids, ids, text} instead of the text")
    g.add_argument("prompt", help="the prompt text")

    c = sub.add_parser("check-pages", help="paged stream == whole-window twin, byte for byte")
    _model_args(c)
    c.add_argument("--page-rows", type=int, default=16, help="rows per KV page of the paged stream")
    c.add_argument("--prefill-chunk", type=int, default=64, help="prompt tokens prefilled a round")

    pl = sub.add_parser("plan", help="print the pool plan without loading weights")
    from server import plan_cli
    plan_cli.add_arguments(pl)

    b = sub.add_parser("bench", help="load an OpenAI-compatible server and report its latency")
    from server import bench
    bench.add_arguments(b)

    s = sub.add_parser("serve", help="serve the OpenAI-compatible API")
    from server import serve
    serve.add_arguments(s)
    return ap


def main(argv=None) -> int:
    from server.log_format import LOG_DATE, LOG_FORMAT
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, datefmt=LOG_DATE)
    args = build_parser().parse_args(argv)
    import kernels
    kernels.init()             # numba's cache folder and settings, before any kernel compiles
    from server.config import ConfigError
    from server.engine.locate import ModelNotFound
    from server.shapes.spec import UnsupportedModel
    from server.engine.weights.loaded import WeightsError
    from server.text.gguf_meta import GGUFMetadataError
    from server.text.tokenizer import TokenizerError
    try:
        return _command(args)
    except (ConfigError, ModelNotFound, WeightsError, UnsupportedModel, TokenizerError,
            GGUFMetadataError) as e:
        print(f"foldserve: {e}", file=sys.stderr)      # what the user can act on, without a traceback
        return 2


def _command(args) -> int:
    if args.cmd == "generate":
        from server.generate import run
        return run(args)
    if args.cmd == "check-pages":
        from server.check_pages import run_check
        from server.engine.build import open_model
        opened = open_model(args.model, device=args.device)
        return run_check(opened.engine, page_rows=args.page_rows, prefill_chunk=args.prefill_chunk)
    if args.cmd == "plan":
        from server import plan_cli
        return plan_cli.run(args)
    if args.cmd == "bench":
        from server import bench
        return bench.run(args)
    if args.cmd == "serve":
        from server import serve
        return serve.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
