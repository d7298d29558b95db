"""The persistent compile cache: compiled programs on disk, shared by processes.

A barrier whose program is not in the compile cache (:mod:`lazycore.runtime.cache`)
looks here before compiling, and writes here what it compiled
(:func:`lazycore.runtime.programs.program`, which also says what a key
covers). The folder is ``settings.cache_dir`` (``LAZYCORE_CACHE_DIR``; None,
``off``: no persistent cache); one file per program, named by its key.

An entry is :data:`MAGIC`, a keyed digest of the rest (HMAC-SHA256 with the
folder's secret, below), a JSON header (the key, the program's parameter and
result types, which of them are stacks of the graph's parameters and outputs,
the compression) and the executable as jaxlib serializes it, compressed. XLA
loads altered bytes without complaint, so the digest is checked before
anything is loaded: an entry that fails it (truncated, corrupt, another
format, edited, or copied from a folder with another secret) gives a
:class:`DiskCacheWarning` and counts as an error; the program is compiled
and its entry written again. An entry of an earlier format (another
:data:`MAGIC` version) is a miss without a warning, replaced the same way.

An entry is native code the process will run, so the folder is trusted the
way SSH trusts its keys. It is created private (0700). An entry is loaded
only when it and the folder belong to this user and neither is writable by
group or others; otherwise a warning (once per path, at the user's line)
names it and the program is compiled instead (an untrusted folder is not
written either). The secret that keys the digests is :data:`SECRET_FILE`
in the folder: 32 random bytes, made by the first writer (``O_CREAT |
O_EXCL``, mode 0600) and used only when it belongs to this user and is not
readable by group or others; with a bad one the folder is not used at all.
Someone who can write to the folder but not read the secret cannot make an
entry this user's processes load.

Other data a process can reuse, not programs (a frontend's meta results,
``lazycore.frontends.torch.meta_store``; its lowering recordings,
``lazycore.frontends.torch.recipe_store``), is kept the same way under its own
key and kind (:data:`DATA_KINDS`) by :meth:`DiskCache.load_data` and :meth:`DiskCache.store_data`: the
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
import hmac
import json
import os
import pickle
import tempfile
import time
import warnings
import zlib

from lazycore.dialect.types import TensorType
from lazycore.ir import events, sourceloc
from lazycore.ir.config import settings
from lazycore.runtime import pjrt

MAGIC = b"LZCX\x00\x02\r\n"
"""The first bytes of an entry: the file kind and format version (2: keyed
digests); the line ends catch a copy that rewrote them."""
SUFFIX = ".lcx"
DATA_SUFFIX = ".lcd"
TEMP_PREFIX = ".tmp-"
STALE_TEMP_SECONDS = 3600.0
"""A temporary file this old belongs to a writer that died; the eviction scan removes it."""
_DIGEST_SIZE = 32
_LENGTH_SIZE = 4
SECRET_FILE = "hmac-secret"
"""The folder's secret (module doc); not an entry: eviction and clearing keep it."""
_SECRET_SIZE = 32


class DiskCacheWarning(RuntimeWarning):
    """A persistent compile cache entry could not be read (it is compiled
    again) or written (the program still runs), or the folder, an entry or
    the secret is not private to this user (it is not used)."""


class OutdatedEntry(ValueError):
    """An entry an earlier lazycore wrote (an older :data:`MAGIC` version):
    a miss without a warning; the program's new entry replaces it."""


class UntrustedCache(ValueError):
    """The folder, an entry or the secret may have been written by someone else."""


def warn(message: str) -> None:
    """Warn at the user's line that reached the cache (the innermost frame
    outside lazycore); from lazycore's own frames only (an exit hook), at the caller."""
    loc = sourceloc.resolve(sourceloc.caller(2))
    if loc is None:
        warnings.warn(message, DiskCacheWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, DiskCacheWarning, loc[0], loc[1])


