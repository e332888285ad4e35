"""Configuration: frozen dataclasses, and every TF_* / FOLDSERVE_* variable read here and nowhere else."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

KV_PAGES_VALUES = ("auto", "on", "off", "0", "all")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Env:
    kv_pages: str = "auto"          # TF_KV_PAGES: auto | on | off | 0 | all
    kv_poison: bool = False         # TF_KV_POISON=1: NaN-fill pages before use
    room_gib: float | None = None   # TF_ROOM_GIB: cap on the room a rank reports
    model: str | None = None        # FOLDSERVE_MODEL: default model path
    torchrun: dict = field(default_factory=dict)  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as set
    local_rank: int | None = None   # LOCAL_RANK: which GPU of this host (else the rank)

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
        return Env(kv_pages=pages, kv_poison=poison_raw == "1", room_gib=room_gib,
                   model=e.get("FOLDSERVE_MODEL") or None, torchrun=torchrun,
                   local_rank=local_rank)

    @property
    def kv_pages_static(self) -> str:
        """TF_KV_PAGES as far as it resolves before planning: on, off, or auto (rank 0's plan
        decides auto from the rooms). `all` is `on`; `0` is `off`."""
        return {"all": "on", "0": "off"}.get(self.kv_pages, self.kv_pages)


@dataclass(frozen=True)
class EngineConfig:
    """What a rank's data plane needs to know; every field is part of the fingerprint."""
    model: str = ""
    device: str = "cpu"             # cpu | cuda
    context: int = 4096             # --context: the longest conversation, in tokens
    parallel: int = 4               # --parallel: streams at once (0 = auto)
    page_rows: int = 16             # --page-rows
    prefill_chunk: int = 256        # --prefill-chunk
    prompt_cache_gib: float = 0.0   # --prompt-cache-gib
    reserve_gib: float | None = None  # --reserve-gib (None: max(2 GiB, 5%))
    verify_window: int = 1          # 1 without drafts
    seed_salt: int = 0
    tp: int = 1
    env: Env = field(default_factory=Env)
