"""The persistent compile cache: compiled programs on disk, shared by processes.

A barrier whose program is not in the compile cache (:mod:`lazycore.runtime.cache`)
looks here before compiling, and writes here what it compiled
(:func:`lazycore.runtime.programs.program`, which also says what a key
covers). The folder is ``settings.cache_dir`` (``LAZYCORE_CACHE_DIR``; None,
``off``: no persistent cache); one file per program, named by its key.

An entry is :data:`MAGIC`, a BLAKE2b digest of the rest, a JSON header (the
key, the program's parameter and result types, which of them are stacks of
the graph's parameters and outputs, the compression) and the
executable as jaxlib serializes it, compressed. XLA loads altered bytes
without complaint, so the digest is checked before anything is loaded: an
entry that fails it (truncated, corrupt, another format) gives a
:class:`DiskCacheWarning` and counts as an error; the program is compiled
and its entry written again.

Other data a process can reuse, not programs (a frontend's meta results,
``lazycore.frontends.torch.meta_store``), is kept the same way under its own
key by :meth:`DiskCache.load_data` and :meth:`DiskCache.store_data`: the
same digest, atomic writes and size bound, files ending in
:data:`DATA_SUFFIX`; they do not count as programs in the counters.

Processes share a folder: an entry is written to a temporary file in the
folder and renamed over its name, so a reader sees a whole entry or none,
and two writers of one key write equivalent programs. A hit touches the
entry's modification time; after a write, the least recently used entries
are removed until the folder is within ``settings.cache_max_bytes``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
import zlib

from lazycore.dialect.types import TensorType
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.runtime import pjrt

MAGIC = b"LZCX\x00\x01\r\n"
"""The first bytes of an entry: the file kind and format version (1); the
line ends catch a copy that rewrote them."""
SUFFIX = ".lcx"
DATA_SUFFIX = ".lcd"
TEMP_PREFIX = ".tmp-"
STALE_TEMP_SECONDS = 3600.0
"""A temporary file this old belongs to a writer that died; the eviction scan removes it."""
_DIGEST_SIZE = 32
_LENGTH_SIZE = 4


class DiskCacheWarning(RuntimeWarning):
    """A persistent compile cache entry could not be read (it is compiled
    again) or written (the program still runs)."""


def _types_json(types) -> list:
    return [[list(t.shape), t.dtype] for t in types]


def _types(raw) -> tuple[TensorType, ...]:
    return tuple(TensorType(tuple(int(d) for d in shape), str(dtype)) for shape, dtype in raw)


def pack(key: bytes, exe: pjrt.Executable) -> bytes:
    """An entry's bytes for ``exe`` under ``key``."""
    header = json.dumps({
        "key": key.hex(),
        "inputs": _types_json(exe.input_types),
        "outputs": _types_json(exe.output_types),
        "arguments": None if exe.arguments is None else [e if type(e) is int else list(e) for e in exe.arguments],
        "rows": None if exe.rows is None else [list(r) for r in exe.rows],
        "keeps": exe.keeps,
        "compression": "zlib",
    }).encode()
    return _framed(header, pjrt.serialize(exe))


def _framed(header: bytes, payload: bytes) -> bytes:
    # level 1: most of the size for a small part of the time of the default
    body = len(header).to_bytes(_LENGTH_SIZE, "little") + header + zlib.compress(payload, 1)
    return MAGIC + hashlib.blake2b(body, digest_size=_DIGEST_SIZE).digest() + body