def untrusted(st: os.stat_result, what: str) -> str | None:
    """Why the file or folder ``what`` with status ``st`` must not be trusted:
    it belongs to another user or group or others may write it; None when it
    is this user's alone to write (always, where there are no user ids)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return None
    uid = getuid()
    if st.st_uid != uid:
        return f"{what} belongs to user id {st.st_uid}, not to this user (user id {uid})"
    if st.st_mode & 0o022:
        who = " and ".join(w for bit, w in ((0o020, "its group"), (0o002, "others")) if st.st_mode & bit)
        return f"{what} is writable by {who} (mode {st.st_mode & 0o7777:04o})"
    return None


def _open_trusted(path: str, what: str) -> int:
    """A file descriptor for reading ``path``, which is this user's alone to
    write and no link; raises :class:`UntrustedCache` otherwise
    (FileNotFoundError when there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if os.path.islink(path):
            raise UntrustedCache(f"{what} {path} is a symbolic link") from None
        raise e
    try:
        problem = untrusted(os.fstat(fd), f"{what} {path}")
    except BaseException:
        os.close(fd)
        raise
    if problem:
        os.close(fd)
        raise UntrustedCache(problem)
    return fd


def folder_problem(folder: str) -> str | None:
    """Why ``folder`` must not be used as a cache (module doc); None when it
    is trusted or does not exist yet."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return untrusted(st, f"the persistent compile cache folder {folder}")


def secret(folder: str, create: bool = True) -> bytes | None:
    """The folder's secret, made when there is none yet and ``create``
    (None then); raises :class:`UntrustedCache` for one another user owns,
    that group or others may read, or that is not 32 bytes."""
    path = os.path.join(folder, SECRET_FILE)
    for attempt in range(50):
        try:
            fd = _open_trusted(path, "the persistent compile cache secret")
        except FileNotFoundError:
            if not create:
                return None
            made = _make_secret(path)
            if made is not None:
                return made
            continue  # another process made it meanwhile: read theirs
        try:
            st = os.fstat(fd)
            if getattr(os, "getuid", None) is not None and st.st_mode & 0o077:
                raise UntrustedCache(f"the persistent compile cache secret {path} is readable by others than "
                                     f"its owner (mode {st.st_mode & 0o7777:04o}; it must be 0600)")
            data = os.read(fd, _SECRET_SIZE + 1)
        finally:
            os.close(fd)
        if len(data) == _SECRET_SIZE:
            return data
        if len(data) > _SECRET_SIZE or attempt == 49:
            raise UntrustedCache(f"the persistent compile cache secret {path} is not {_SECRET_SIZE} bytes")
        time.sleep(0.02)  # its maker is writing it
    raise AssertionError("unreachable")


def _make_secret(path: str) -> bytes | None:
    """Make the secret at ``path`` (0600, never over an existing file); None
    when another process made it first."""
    data = os.urandom(_SECRET_SIZE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        return None
    try:
        os.write(fd, data)  # one write of 32 bytes: a reader sees none or all of it
    finally:
        os.close(fd)
    return data


def _types_json(types) -> list:
    return [[list(t.shape), t.dtype] for t in types]


def _types(raw) -> tuple[TensorType, ...]:
    return tuple(TensorType(tuple(int(d) for d in shape), str(dtype)) for shape, dtype in raw)


def pack(key: bytes, exe: pjrt.Executable, secret_key: bytes | None = None) -> bytes:
    """An entry's bytes for ``exe`` under ``key``, signed with ``secret_key``
    (None: the secret of ``settings.cache_dir``)."""
    header = json.dumps({
        "key": key.hex(),
        "inputs": _types_json(exe.input_types),
        "outputs": _types_json(exe.output_types),
        "arguments": None if exe.arguments is None else [e if type(e) is int else list(e) for e in exe.arguments],
        "rows": None if exe.rows is None else [list(r) for r in exe.rows],
        "keeps": exe.keeps,
        "compression": "zlib",
    }).encode()
    return _framed(header, pjrt.serialize(exe), secret_key)


def _secret_key(secret_key: bytes | None) -> bytes:
    if secret_key is not None:
        return secret_key
    if settings.cache_dir is None:
        raise ValueError("no persistent compile cache folder (so no secret) to sign or check an entry with")
    return secret(settings.cache_dir)


def _digest(secret_key: bytes, body: bytes) -> bytes:
    return hmac.new(secret_key, body, hashlib.sha256).digest()


def _framed(header: bytes, payload: bytes, secret_key: bytes | None) -> bytes:
    # level 1: most of the size for a small part of the time of the default
    body = len(header).to_bytes(_LENGTH_SIZE, "little") + header + zlib.compress(payload, 1)
    return MAGIC + _digest(_secret_key(secret_key), body) + body


def _unframed(blob: bytes, key: bytes, what: str, secret_key: bytes | None) -> tuple[dict, bytes]:
    """The header and the decompressed payload; raises ValueError for
    anything but a whole entry for ``key`` signed with ``secret_key``."""
    start = len(MAGIC) + _DIGEST_SIZE
    if blob[:4] == MAGIC[:4] and blob[6:8] == MAGIC[6:8] and blob[4:6] < MAGIC[4:6]:
        raise OutdatedEntry(f"an entry of format {int.from_bytes(blob[4:6], 'big')}")
    if len(blob) < start + _LENGTH_SIZE or not blob.startswith(MAGIC):
        raise ValueError("not an entry of this format")
    body = blob[start:]
    if not hmac.compare_digest(_digest(_secret_key(secret_key), body), blob[len(MAGIC):start]):
        raise ValueError("its digest does not match (truncated or corrupt, or edited or copied from a cache "
                         "with another secret)")
    n = int.from_bytes(body[:_LENGTH_SIZE], "little")
    header = json.loads(body[_LENGTH_SIZE:_LENGTH_SIZE + n])
    if header.get("key") != key.hex() or header.get("compression") != "zlib":
        raise ValueError(f"it is the entry of another {what}")
    return header, zlib.decompress(body[_LENGTH_SIZE + n:])


DATA_KINDS = ("data", "recordings")
"""What a data entry's header may say it holds: a frontend's meta results
(``data``), its lowering recordings (``recordings``,
``lazycore.frontends.torch.recipe_store``). An entry is loaded only as the
kind it was written as."""


def pack_data(key: bytes, payload: bytes, secret_key: bytes | None = None, kind: str = "data") -> bytes:
    """A data entry's bytes (:meth:`DiskCache.store_data`)."""
    if kind not in DATA_KINDS:
        raise ValueError(f"unknown data kind {kind!r}")
    return _framed(json.dumps({"key": key.hex(), "kind": kind, "compression": "zlib"}).encode(), payload,
                   secret_key)


def unpack_data(blob: bytes, key: bytes, secret_key: bytes | None = None, kind: str = "data") -> bytes:
    header, payload = _unframed(blob, key, "data key", secret_key)
    if header.get("kind") != kind:
        raise ValueError(f"it is not a data entry of kind {kind!r}")
    return payload


def unpack(blob: bytes, key: bytes, secret_key: bytes | None = None) -> tuple[bytes, tuple, tuple]:
    """The serialized executable and its parameter and result types from an
    entry's bytes; raises ValueError for anything but a whole entry for
    ``key`` signed with ``secret_key`` (None: the secret of ``settings.cache_dir``)."""
    serialized, inputs, outputs, _ = unpack_entry(blob, key, secret_key)
    return serialized, inputs, outputs


def unpack_entry(blob: bytes, key: bytes, secret_key: bytes | None = None) -> tuple[bytes, tuple, tuple, tuple]:
    """:func:`unpack`'s, and the executable's stacked arguments and results
    (:attr:`~lazycore.runtime.pjrt.Executable.arguments`, ``rows``, ``keeps``)."""
    header, serialized = _unframed(blob, key, "program", secret_key)
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
        self._refusals_reported: set[str] = set()

    def path(self, key: bytes, folder: str | None = None, suffix: str = SUFFIX) -> str:
        return os.path.join(folder or settings.cache_dir, key.hex() + suffix)

    def load(self, key: bytes, device) -> pjrt.Executable | None:
        """The program stored under ``key``, loaded onto the PJRT ``device``;
        None when there is none or it cannot be read (a warning says so)."""
        folder = settings.cache_dir
        if folder is None:
            return None
        path = self.path(key, folder)
        f = self._open(folder, path, "compiling the program instead")
        if f is None:
            return None
        with events.timed("disk_load"):
            try:
                with f:
                    blob = f.read()
                signer = self._secret(folder, "compiling the program instead")
                if signer is None:
                    return None
                serialized, inputs, outputs, plan = unpack_entry(blob, key, signer)
                exe = pjrt.deserialize(serialized, inputs, outputs, device, plan)
                exe.from_disk = True  # (a kernel profile must not show the compiling process's lines)
            except OutdatedEntry:
                return None
            except Exception as e:  # whatever the bytes make jaxlib or the decoders raise
                self._unreadable(path, e)
                return None
        _touch(path)
        events.bump("disk_cache_hits")
        return exe

    def load_data(self, key: bytes, kind: str = "data") -> bytes | None:
        """The payload stored under ``key`` by :meth:`store_data` (as ``kind``,
        :data:`DATA_KINDS`); None when there is none or it cannot be read (a
        warning says so)."""
        folder = settings.cache_dir
        if folder is None:
            return None
        path = self.path(key, folder, DATA_SUFFIX)
        f = self._open(folder, path, "making it again")
        if f is None:
            return None
        try:
            with f:
                blob = f.read()
            signer = self._secret(folder, "making it again")
            if signer is None:
                return None
            payload = unpack_data(blob, key, signer, kind)
        except OutdatedEntry:
            return None
        except Exception as e:
            self._unreadable(path, e, "making it again")
            return None
        _touch(path)
        return payload

    def _open(self, folder: str, path: str, then: str):
        """The entry at ``path`` opened for reading; None when there is none,
        or it or ``folder`` is not this user's alone (reported once) or it
        cannot be opened (reported)."""
        problem = folder_problem(folder)
        if problem:
            self._refuse(folder, problem, "the cache is not used")
            return None
        try:
            fd = _open_trusted(path, "the persistent compile cache entry")
        except (FileNotFoundError, NotADirectoryError):  # no entry (a bad folder is reported on writing)
            return None
        except UntrustedCache as e:
            self._refuse(path, str(e), then)
            return None
        except OSError as e:
            self._unreadable(path, e, then)
            return None
        return os.fdopen(fd, "rb")

    def _secret(self, folder: str, then: str) -> bytes | None:
        """The folder's secret (made if there is none); None when it is not
        this user's alone to read (reported once)."""
        try:
            return secret(folder)
        except UntrustedCache as e:
            self._refuse(os.path.join(folder, SECRET_FILE), str(e),
                         f"{then} (chmod 600 it if it is yours, or remove it: it is made again)")
            return None

    def _refuse(self, path: str, problem: str, then: str) -> None:
        """Count a folder, entry or secret not used; warn once per path."""
        events.bump("disk_cache_errors")
        if path in self._refusals_reported:
            return
        self._refusals_reported.add(path)
        warn(f"lazycore: not loading from the persistent compile cache: {problem}; {then} (reported once)")

    def _unreadable(self, path: str, error: Exception, then: str = "compiling the program again") -> None:
        events.bump("disk_cache_errors")
        warn(f"lazycore: ignoring persistent compile cache entry {path}: {error}; {then}")

    def store(self, key: bytes, exe: pjrt.Executable) -> None:
        """Write ``exe`` under ``key``, then evict down to the size bound. A
        failure is counted and reported once per folder: the program runs all the same."""
        if self._write(lambda signer: pack(key, exe, signer), key, SUFFIX):
            events.bump("disk_cache_writes")

    def store_data(self, key: bytes, payload: bytes, kind: str = "data") -> None:
        """Write ``payload`` under ``key`` as ``kind`` (:data:`DATA_KINDS`;
        replacing what was there), then evict down to the size bound; a
        failure is reported as :meth:`store`'s."""
        self._write(lambda signer: pack_data(key, payload, signer, kind), key, DATA_SUFFIX)

    def load_table(self, key: bytes, what: str, kind: str = "data") -> dict:
        """The table :meth:`store_table` wrote under ``key``: empty when there
        is none, or when an entry whose digest passed does not hold a table
        (counted, and a warning names ``what``)."""
        try:
            payload = self.load_data(key, kind)
            found = pickle.loads(payload) if payload is not None else {}
            if type(found) is not dict:
                raise ValueError(f"not a table of {what}")
        except Exception as e:
            events.bump("disk_cache_errors")
            warn(f"lazycore: ignoring the stored {what}: {e}")
            found = {}
        return found

    def store_table(self, key: bytes, table: dict, limit: int, kind: str = "data") -> dict:
        """Write ``table`` under ``key`` as ``kind``, its last ``limit`` items
        (a process's own after the others' most recent); those items."""
        if len(table) > limit:
            table = dict(list(table.items())[len(table) - limit:])
        self.store_data(key, pickle.dumps(table, protocol=5), kind)
        return table

    def _write(self, blob, key: bytes, suffix: str) -> bool:
        """Write the entry ``blob(secret)`` makes, atomically, and evict;
        False when it failed or the folder is not trusted (nothing is written there)."""
        folder = settings.cache_dir
        if folder is None:
            return False
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)  # private (0700) when made here
            problem = folder_problem(folder)
            if problem:
                self._refuse(folder, problem, "the cache is not used")
                return False
            signer = self._secret(folder, "nothing is written to it")
            if signer is None:
                return False
            data = blob(signer)
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
                warn(f"lazycore: cannot write to the persistent compile cache in {folder}: {e} "
                     f"(reported once; LAZYCORE_CACHE_DIR=off turns the cache off)")
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

    def holds_programs(self) -> bool:
        """Whether the folder holds a program entry (of any key); False when
        off or the folder does not exist. A scan that stops at the first entry."""
        folder = settings.cache_dir
        if folder is None:
            return False
        try:
            with os.scandir(folder) as it:
                return any(e.name.endswith(SUFFIX) and not e.name.startswith(TEMP_PREFIX) for e in it)
        except OSError:
            return False

    def clear(self) -> int:
        """Remove every entry (and any temporary file of a dead writer); returns how many entries went."""
        folder = settings.cache_dir
        return 0 if folder is None else self.evict(0, folder)


DISK = DiskCache()
