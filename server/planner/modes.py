"""TF_KV_PAGES: whether streams keep their KV on pages ("on") or in whole windows ("off").

    off, 0   whole windows for every stream
    on       every stream on pages, the engine's own too
    all      accepted: the same as on (the startup line says so)
    auto     pages from three ranks up; at one or two ranks pages only when whole windows
             for the requested streams do not fit the room, else windows

Values outside these are refused by config.Env.read; resolve_kv_pages refuses them too,
so a caller that skips Env still gets the variable and the allowed values named.
"""
from __future__ import annotations

from server.config import KV_PAGES_VALUES, ConfigError

PAGES_FROM_RANKS = 3


def resolve_kv_pages(value: str, n_ranks: int, windows_fit: bool) -> tuple[str, str]:
    """("on" | "off", a note for the startup line, "" when there is nothing to say)."""
    v = (value or "auto").strip().lower()
    if v in ("off", "0"):
        return "off", ""
    if v == "on":
        return "on", ""
    if v == "all":
        return "on", "TF_KV_PAGES=all is the same as on: every stream on pages"
    if v == "auto":
        if n_ranks >= PAGES_FROM_RANKS:
            return "on", f"TF_KV_PAGES=auto: pages at {n_ranks} ranks"
        if not windows_fit:
            return "on", "TF_KV_PAGES=auto: pages, whole windows for the requested streams do not fit"
        return "off", ""
    raise ConfigError(f"TF_KV_PAGES={value!r} is not allowed; use one of: {', '.join(KV_PAGES_VALUES)}")
