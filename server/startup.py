"""Rank 0's startup block: what an operator reads once the ranks agreed and the pool is
planned, one topic a line, e.g.

    foldserve 0.1.0: the pool is planned
      model         SmolLM2-135M-Instruct.Q4_1 (llama, 30 layers), weights 540 MiB on rank 0, loaded in 9.8 s
      ranks         TP 2 on cpu, KV float32; rank 1 of 2 governs (the smallest room)
      KV pool       pages: 3276 pages of 16 rows = 52416 tokens, 1.20 GiB
      streams       4 at once, context 8192 tokens (enough for six whole windows), 12 MiB fixed each
      prompt cache  1024 pages = 16384 tokens, 256 MiB
      room          3.1 GiB left after a 2.0 GiB reserve
      rounds        at most 512 tokens, prefill chunks of 256 (512 for a prompt alone)
      modes         TF_KV_PAGES=auto (pages at 3 ranks), TF_KV_POISON=0, CUDA graphs n/a
      plan          <the plan line, as `foldserve plan` prints it for the same arguments>

Pure Python over what the caller measured (no numpy: weight bytes come from the arrays'
own nbytes).
"""
from __future__ import annotations

import server
from server.planner.describe import count
from server.planner.units import size


def weight_bytes(tree) -> int:
    """Bytes of every array in a nest of dicts, lists and objects with nbytes."""
    if hasattr(tree, "nbytes"):
        return int(tree.nbytes)
    if isinstance(tree, dict):
        return sum(weight_bytes(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return sum(weight_bytes(v) for v in tree)
    if hasattr(tree, "__dict__"):
        return sum(weight_bytes(v) for v in vars(tree).values())
    return 0


def _modes(env, kv_note: str, device: str, cuda_graphs: bool | None) -> str:
    pages = f"TF_KV_PAGES={env.kv_pages}" + (f" ({kv_note.removeprefix('TF_KV_PAGES=auto: ')})"
                                             if kv_note else "")
    parts = [pages, f"TF_KV_POISON={int(env.kv_poison)}"
             + (" (pages NaN-filled before use: debugging)" if env.kv_poison else "")]
    if device == "cuda":
        parts.append("CUDA graphs " + ("on" if cuda_graphs else "off (TF_CUDA_GRAPHS=0)"))
    return ", ".join(parts)


def startup_block(*, plan, plan_line: str, model: str, spec, weights: int, load_s: float,
                  device: str, kv_dtype: str, reserve: int | None, env, token_budget: int,
                  prefill_chunk: int, cuda_graphs: bool | None = None,
                  solo_chunk: int | None = None, prefill_keys: int | None = None) -> list[str]:
    g = plan.rank
    tp = len(plan.ranks)
    ranks = f"TP {tp} on {device}, KV {kv_dtype}"
    if tp > 1:
        ranks += f"; rank {plan.governing} of {tp} governs (the smallest room)"
    if plan.paged:
        tokens = plan.pages * plan.page_rows
        pool = (f"pages: {plan.pages} pages of {plan.page_rows} rows = {tokens} tokens, "
                f"{size(plan.pages * g.page_bytes)}")
        whole = plan.pages // plan.floor_pages
        reach = f"enough for {count(whole)} whole window{'s' if whole != 1 else ''}"
    else:
        tokens = plan.streams * plan.window_rows
        pool = (f"whole windows: {plan.streams} x {plan.window_rows} rows = {tokens} tokens, "
                f"{size(g.kv_bytes)}")
        reach = "each its own window"
    cache = (f"{plan.cache_pages} pages = {plan.cache_pages * plan.page_rows} tokens, "
             f"{size(g.prompt_cache_bytes)}" if plan.cache_pages else "off")
    if plan.snap_slots:                  # a recurrent family: its kept states beside the rows
        cache = (f"{plan.cache_pages} pages = {plan.cache_pages * plan.page_rows} tokens and "
                 f"{plan.snap_slots} snapshot slots of {size(g.snap_bytes)} (recurrent states), "
                 f"{size(g.prompt_cache_bytes)}")
    room = (f"{size(g.room, 1)} (TF_ROOM_GIB)" if reserve is None
            else f"{size(g.room, 1)} left after a {size(reserve, 1)} reserve")
    kv_note = next((n for n in plan.notes if n.startswith("TF_KV_PAGES=")), "")
    rows = [
        ("model", f"{model} ({spec.arch}, {spec.n_layers} layers), weights {size(weights)} on "
                  f"rank 0, loaded in {load_s:.1f} s"),
        ("ranks", ranks),
        ("KV pool", pool),
        ("streams", f"{plan.streams} at once, context {plan.context} tokens ({reach}), "
                    f"{size(g.fixed_bytes)} fixed each"),
        ("prompt cache", cache),
        ("room", room),
        ("rounds", f"at most {token_budget} tokens, prefill chunks of {prefill_chunk}"
                   + (f" ({solo_chunk} for a prompt alone)" if solo_chunk and solo_chunk > prefill_chunk else "")
                   + (f", at most {prefill_keys} keys read beside decodes" if prefill_keys else "")),
        ("modes", _modes(env, kv_note, device, cuda_graphs)),
        ("plan", plan_line),
    ]
    return [f"foldserve {server.__version__}: the pool is planned"] + [
        f"  {k:<13} {v}" for k, v in rows]
