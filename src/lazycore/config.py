"""Runtime settings, read from the environment once and changeable at run time.

``LAZYCORE_CACHE_SIZE``: how many compiled programs the compile cache keeps
(least recently used dropped first; default 256).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, fields


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


@dataclass
class Settings:
    cache_size: int = _env_int("LAZYCORE_CACHE_SIZE", 256)
    """Compiled programs kept by the compile cache."""
    pipeline: str | None = None
    """Pass pipeline for barriers; None: the compiler's default pipeline."""
    donation: bool = True
    """Let barriers donate dead input buffers to outputs of the same type."""


settings = Settings()


def configure(**changes) -> dict:
    """Change settings; returns the previous values of the changed ones."""
    names = {f.name for f in fields(Settings)}
    unknown = set(changes) - names
    if unknown:
        raise KeyError(f"unknown setting(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(names))})")
    if "cache_size" in changes and int(changes["cache_size"]) < 1:
        raise ValueError(f"cache_size must be at least 1, got {changes['cache_size']}")
    old = {k: getattr(settings, k) for k in changes}
    for k, v in changes.items():
        setattr(settings, k, v)
    return old


@contextlib.contextmanager
def override(**changes):
    """Settings changed inside a ``with`` block only."""
    old = configure(**changes)
    try:
        yield settings
    finally:
        configure(**old)