def _unframed(blob: bytes, key: bytes, what: str) -> tuple[dict, bytes]:
    """The header and the decompressed payload; raises ValueError for
    anything but a whole entry for ``key``."""
    start = len(MAGIC) + _DIGEST_SIZE
    if len(blob) < start + _LENGTH_SIZE or not blob.startswith(MAGIC):
        raise ValueError("not an entry of this format")
    body = blob[start:]
    if hashlib.blake2b(body, digest_size=_DIGEST_SIZE).digest() != blob[len(MAGIC):start]:
        raise ValueError("its digest does not match (truncated or corrupt)")
    n = int.from_bytes(body[:_LENGTH_SIZE], "little")
    header = json.loads(body[_LENGTH_SIZE:_LENGTH_SIZE + n])
    if header.get("key") != key.hex() or header.get("compression") != "zlib":
        raise ValueError(f"it is the entry of another {what}")
    return header, zlib.decompress(body[_LENGTH_SIZE + n:])


def pack_data(key: bytes, payload: bytes) -> bytes:
    """A data entry's bytes (:meth:`DiskCache.store_data`)."""
    return _framed(json.dumps({"key": key.hex(), "kind": "data", "compression": "zlib"}).encode(), payload)


def unpack_data(blob: bytes, key: bytes) -> bytes:
    header, payload = _unframed(blob, key, "data key")
    if header.get("kind") != "data":
        raise ValueError("it is not a data entry")
    return payload


def unpack(blob: bytes, key: bytes) -> tuple[bytes, tuple, tuple]:
    """The serialized executable and its parameter and result types from an
    entry's bytes; raises ValueError for anything but a whole entry for ``key``."""
    serialized, inputs, outputs, _ = unpack_entry(blob, key)
    return serialized, inputs, outputs


def unpack_entry(blob: bytes, key: bytes) -> tuple[bytes, tuple, tuple, tuple]:
    """:func:`unpack`'s, and the executable's stacked arguments and results
    (:attr:`~lazycore.runtime.pjrt.Executable.arguments`, ``rows``, ``keeps``)."""
    header, serialized = _unframed(blob, key, "program")
    if header.get("kind", "program") != "program":
        raise ValueError("it is not a program's entry")
    arguments, rows = header.get("arguments"), header.get("rows")
    if arguments is not None:
        arguments = tuple(int(e) if isinstance(e, int) else tuple(int(i) for i in e) for e in arguments)
    if rows is not None:
        rows = tuple((int(j), int(r)) for j, r in rows)
    return (serialized, _types(header["inputs"]), _types(header["outputs"]),
            (arguments, rows, bool(header.get("keeps", False))))


def _touch(path: str) -> None:
    """Mark an entry read as the most recently used."""
    try:
        os.utime(path)
    except OSError:
        pass  # evicted by another process meanwhile: what it held is read


