"""Eager's meta results kept on disk, so a new process's first step skips the meta kernels.

The dispatcher runs an op's meta kernel (and eager's CPU kernel on stand-ins,
for eager's dtype errors) once per argument signature and keeps the result in
memory (``dispatch._META``). In a new process every signature is new: a small
GPT's first step ran 335 meta kernels and probes, 150-200 ms of a 450-650 ms
first trace in a process whose program was on disk. This store keeps, next to
the programs in the persistent compile cache (``LAZYCORE_CACHE_DIR``,
:meth:`lazycore.runtime.diskcache.DiskCache.store_data`), what those calls
found: each result's shapes, strides, offsets and element types, by a
signature that names the op instead of its id. A process reads it at its first
miss; a hit stands for a call that passed, so neither kernel runs again.

Only what cannot go stale or alias is kept: ops of the ``aten`` namespace
(their meta kernels are torch's, and the entry's key holds torch's version),
no view ops (the dispatcher does not ask for them), results that are new strided meta tensors, Python numbers, or an
argument given back (an in-place op's ``self``), and signatures made of plain
values (numbers, strings, dtypes, devices, shapes). The new results are
written at the first barrier after them (merged with what other processes
wrote meanwhile, at most :data:`LIMIT` entries), at most :data:`WRITES` times
while the process runs and once more when it exits.

The store is a pickle, so loading it could run code: it is read only through
the cache's checks (:mod:`lazycore.runtime.diskcache`): the folder and the
entry must be this user's alone to write and its digest keyed with the
folder's secret, otherwise a warning names it and the process runs the meta
kernels instead.
"""

from __future__ import annotations

import atexit
import hashlib

import torch

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.runtime.diskcache import DISK
from lazycore.trace.views import extent

_FORMAT = 3
"""The layout of a stored entry, and what a hit stands for; part of the key
(3: indexing ops' and softmax's eager probes, dispatch._probe_indexing)."""
LIMIT = 20_000
"""Signatures kept in the folder's store."""
WRITES = 4
"""Writes at barriers in one process (the one at exit aside)."""
MISS = object()
_ENTRY = hashlib.blake2b(f"lazycore torch meta results|{_FORMAT}|{torch.__version__}".encode(),
                         digest_size=16).digest()
"""The store's key in the cache folder."""

_PLAIN = frozenset({int, float, bool, str, bytes, type(None), torch.dtype, torch.device, torch.memory_format,
                    torch.layout, torch.Size, tuple})


def _plain(parts) -> bool:
    todo = list(parts)
    while todo:
        x = todo.pop()
        t = type(x)
        if t not in _PLAIN and not (x is float or x is int or x is bool):
            return False
        if t is tuple or t is torch.Size:
            todo.extend(x)
    return True


def _key(func, acc: list) -> str | None:
    """The signature as text another process makes alike (the reprs of
    plain values are): the op's name for its id (``acc[0]``); None when it
    is not kept (module doc)."""
    if type(func) is not torch._ops.OpOverload or func.namespace != "aten" or not _plain(acc[1:]):
        return None
    return repr((str(func), *acc[1:]))


def _described(out, margs, mutable: bool):
    """``out`` as plain data: ``("t", shape, strides, offset, dtype)`` for a
    new meta tensor, ``("a", i)`` for positional argument ``i`` given back,
    ``("v", x)`` for a number or None, ``("s", list?, parts)``; raises
    ValueError for anything else (``mutable``: an op that writes an argument,
    whose tensor results must be arguments: an ``out=`` one is not kept)."""
    if isinstance(out, torch.Tensor):
        for i, a in enumerate(margs):
            if out is a:
                return ("a", i)
        if (mutable or type(out) is not torch.Tensor or out.device.type != "meta" or out.layout != torch.strided
                or out.is_conj() or out.is_neg() or out.requires_grad or out._base is not None):
            raise ValueError("not a new strided meta tensor")
        return ("t", tuple(out.shape), tuple(out.stride()), out.storage_offset(), out.dtype)
    if out is None or type(out) in (int, float, bool):
        return ("v", out)
    if type(out) in (tuple, list):
        return ("s", type(out) is list, tuple(_described(o, margs, mutable) for o in out))
    raise ValueError(f"a result of type {type(out).__name__}")


def _made(desc, margs):
    kind = desc[0]
    if kind == "t":
        _, shape, strides, offset, dtype = desc
        return torch.empty(extent(shape, strides, offset), dtype=dtype, device="meta").as_strided(shape, strides,
                                                                                                   offset)
    if kind == "a":
        return margs[desc[1]]
    if kind == "v":
        return desc[1]
    parts = [_made(d, margs) for d in desc[2]]
    return parts if desc[1] else tuple(parts)


class MetaStore:
    """The folder's meta results, read at the first miss of a process."""

    def __init__(self):
        self._read: dict[str, tuple] | None = None
        self._folder: str | None = None
        self._new: dict[str, tuple] = {}
        self._writes = 0

    def _load(self) -> dict:
        """The folder's table (empty when there is none or it is unreadable)."""
        return DISK.load_table(_ENTRY, "meta results")

    def get(self, func, acc: list, margs):
        """``(key, result)``: the stored result of ``func`` for signature
        ``acc`` remade on ``margs``, or :data:`MISS`; the key for :meth:`add`
        (None: not kept)."""
        if settings.cache_dir is None:
            return None, MISS
        if self._read is None or self._folder != settings.cache_dir:
            self._folder = settings.cache_dir
            self._read = self._load()
        key = _key(func, acc)
        desc = self._read.get(key) if key is not None else None
        return key, (MISS if desc is None else _made(desc, margs))

    def add(self, key: str | None, func, out, margs) -> None:
        """Keep ``func``'s result under ``key`` (it passed both kernels)."""
        if key is None or settings.cache_dir is None or (self._read is not None and key in self._read):
            return
        try:
            self._new[key] = _described(out, margs, func._schema.is_mutable)
        except ValueError:
            pass

    def at_barrier(self, *_) -> None:
        if self._new:
            self.write()

    def write(self, at_exit: bool = False) -> None:
        """Merge the new results into the folder's store."""
        if not self._new or settings.cache_dir is None or (not at_exit and self._writes >= WRITES):
            return
        self._writes += 1
        table = self._load()
        table.update(self._new)
        DISK.store_table(_ENTRY, table, LIMIT)
        if self._read is not None:
            self._read.update(self._new)
        self._new = {}


STORE = MetaStore()
events.listen("barrier", STORE.at_barrier)
atexit.register(STORE.write, True)
