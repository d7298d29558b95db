"""The runtime's caches, each with a bound and one owner (this module).

- :data:`CACHE`: compiled programs by key (:func:`lazycore.runtime.programs.make_key`
  says what a key covers, and why a hit needs no structural comparison); at
  most ``settings.cache_size`` programs, the least recently used dropped first,
  and fewer where the process nears the kernel's limit on memory mappings
  (:data:`MAPPINGS_SHARE`).
- :data:`PACKS`: device copies of recent scalar packs.
- on disk, the persistent compile cache shared by processes
  (:mod:`lazycore.runtime.diskcache`, which owns it; ``clear(disk=True)`` empties it).

The tracing path's memos (eager's meta results, view steps, source lines,
...) and the barrier's recalled plans (:mod:`lazycore.runtime.stepplans`,
:mod:`lazycore.runtime.buckets`: the one replayer's) are
:class:`lazycore.ir.memo.Memo` objects, each owned by its module.
:func:`clear` forgets all of these.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from lazycore.ir import events, memo
from lazycore.ir.context import LOCK
from lazycore.ir.config import settings
from lazycore.runtime import hostmem, pjrt
from lazycore.runtime.diskcache import DISK


MAPPINGS_SHARE = 0.5
"""The share of the kernel's limit on a process's memory mappings
(``vm.max_map_count``, 65,530 by default) past which :data:`CACHE` gives back
its least recently used programs. XLA's CPU executables hold their kernels'
JIT-compiled code in memory mappings of their own, three per object file (a
transformers model's training step: 500 to 800), so 256 such programs pass
the limit, and the next mapping XLA or LLVM asks for fails: the process
crashed inside a compile (test workers that had trained some 50 models)."""

HOLD_STEP = 1024
"""After a give-back that freed nothing (the mappings are held elsewhere), the
least number of mappings the process must grow by before the next insert
gives programs back again (or a 64th of the kernel's limit, where that is
more: some two programs of a transformers training step). Without it each
insert dropped another quarter in vain: a process past the share with
mappings not the cache's drained its cache a quarter per compile, and a
training loop's own programs recompiled at every step."""


MAPPINGS_PER_INSERT = 1024
"""The most mappings the process is taken to gain between two inserts (a
transformers training step's program holds 500 to 800). While the last
reading plus this many per insert since stays under the budget, an insert
does not read :func:`_mappings` again: reading ``/proc/self/maps`` takes
about 0.35 ms per thousand mappings, a tenth of a small program's compile
at 5,000 (1.8% of test_complex's time, read at every insert). Past the
budget, or within this many per insert of it, every insert reads it."""


def _mapping_limit() -> int | None:
    try:
        with open("/proc/sys/vm/max_map_count", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None  # (no such limit to read: not Linux)


def _mappings() -> int:
    with open("/proc/self/maps", "rb") as f:
        return f.read().count(b"\n")


class CompileCache:
    """LRU map from key to compiled program; safe from any thread (a lookup
    and its move to the recent end, or an insert and its evictions, are one
    step under the cache's own lock). Besides its bound on programs, an
    insert that finds the process past :data:`MAPPINGS_SHARE` of its mapping
    limit drops the least recently used quarter of the programs until the
    process is below it, or until a quarter dropped frees none (the mappings
    are then not the cache's: programs held elsewhere, the user's own); it
    then gives none back until the process has grown by :data:`HOLD_STEP`."""

    def __init__(self):
        self._entries: OrderedDict[bytes, object] = OrderedDict()
        self._lock = threading.Lock()
        self.mapping_limit = _mapping_limit()
        self._held_at: int | None = None  # (mappings when a give-back last freed nothing)
        self._read: int | None = None  # (mappings at the last reading)
        self._unread = 0  # (inserts since)

    def get(self, key: bytes):
        with self._lock:
            exe = self._entries.get(key)
            if exe is not None:
                self._entries.move_to_end(key)
        if exe is not None:
            events.bump("cache_hits")
        return exe

    def put(self, key: bytes, exe) -> None:
        with self._lock:
            self._entries[key] = exe
            self._entries.move_to_end(key)
            while len(self._entries) > settings.cache_size:
                self._entries.popitem(last=False)
            if self.mapping_limit is not None:
                budget = int(self.mapping_limit * MAPPINGS_SHARE)
                self._unread += 1
                if self._read is None or self._read + self._unread * MAPPINGS_PER_INSERT > budget:
                    self._give_back_mappings(budget)

    def _give_back_mappings(self, budget: int) -> None:
        mappings = first = self._read = _mappings()
        self._unread = 0
        if mappings <= budget:
            self._held_at = None
            return
        if self._held_at is not None and mappings < self._held_at + max(HOLD_STEP, self.mapping_limit // 64):
            return
        self._held_at = None
        while mappings > budget and len(self._entries) > 1:
            for _ in range(max(1, (len(self._entries) - 1) // 4)):
                self._entries.popitem(last=False)
                events.bump("programs_given_back")
            before, mappings = mappings, _mappings()
            self._read = mappings
            if mappings >= before:
                self._held_at = mappings
                break
        hostmem.give_back_freed(first - mappings)  # what the dropped programs held

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        read = self.mapping_limit is not None and bool(self._entries)  # (an empty cache drops no mappings)
        before = _mappings() if read else 0
        with self._lock:
            self._entries.clear()
            self._held_at = None
        if self.mapping_limit is not None:
            hostmem.give_back_freed(max(0, before - _mappings()) if read else 0)


CACHE = CompileCache()


class PackCache:
    """Device copies of recent scalar packs: a loop whose numbers do not
    change (a fixed learning rate) transfers nothing after its first step.

    Room for 256: a padded program's pack holds its valid sizes, new at every
    token of a ``generate()`` call (a 64-token call makes 67 packs), and a
    least-recently-used map smaller than one call's packs misses on every one
    of them in the next call too. A pack is a few numbers on the device."""

    def __init__(self, size: int = 256):
        self.size = size
        self.entries: dict[tuple, object] = {}

    def get(self, host: np.ndarray, device):
        with LOCK:  # (a barrier's, which holds it already; the pop and put below are one step)
            return self._get(host, device)

    def _get(self, host: np.ndarray, device):
        key = (device.name, host.dtype.str, host.tobytes())
        buf = self.entries.pop(key, None)
        if buf is None:
            with events.timed("transfer"):
                buf = pjrt.to_device(host, device.pjrt)
            events.bump("transfers_to_device")
            events.bump("bytes_to_device", host.nbytes)
            if len(self.entries) >= self.size:
                self.entries.pop(next(iter(self.entries)))
        self.entries[key] = buf  # most recent last
        return buf

    def clear(self) -> None:
        with LOCK:
            self.entries.clear()


PACKS = PackCache()

memo.register("runtime.programs", CACHE, lambda: settings.cache_size)
memo.register("runtime.scalar_packs", PACKS, PACKS.size, size=lambda: len(PACKS.entries))


def size() -> int:
    return len(CACHE)


def clear(disk: bool = False) -> None:
    """Forget every compiled program, the device copies of recent scalar
    packs and every registered memo (:mod:`lazycore.ir.memo`: the tracing
    path's, the barrier plans kept for recall); ``disk=True`` also
    empties the persistent compile cache's folder (other processes' programs too).
    Under :data:`lazycore.ir.context.LOCK`: no barrier or recording is half way through."""
    with LOCK:
        _clear(disk)


def _clear(disk: bool) -> None:
    if disk:
        DISK.clear()
    CACHE.clear()
    PACKS.clear()
    memo.clear_all()
