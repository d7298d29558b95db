"""Bounded memos: the one kind of cache on the tracing path.

Tracing remembers answers by signature (eager's meta results, recorded
lowerings, view steps, source lines, ...). Each such memo is a :class:`Memo`:
owned by the module that creates it, named, and bounded. A memo that reaches
its bound is emptied whole rather than evicting one entry: a long run's keys
drift (new shapes, new Python numbers), and the ones still in use come back
at their next call, while an eviction order would cost every lookup.

Every memo registers here by name, so ``lazycore.cache.clear()`` can forget
them all and ``lazycore.metrics.report()`` lists their sizes. Lookups are
plain ``dict`` lookups (``memo.get(key)``): a memo adds nothing to a hit.
"""

from __future__ import annotations

MEMOS: dict[str, "Memo"] = {}


class Memo(dict):
    __slots__ = ("name", "limit")

    def __init__(self, name: str, limit: int):
        super().__init__()
        if name in MEMOS:
            raise ValueError(f"a memo named {name!r} exists already")
        self.name = name
        self.limit = limit
        MEMOS[name] = self

    def put(self, key, value):
        """Remember ``value`` under ``key`` (emptying the memo first when it is full); returns it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def __repr__(self) -> str:
        return f"<Memo {self.name}: {len(self)} of {self.limit}>"


def clear_all() -> None:
    for memo in MEMOS.values():
        memo.clear()


def sizes() -> dict[str, tuple[int, int]]:
    """``name -> (entries, bound)`` of every memo."""
    return {name: (len(m), m.limit) for name, m in MEMOS.items()}
