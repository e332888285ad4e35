"""Fingerprints: the ranks agree on everything that shapes the data plane, before it runs.

Every rank builds an ordered dict (make); all are gathered (exchange_and_check), and
every rank computes the same verdict from the same list, so a difference stops every
rank with the same message: the first differing field in this order, the rank, both
values, and the fix. Pure Python, no numpy: the check is reachable by host tests.

Two passes: `make_early` right after the ranks join, before any weight is read (the
settings, the model file's identity by size and a hash of its header, TP, versions), so
a mismatch stops every rank within seconds; `make` after the load, with the content hash,
the tensors and each shard's page bytes.

`rank` and `shard` legitimately differ between ranks: they are left out of the
equality and checked on their own (each rank's shard against what the shard rule
gives for that rank).
"""
from __future__ import annotations

import hashlib
import json
import os

import server
from server.ranks.rank_errors import FingerprintMismatch
from server.ranks.rendezvous import PROTOCOL

SAME_VERSION = "run the same foldserve version on every host"
SAME_MODEL = "every rank must load the same model file"
SAME_ENV = "set it the same on every host"


def _flag(name: str) -> str:
    return f"start every rank with the same {name}"


# field -> (label in messages, verb, fix); the order is the order of the check
FIELDS = {
    "protocol": ("protocol version", "has", SAME_VERSION),
    "version": ("foldserve version", "has", SAME_VERSION),
    "model.file": ("model file", "has", SAME_MODEL),
    "model.architecture": ("model architecture", "has", SAME_MODEL),
    "model.config": ("model config", "has", SAME_MODEL),
    "model.tensors": ("model tensors", "has", SAME_MODEL),
    "model.content_hash": ("model content hash", "has", SAME_MODEL),
    "tp": ("TP size", "has", _flag("--tp")),
    "kv_pages": ("TF_KV_PAGES", "resolved", SAME_ENV),
    "kv_poison": ("TF_KV_POISON", "has", SAME_ENV),
    "q8_0_x": ("TF_Q8_0_X", "has", SAME_ENV),
    "page_rows": ("page rows", "has", _flag("--page-rows")),
    "page_bytes": ("page bytes", "has", f"{SAME_MODEL}, with the same KV dtype and --page-rows"),
    "kv_dtype": ("KV dtype", "has", f"{_flag('--device')} and KV dtype"),
    "device": ("device", "has", _flag("--device")),
    "context": ("context", "has", _flag("--context")),
    "parallel": ("parallel", "has", _flag("--parallel")),
    "prefill_chunk": ("prefill chunk", "has", _flag("--prefill-chunk")),
    "prompt_cache_gib": ("prompt cache GiB", "has", _flag("--prompt-cache-gib")),
    "verify_window": ("verify window", "has", f"{_flag('draft settings')} (verify window)"),
    "seed_salt": ("seed salt", "has", _flag("seed salt")),
}
MODEL_KEYS = ("architecture", "config", "tensors", "content_hash")
PER_RANK = ("rank", "shard")        # differ by design; checked apart from the equality


def digest(value) -> str:
    """A short stable name for a large value (a config dict, a tensor list)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def make(*, rank: int, model: dict, tp: int, shard: str, kv_pages: str, kv_poison: bool,
         page_rows: int, page_bytes: list[int], kv_dtype: str, context: int, parallel: int,
         prefill_chunk: int, prompt_cache_gib: float, verify_window: int, seed_salt: int,
         q8_0_x: str = "auto") -> dict:
    """This rank's fingerprint. `model` holds architecture, config, tensors (names, shapes,
    dtypes) and content_hash; large values travel as digests. `kv_pages` is the resolved
    mode (on/off), `page_bytes` the bytes of one page for each rank's shard, in rank order."""
    missing = [k for k in MODEL_KEYS if k not in model]
    if missing:
        raise ValueError(f"model identity lacks {', '.join(missing)}")
    fp = {"protocol": PROTOCOL, "version": server.__version__}
    for k in MODEL_KEYS:
        v = model[k]
        fp["model." + k] = v if isinstance(v, (str, int, float, bool)) else digest(v)
    fp.update(tp=tp, kv_pages=kv_pages, kv_poison=int(bool(kv_poison)), q8_0_x=q8_0_x,
              page_rows=page_rows,
              page_bytes=[int(b) for b in page_bytes], kv_dtype=str(kv_dtype), context=context,
              parallel=parallel, prefill_chunk=prefill_chunk,
              prompt_cache_gib=float(prompt_cache_gib), verify_window=verify_window,
              seed_salt=seed_salt, rank=rank, shard=shard)
    return fp


