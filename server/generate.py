"""foldserve generate: one prompt, one stream, the text printed as it comes."""
from __future__ import annotations

import json
import sys

from server.engine.sampler import SamplerState, sample
from server.requests import SamplingParams
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep


def generate(opened, prompt_ids, params: SamplingParams, *, prefill_chunk=256, page_rows=16,
             on_token=None):
    """Greedy or sampled continuation of prompt_ids on a fresh paged stream -> generated ids."""
    eng = opened.engine
    total = len(prompt_ids) + params.max_tokens + 1
    pages = -(-total // page_rows)
    if eng.kv is None or eng.pool.pages < pages:
        eng.apply(PoolStep(True, pages, page_rows, (eng.page_bytes(page_rows),), 1, total))
    eng.apply(BeginStep(0, tuple(range(pages))))
    st = SamplerState(params, prompt_ids)
    eos = set() if params.ignore_eos else set(opened.tokenizer.eos_ids if opened.tokenizer else ())
    eos |= set(params.stop_token_ids)
    pos, out = 0, []
    while pos < len(prompt_ids):
        n = min(prefill_chunk, len(prompt_ids) - pos)
        logits = eng.apply(RoundStep((Chunk(0, pos, tuple(prompt_ids[pos:pos + n]), True),)))
        pos += n
    while len(out) < params.max_tokens:
        tok, _, _ = sample(logits[0], st)
        out.append(tok)
        if on_token:
            on_token(tok)
        if tok in eos or len(out) >= params.max_tokens:
            break
        logits = eng.apply(RoundStep((Chunk(0, pos, (tok,), True),)))
        pos += 1
    return out


def run(args) -> int:
    from server.engine.build import open_model
    from server.text.detok import IncrementalDetokenizer
    opened = open_model(args.model, device=args.device)
    tok = opened.tokenizer
    if tok is None:
        ids = [int(x) for x in args.prompt.split()] if args.prompt.strip() else []
        if not ids:
            print("error: a dummy model has no tokenizer; give the prompt as token ids, e.g. '1 2 3'",
                  file=sys.stderr)
            return 2
    elif args.chat:
        from server.text.chat_template import render_chat
        text = render_chat(tok.chat_template, [{"role": "user", "content": args.prompt}],
                           add_generation_prompt=True, bos_token=tok.bos_token,
                           eos_token=tok.eos_token, literal=tok.literal)
        ids = tok.literal.encode(text)       # the prompt's special tokens stay text, as served
    else:
        ids = tok.encode(args.prompt)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature,
                            seed=args.seed)
    detok = IncrementalDetokenizer(tok, skip_special_tokens=True, context=ids[-1:]) if tok else None
    pieces = []

    def show(t):
        s = detok.push(t) if detok else f" {t}"
        pieces.append(s)
        if not args.json:
            sys.stdout.write(s)
            sys.stdout.flush()

    out = generate(opened, ids, params, prefill_chunk=args.prefill_chunk, on_token=show)
    if detok:
        pieces.append(detok.flush())
    if args.json:
        text = tok.decode(out, skip_special_tokens=True) if tok else " ".join(map(str, out))
        print(json.dumps({"prompt_ids": ids, "ids": out, "text": text}))
    else:
        sys.stdout.write((pieces[-1] if detok else "") + "\n")
    return 0