class DiskCache:
    """The entries in ``settings.cache_dir`` (read at every call, so
    :func:`lazycore.config.override` moves or disables it at once)."""

    def __init__(self):
        self._write_failures_reported: set[str] = set()

    def path(self, key: bytes, folder: str | None = None, suffix: str = SUFFIX) -> str:
        return os.path.join(folder or settings.cache_dir, key.hex() + suffix)

    def load(self, key: bytes, device) -> pjrt.Executable | None:
        """The program stored under ``key``, loaded onto the PJRT ``device``;
        None when there is none or it cannot be read (a warning says so)."""
        folder = settings.cache_dir
        if folder is None:
            return None
        path = self.path(key, folder)
        try:
            f = open(path, "rb")
        except (FileNotFoundError, NotADirectoryError):  # no entry (a bad folder is reported on writing)
            return None
        except OSError as e:
            self._unreadable(path, e)
            return None
        with events.timed("disk_load"):
            try:
                with f:
                    blob = f.read()
                serialized, inputs, outputs, plan = unpack_entry(blob, key)
                exe = pjrt.deserialize(serialized, inputs, outputs, device, plan)
            except Exception as e:  # whatever the bytes make jaxlib or the decoders raise
                self._unreadable(path, e)
                return None
        _touch(path)
        events.bump("disk_cache_hits")
        return exe

    def load_data(self, key: bytes) -> bytes | None:
        """The payload stored under ``key`` by :meth:`store_data`; None when
        there is none or it cannot be read (a warning says so)."""
        folder = settings.cache_dir
        if folder is None:
            return None
        path = self.path(key, folder, DATA_SUFFIX)
        try:
            with open(path, "rb") as f:
                blob = f.read()
            payload = unpack_data(blob, key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Exception as e:
            self._unreadable(path, e, "making it again")
            return None
        _touch(path)
        return payload

    def _unreadable(self, path: str, error: Exception, then: str = "compiling the program again") -> None:
        events.bump("disk_cache_errors")
        warnings.warn(
            f"lazycore: ignoring persistent compile cache entry {path}: {error}; {then}",
            DiskCacheWarning,
            stacklevel=2,
        )

    def store(self, key: bytes, exe: pjrt.Executable) -> None:
        """Write ``exe`` under ``key``, then evict down to the size bound. A
        failure is counted and reported once per folder: the program runs all the same."""
        if self._write(lambda: pack(key, exe), key, SUFFIX):
            events.bump("disk_cache_writes")

    def store_data(self, key: bytes, payload: bytes) -> None:
        """Write ``payload`` under ``key`` (replacing what was there), then
        evict down to the size bound; a failure is reported as :meth:`store`'s."""
        self._write(lambda: pack_data(key, payload), key, DATA_SUFFIX)

    def _write(self, blob, key: bytes, suffix: str) -> bool:
        """Write the entry ``blob()`` makes, atomically, and evict; False when it failed."""
        folder = settings.cache_dir
        if folder is None:
            return False
        try:
            data = blob()
            os.makedirs(folder, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(temp, self.path(key, folder, suffix))
            except BaseException:
                try:
                    os.unlink(temp)
                except OSError:
                    pass
                raise
        except Exception as e:  # a full or read-only disk, an executable jaxlib cannot serialize
            events.bump("disk_cache_errors")
            if folder not in self._write_failures_reported:
                self._write_failures_reported.add(folder)
                warnings.warn(
                    f"lazycore: cannot write to the persistent compile cache in {folder}: {e} "
                    f"(reported once; LAZYCORE_CACHE_DIR=off turns the cache off)",
                    DiskCacheWarning,
                    stacklevel=3,
                )
            return False
        self.evict(settings.cache_max_bytes, folder)
        return True

    def _scan(self, folder: str) -> list[tuple[float, int, str]]:
        """``(mtime, size, path)`` of every entry; removes temporary files of dead writers."""
        found = []
        now = time.time()
        try:
            with os.scandir(folder) as it:
                for e in it:
                    try:
                        if e.name.endswith((SUFFIX, DATA_SUFFIX)):
                            st = e.stat()
                            found.append((st.st_mtime, st.st_size, e.path))
                        elif e.name.startswith(TEMP_PREFIX) and now - e.stat().st_mtime > STALE_TEMP_SECONDS:
                            os.unlink(e.path)
                    except FileNotFoundError:
                        pass  # another process removed it meanwhile
        except FileNotFoundError:
            pass
        return found

    def evict(self, max_bytes: int, folder: str | None = None) -> int:
        """Remove the least recently used entries until the folder holds at
        most ``max_bytes``; returns how many went."""
        folder = folder or settings.cache_dir
        if folder is None:
            return 0
        entries = self._scan(folder)
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries):
            if total <= max_bytes:
                break
            try:
                os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass
            total -= size
        return removed

    def usage(self) -> tuple[int, int]:
        """``(programs, bytes)`` in the folder now, the bytes of data entries
        included (0, 0 when off)."""
        folder = settings.cache_dir
        if folder is None:
            return 0, 0
        entries = self._scan(folder)
        return sum(path.endswith(SUFFIX) for _, _, path in entries), sum(size for _, size, _ in entries)

    def clear(self) -> int:
        """Remove every entry (and any temporary file of a dead writer); returns how many entries went."""
        folder = settings.cache_dir
        return 0 if folder is None else self.evict(0, folder)


DISK = DiskCache()