HEADER_BYTES = 1 << 20       # a GGUF's header and metadata, a folder file's first MiB


def _head_size(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    return f"{os.path.getsize(path)}:{hashlib.sha256(head).hexdigest()[:16]}"


def file_identity(source: str) -> str:
    """The model as far as it is known without reading weights: dummy:SHAPE[:SEED] as
    given; a file's size and a hash of its first MiB; a folder's file names, each with
    its size and a hash of its first MiB. A missing path is named as given (the load
    that follows reports it)."""
    if source.startswith("dummy:") or not os.path.exists(source):
        return source
    if os.path.isdir(source):
        names = sorted(n for n in os.listdir(source) if os.path.isfile(os.path.join(source, n)))
        return digest({n: _head_size(os.path.join(source, n)) for n in names})
    return _head_size(source)


def make_early(*, rank: int, tp: int, model_file: str, device: str, kv_pages: str,
               kv_poison: bool, page_rows: int, context: int | None, parallel: int,
               prefill_chunk: int, prompt_cache_gib: float, verify_window: int,
               seed_salt: int, q8_0_x: str = "auto") -> dict:
    """What the ranks compare before the model loads (the same keys as `make` where they
    overlap; compare() passes over keys that no rank has). context None: not known yet."""
    fp = {"protocol": PROTOCOL, "version": server.__version__, "model.file": model_file,
          "tp": tp, "kv_pages": kv_pages, "kv_poison": int(bool(kv_poison)), "q8_0_x": q8_0_x,
          "page_rows": page_rows, "device": device, "context": context, "parallel": parallel,
          "prefill_chunk": prefill_chunk, "prompt_cache_gib": float(prompt_cache_gib),
          "verify_window": verify_window, "seed_salt": seed_salt, "rank": rank}
    return fp


def show(value, other) -> str:
    """A value as a message shows it; long strings are cut, but never where they still agree."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    text = "<missing>" if value is None else str(value)
    if isinstance(value, str) and isinstance(other, str) and len(text) > 20:
        same = next((i for i, (a, b) in enumerate(zip(text, other)) if a != b), len(text))
        cut = max(12, same + 4)
        if cut < len(text):
            return text[:cut] + ".."
    return text


def compare(fingerprints: list[dict], expected_shards: list[str] | None = None) -> str | None:
    """The message for the first field where some rank differs from rank 0, else None.
    expected_shards[r]: the shard the shard rule gives rank r, if the caller knows it."""
    base = fingerprints[0]
    for key, (label, verb, fix) in FIELDS.items():
        for r, fp in enumerate(fingerprints[1:], start=1):
            if fp.get(key) != base.get(key):
                a, b = base.get(key), fp.get(key)
                return (f"ranks disagree on {label}: rank 0 {verb} {show(a, b)}, "
                        f"rank {r} {verb} {show(b, a)}; {fix}")
    for key in fingerprints[0]:             # a field this table does not know yet
        if key not in FIELDS and key not in PER_RANK:
            for r, fp in enumerate(fingerprints[1:], start=1):
                if fp.get(key) != base.get(key):
                    return (f"ranks disagree on {key}: rank 0 has {show(base.get(key), fp.get(key))}, "
                            f"rank {r} has {show(fp.get(key), base.get(key))}; {SAME_VERSION}")
    world = len(fingerprints)
    for r, fp in enumerate(fingerprints):
        if fp.get("rank") != r:
            return f"rank {r} calls itself rank {fp.get('rank')}; give each process its own --rank"
    if base.get("tp") != world:
        return f"TP size is {base.get('tp')} but {world} ranks joined; start every rank with --tp {world}"
    if expected_shards is not None:
        for r, fp in enumerate(fingerprints):
            if fp.get("shard") != expected_shards[r]:
                return (f"rank {r} holds shard {fp.get('shard')}, but the shard rule gives rank {r} "
                        f"{expected_shards[r]}; {SAME_VERSION}")
    return None


def exchange_and_check(comm, fp: dict, expected_shards: list[str] | None = None) -> list[dict]:
    """Gather every rank's fingerprint; raise FingerprintMismatch on every rank on a
    difference (each computes the same verdict from the same list). Returns the list."""
    data = json.dumps(fp, separators=(",", ":")).encode()
    gathered = [json.loads(b) for b in comm.all_gather_bytes(data)]
    problem = compare(gathered, expected_shards)
    if problem is not None:
        raise FingerprintMismatch(problem)
    return gathered
