"""Lowering recordings kept on disk, so a new process's first step replays instead of recording.

Off unless ``LAZYCORE_RECORDINGS_ON_DISK=1`` (``settings.recordings_on_disk``).
A tiny GPT-2 AdamW step replayed from loaded recordings built a graph with
one broadcast of a float parameter fewer (319 against 320), so the program's
key differed and the second process compiled: AdamW's ``addcmul_(g, g,
value=1 - beta2)`` is one signature for one handle twice and for a view
read twice (two handles); the dispatcher recorded each aliasing, but stored
the second in the first's place, so the store kept the second alone, which
fits any aliasing and served every call (one shared broadcast, where the
recording process had one per recording). The dispatcher now keeps a
recording for another aliasing beside the first (:data:`ALIASED`).

The dispatcher records an op's lowering once per call signature
(:func:`lazycore.trace.recipes.record_call`) and replays the recording after
that. In a new process every signature is new: a tiny GPT-2's first token
from the disk cache spent 74 ms of its ~130 ms of main-thread CPU in 73
recordings. This store keeps those recordings next to the programs and the
meta results (:mod:`.meta_store`) in the persistent compile cache
(``LAZYCORE_CACHE_DIR``, :meth:`lazycore.runtime.diskcache.DiskCache.store_data`
as the ``recordings`` kind), as the plain data :func:`lazycore.trace.recipes.dump`
makes of them, by the meta store's signature text (the op's name for its id,
the layouts' values) and the floats' key. A process reads the store at its
first new signature; a signature found there gets its recordings in its memo
before its first call, which then replays (the ``recordings_loaded`` counter
counts them, ``recordings`` those recorded).

What a recording depends on is in the store's key: the source of lazycore's
``ir`` and ``trace`` layers, the op table (``dialect``) and this frontend,
by contents (an edited lowering must not find its old recordings), torch's
version, the settings (other than the cache's folder and the dump folder),
and the layout of the stored data. Only built-in lowerings are kept: once a
lowering is registered or removed in the process
(:func:`.lowering.register`), the store is neither read nor written again
(a user's function is not covered by any digest, as the compile cache keys
programs of user lowerings by their StableHLO). Recordings of loops and
branches, of uploads, or whose results are on another device are not kept
(:func:`~lazycore.trace.recipes.dump` refuses them).

The store is a pickle, read only through the cache's checks (the folder and
the entry this user's alone to write, its digest keyed with the folder's
secret); otherwise a warning names it and the lowerings are recorded. New
recordings are written at the first barrier after them (merged with what
other processes wrote, at most :data:`LIMIT` signatures), at most
:data:`WRITES` times while the process runs and once more when it exits.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import importlib.util
import pickle
from pathlib import Path

import torch

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.runtime.diskcache import DISK, warn
from lazycore.trace import recipes

from . import lowering
from .tensor import layout_key, lc_device

_FORMAT = 1
"""The layout of a stored table; part of the key."""
LIMIT = 20_000
"""Signatures kept in the folder's store."""
WRITES = 4
"""Writes at barriers in one process (the one at exit aside)."""
_UNKEYED_SETTINGS = ("cache_dir", "cache_max_bytes", "dump_dir")


def _sources() -> bytes:
    """A digest of the sources a recording depends on, by name and contents."""
    roots = [Path(importlib.util.find_spec(m).origin).parent
             for m in ("lazycore.ir", "lazycore.trace", "lazycore.dialect")] + [Path(__file__).parent]
    parts = sorted(str(p.relative_to(root.parent)).encode() + b"\0"
                   + hashlib.blake2b(p.read_bytes(), digest_size=16).digest()
                   for root in roots for p in root.rglob("*.py"))
    return hashlib.blake2b(b"".join(parts), digest_size=16).digest()


class StoredMemo(dict):
    """A signature's recordings (dispatch's memo: the floats' key -> ``(recipe,
    layout)``) for a signature the store can keep: ``disk`` is its text."""

    __slots__ = ("disk",)


ALIASED = object()
"""First part of the memo key ``(ALIASED, key, pattern)`` of a recording the
dispatcher made for inputs aliased as ``pattern`` (:func:`lazycore.trace.recipes.alias_pattern`)
where the one under ``key`` is for another aliasing: kept beside it, not in
its place (dispatch._lower), so another process's memo holds both."""


def _stable(key) -> tuple:
    """A memo key (the floats' values, or their value class, either for an
    aliasing of the inputs) as data another process reads alike."""
    if type(key) is tuple and len(key) == 3 and key[0] is ALIASED:
        return ("a", _stable(key[1]), key[2])
    vclass = recipes.value_class_parts(key)
    return ("c", vclass) if vclass is not None else ("v", key)


