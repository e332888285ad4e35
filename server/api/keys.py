"""The API keys rank 0 serves under, from three sources, every key of each accepted:

- `--api-key-file PATH`: one key a line; blank lines and the whitespace around a key are
  ignored (no comments: a key may start with `#`). A file that holds no key, or cannot be
  read, stops the server, named. One that other local users may read is served, with a
  warning.
- `FOLDSERVE_API_KEY`: one key (server/config.py reads the variable); set but blank stops
  the server, named.
- `--api-key KEY`: one key, kept for compatibility, with a warning: a process's argv is
  readable by every local user (ps, /proc/PID/cmdline). Empty stops the server
  (`--api-key "$KEY"` with KEY unset must not serve keyless).

A key is printable ASCII (what an `Authorization` header carries); an error names where a
bad one is (the source, the line, the character), never the key itself. No key from any
source: the server is keyless. The keys are rank 0's alone: the ranks it launches get
neither the flags nor the variable (server/serve.py)."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from server.config import API_KEY_VARIABLE, ConfigError


@dataclass(frozen=True)
class KeySet:
    keys: tuple[str, ...] = ()          # each once, in the order found
    sources: tuple[str, ...] = ()       # where they came from, for the startup lines
    warnings: tuple[str, ...] = ()      # what rank 0 says before the model loads


def gather_keys(flag_key: str | None = None, key_file: str | None = None,
                env_key: str | None = None) -> KeySet:
    keys: list[str] = []
    sources, warnings = [], []
    if key_file is not None:
        where = f"--api-key-file {key_file}"
        keys += _read_key_file(key_file, where, warnings)
        sources.append(where)
    if env_key is not None:
        key = env_key.strip()
        if not key:
            raise ConfigError(f"{API_KEY_VARIABLE} is set but holds no key; unset it to "
                              "serve without one")
        keys.append(_checked(key, API_KEY_VARIABLE))
        sources.append(API_KEY_VARIABLE)
    if flag_key is not None:
        key = flag_key.strip()
        if not key:
            raise ConfigError("--api-key is empty; give a key, or leave the flag out to "
                              "serve without one")
        keys.append(_checked(key, "--api-key"))
        sources.append("--api-key")
        warnings.append("warning: --api-key is visible to every local user (ps, "
                        f"/proc/PID/cmdline); give the key in {API_KEY_VARIABLE} or "
                        "--api-key-file PATH instead")
    return KeySet(tuple(dict.fromkeys(keys)), tuple(sources), tuple(warnings))


def _read_key_file(path: str, where: str, warnings: list) -> list[str]:
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read it: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: not UTF-8 text (byte {e.start})") from None
    keys = [_checked(line.strip(), f"{where}, line {n}")
            for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not keys:
        raise ConfigError(f"{where}: it holds no key (one key a line)")
    if mode & stat.S_IROTH:
        warnings.append(f"warning: {where} is readable by every local user (mode "
                        f"{stat.S_IMODE(mode):04o}); chmod 600 it (or 640 with the group "
                        "the server runs as)")
    return keys


def _checked(key: str, where: str) -> str:
    for ch in key:
        if not " " <= ch <= "~":
            raise ConfigError(f"{where}: the key holds a character no HTTP header carries "
                              f"(U+{ord(ch):04X}); a key is printable ASCII")
    return key
