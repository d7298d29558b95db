"""Bounded caches, every one registered here: the one list of what lazycore remembers.

Tracing remembers answers by signature (eager's meta results, recorded
lowerings, view steps, source lines, ...), and the runtime remembers
programs and walks. Each such cache has one owner (the module that creates
it), a name and a bound, and is registered here by name, so
``lazycore.cache.clear()`` can forget them all (:func:`clear_all`) and
``lazycore.metrics.report()`` lists their sizes (:func:`sizes`).

Most are a :class:`Memo`: a dict that, reaching its bound, is emptied whole
rather than evicting one entry: a long run's keys drift (new shapes, new
Python numbers), and the ones still in use come back at their next call,
while an eviction order would cost every lookup. Lookups are plain ``dict``
lookups (``memo.get(key)``): a memo adds nothing to a hit, except that
``get`` looked up on a dict subclass costs about 15 ns more than on a dict,
so code that runs per op or per node binds it once (``_of = memo.get``:
emptying a memo keeps it the same object). One cache per
object of some kind (a captured function's recordings) is a :class:`Family`,
which clears and counts its live members together. A cache of another shape (the
compiled programs' LRU) registers itself with :func:`register` and its bound.
"""

from __future__ import annotations

import weakref

MEMOS: dict[str, object] = {}
"""Name -> every registered cache (each with ``limit``, ``clear()`` and ``len()``).
tests/test_cache_registry.py scans the sources for module-level caches kept
anywhere else."""


def _enlist(name: str, cache) -> None:
    if name in MEMOS:
        raise ValueError(f"a memo named {name!r} exists already")
    MEMOS[name] = cache


class Memo(dict):
    __slots__ = ("name", "limit", "__weakref__")

    def __init__(self, name: str, limit: int, family: "Family | None" = None):
        """``family``: one of several caches of this kind, registered as the
        family (which must have this ``limit``); else registered as ``name``."""
        super().__init__()
        self.name = name
        self.limit = limit
        if family is not None:
            family.add(self)
        else:
            _enlist(name, self)

    def put(self, key, value):
        """Remember ``value`` under ``key`` (emptying the memo first when it is full); returns it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def __repr__(self) -> str:
        return f"<Memo {self.name}: {len(self)} of {self.limit}>"

    # a dict subclass compares by contents; a cache is itself (a WeakSet member, a registry entry)
    __eq__ = object.__eq__
    __hash__ = object.__hash__


class Family:
    """Caches of one kind, one per owner object (each captured function's
    recordings): registered once, by the kind's name; each member bounded
    by ``limit``, the family by ``limit`` per live member."""

    def __init__(self, name: str, limit: int):
        self.name = name
        self.member_limit = limit
        self.members: weakref.WeakSet = weakref.WeakSet()
        _enlist(name, self)

    def add(self, member) -> None:
        if member.limit != self.member_limit:
            raise ValueError(f"{member!r} is bounded by {member.limit}, its family {self.name} by {self.member_limit}")
        self.members.add(member)

    @property
    def limit(self) -> int:
        return self.member_limit * max(1, len(self.members))

    def __len__(self) -> int:
        return sum(len(m) for m in list(self.members))

    def clear(self) -> None:
        for m in list(self.members):
            m.clear()

    def __repr__(self) -> str:
        return f"<Family {self.name}: {len(self.members)} caches, {len(self)} entries>"


class _Registered:
    """A cache of its own shape, as the registry sees it."""

    __slots__ = ("name", "cache", "bound", "size")

    def __init__(self, name: str, cache, bound, size):
        self.name, self.cache, self.bound, self.size = name, cache, bound, size

    @property
    def limit(self) -> int:
        return self.bound() if callable(self.bound) else self.bound

    def __len__(self) -> int:
        return self.size() if self.size is not None else len(self.cache)

    def clear(self) -> None:
        self.cache.clear()


def register(name: str, cache, bound, size=None):
    """Register ``cache`` (with ``clear()``, and ``len()`` unless ``size()``
    counts its entries), owned by the caller, bounded by ``bound`` (an int,
    or a function giving it: a setting); returns ``cache``."""
    _enlist(name, _Registered(name, cache, bound, size))
    return cache


def clear_all() -> None:
    for memo in list(MEMOS.values()):
        memo.clear()


def sizes() -> dict[str, tuple[int, int]]:
    """``name -> (entries, bound)`` of every registered cache."""
    return {name: (len(m), m.limit) for name, m in list(MEMOS.items())}