def _memo_key(stable):
    if stable[0] == "a":
        return (ALIASED, _memo_key(stable[1]), stable[2])
    return recipes.value_class_of(stable[1]) if stable[0] == "c" else stable[1]


class RecipeStore:
    """The folder's recordings, read at the first new signature of a process."""

    def __init__(self):
        self._read: dict | None = None
        self._where: tuple | None = None
        self._pending: list = []
        self._writes = 0
        self._sources: bytes | None = None
        self._state: tuple | None = None  # what the last key covered, and the key
        self._key = b""
        self.off = False
        """A lowering was registered or removed: nothing is read or written from now on."""

    def _entry(self, device) -> bytes:
        """The store's key for recordings made now for ``device`` (made again
        only when what it covers changed: ~0.15 ms a key, a new signature's)."""
        # what lowerings read besides their arguments: the settings, eager's thread count (its loops'
        # splits: a change drops the recordings, ops.eager_loops), oneDNN, the device's platform
        state = (tuple(vars(settings).values()), torch.get_num_threads(), torch._C._get_mkldnn_enabled(),
                 device.platform)
        if state == self._state:
            return self._key
        if self._sources is None:
            self._sources = _sources()
        keyed = [(f.name, getattr(settings, f.name)) for f in dataclasses.fields(settings)
                 if f.name not in _UNKEYED_SETTINGS]
        machine = (*state[1:], torch.backends.cpu.get_cpu_capability())  # (and eager's kernels' vector width)
        self._key = hashlib.blake2b(repr((_FORMAT, recipes.STORED_FORMAT, torch.__version__, self._sources.hex(),
                                          keyed, machine)).encode(), digest_size=16).digest()
        self._state = state
        return self._key

    def _load(self, entry: bytes) -> dict:
        """The folder's table (empty when there is none or it is unreadable)."""
        return DISK.load_table(entry, "lowering recordings", "recordings")

    def memo(self, text: str | None, tdev) -> dict:
        """A new signature's memo: its recordings from the folder in it (made
        now), a :class:`StoredMemo` for a signature the store keeps; a plain
        dict when it keeps none (no text: the meta store does not key it)."""
        if text is None or settings.cache_dir is None or self.off or tdev is None or not settings.recordings_on_disk:
            return {}
        device = lc_device(tdev)
        entry = self._entry(device)
        if self._read is None or self._where != (settings.cache_dir, entry):
            self._where = (settings.cache_dir, entry)
            self._read = self._load(entry)
        memo = StoredMemo()
        memo.disk = text
        stored = self._read.get(text)
        if stored:
            try:
                for stable, (data, layout) in stored.items():
                    if layout is not None:
                        layout = (*layout, layout_key(layout[0], layout[1], 0, layout[2], layout[3]))
                    memo[_memo_key(stable)] = (recipes.load(data, device), layout)
            except Exception as e:  # data that passed the digest but is not a recording of this format
                events.bump("disk_cache_errors")
                warn(f"lazycore: ignoring the stored lowering recordings of {text}: {e}")
                memo.clear()
        return memo

    def add(self, memo: StoredMemo, key, recipe, layout, device) -> None:
        """Keep ``recipe`` (stored in ``memo`` under ``key``); made into data at the next write."""
        if not self.off and settings.recordings_on_disk:
            self._pending.append((self._entry(device), memo.disk, _stable(key), recipe,
                                  None if layout is None else layout[:4], device))

    def at_barrier(self, *_) -> None:
        if self._pending:
            self.write()

    def write(self, at_exit: bool = False) -> None:
        """Merge the new recordings into the folder's store."""
        if self.off or not self._pending or settings.cache_dir is None or (not at_exit and self._writes >= WRITES):
            return
        new: dict[bytes, dict] = {}
        for entry, text, stable, recipe, layout, device in self._pending:
            try:
                data = recipes.dump(recipe, device)
                pickle.dumps(data, protocol=5)  # (an attribute pickle cannot keep: not kept)
            except Exception:
                continue
            new.setdefault(entry, {}).setdefault(text, {})[stable] = (data, layout)
        self._pending = []
        if not new:
            return
        self._writes += 1
        for entry, found in new.items():
            table = self._load(entry)
            for text, kept in found.items():
                table[text] = {**table.get(text, {}), **kept}
            table = DISK.store_table(entry, table, LIMIT, "recordings")
            if self._read is not None and self._where == (settings.cache_dir, entry):
                self._read = table

    def lowering_changed(self, op) -> None:
        """A lowering registered or removed (``op``): the store is off from now
        on. None: eager's thread count changed, which is in the key (the
        recordings made until now are kept under the count they were made with)."""
        if op is not None:
            self.off = True
            self._pending = []


STORE = RecipeStore()
events.listen("barrier", STORE.at_barrier)
atexit.register(STORE.write, True)
lowering.when_changed(STORE.lowering_changed)
