"""The persistent compile cache loads only what this user wrote (lazycore.runtime.diskcache).

Entries are native code a process runs, so the folder is trusted the way SSH
trusts its keys: made private (0700); an entry is loaded only when it and the
folder belong to this user and neither is writable by group or others, and
its keyed digest (HMAC-SHA256 with the folder's 0600 secret) matches. Each
refusal warns once, naming the path, at the user's line (this file), and the
program is compiled instead. The meta store (lazycore.frontends.torch.meta_store)
reads through the same checks. A foreign owner is simulated by making
``os.getuid`` answer another user id.
"""

import hashlib
import os
import pickle
import re
import shutil
import stat
import warnings

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import config
from lazycore.observe import metrics
from lazycore.runtime import diskcache
from lazycore.runtime.diskcache import DATA_SUFFIX, DISK, SECRET_FILE, SUFFIX, DiskCacheWarning

from test_disk_cache import SMALL, run_process


def program(n: int):
    """Read back ``tanh(2x)`` for an ``(n, 4)`` input; one program per ``n``."""
    x = np.linspace(-1, 1, 4 * n, dtype=np.float32).reshape(n, 4)
    a = lc.from_numpy(x)
    got = lc.to_numpy(lc.apply("tanh", lc.apply("add", a, a)))
    np.testing.assert_allclose(got, np.tanh(2 * x), rtol=1e-6)
    return got


def entries(folder) -> list[str]:
    return sorted(p for p in os.listdir(folder) if p.endswith(SUFFIX))


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def disk(tmp_path, clean_runtime):
    folder = tmp_path / "cache"
    with config.override(cache_dir=folder, cache_max_bytes=1 << 30):
        yield folder


def counts() -> tuple[int, int, int, int]:
    c = metrics.counters()
    return c["compiles"], c["disk_cache_hits"], c["disk_cache_errors"], c["disk_cache_writes"]


def refused(match: str, n: int = 3):
    """Run program ``n`` with nothing in memory: it warns once (``match``, at
    this file's line) and compiles; returns the warnings."""
    lc.cache.clear()
    metrics.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program(n)
    mine = [w for w in caught if issubclass(w.category, DiskCacheWarning)]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert re.search(match, str(mine[0].message)), str(mine[0].message)
    assert mine[0].filename == __file__, (mine[0].filename, mine[0].lineno)  # the user's line, not diskcache.py
    assert metrics.counters()["compiles"] == 1 and metrics.counters()["disk_cache_hits"] == 0
    return mine


def test_the_folder_secret_and_entries_are_made_private(disk):
    program(3)
    (name,) = entries(disk)
    assert mode(disk) == 0o700
    assert mode(disk / SECRET_FILE) == 0o600 and os.path.getsize(disk / SECRET_FILE) == 32
    assert mode(disk / name) & 0o077 == 0
    lc.cache.clear()
    metrics.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program(3)
    assert counts() == (0, 1, 0, 0)


def test_a_group_writable_folder_is_neither_loaded_from_nor_written(disk):
    program(3)
    before = {n: (disk / n).read_bytes() for n in entries(disk)}
    os.chmod(disk, 0o770)
    (w,) = refused(rf"folder {disk} is writable by its group \(mode 0770\)")
    assert "reported once" in str(w.message)
    lc.cache.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per folder
        program(3)
        program(4)
    assert {n: (disk / n).read_bytes() for n in entries(disk)} == before  # nothing written there
    assert metrics.counters()["disk_cache_writes"] == 0


def test_an_entry_others_may_write_is_refused_and_written_again(disk):
    program(3)
    (name,) = entries(disk)
    os.chmod(disk / name, 0o646)
    refused(rf"entry {disk / name} is writable by others \(mode 0646\)")
    assert mode(disk / name) & 0o077 == 0  # replaced by this process's own entry
    lc.cache.clear()
    metrics.reset()
    program(3)
    assert counts()[:2] == (0, 1)


def test_a_folder_of_another_user_is_refused(disk, monkeypatch):
    program(3)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)
    refused(rf"folder {disk} belongs to user id {me}, not to this user \(user id {me + 1}\)")


def test_an_entry_of_another_user_is_refused(disk, monkeypatch):
    program(3)
    (name,) = entries(disk)
    real = diskcache.untrusted
    me = os.getuid()

    def owned_by_someone_else(st, what):
        if what.endswith(name):
            st = os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, me + 7, *tuple(st)[5:]))
        return real(st, what)

    monkeypatch.setattr(diskcache, "untrusted", owned_by_someone_else)
    refused(rf"entry {disk / name} belongs to user id {me + 7}")


def test_a_symbolic_link_for_an_entry_is_refused(disk, tmp_path):
    program(3)
    (name,) = entries(disk)
    elsewhere = tmp_path / "planted"
    shutil.move(disk / name, elsewhere)
    os.symlink(elsewhere, disk / name)
    refused(rf"entry {disk / name} is a symbolic link")


def test_an_edited_entry_is_refused(disk):
    program(3)
    (name,) = entries(disk)
    blob = (disk / name).read_bytes()
    start = len(diskcache.MAGIC) + 32
    body = bytearray(blob[start:])
    body[-len(body) // 3] ^= 0x40
    # whoever edits it can recompute an unkeyed digest, not the keyed one
    forged = diskcache.MAGIC + hashlib.blake2b(bytes(body), digest_size=32).digest() + bytes(body)
    (disk / name).write_bytes(forged)
    os.chmod(disk / name, 0o600)
    refused(rf"ignoring persistent compile cache entry {disk / name}: its digest does not match")


def test_an_entry_of_the_earlier_format_is_a_quiet_miss_and_is_replaced(disk):
    program(3)
    (name,) = entries(disk)
    body = (disk / name).read_bytes()[len(diskcache.MAGIC) + 32:]
    old_magic = diskcache.MAGIC[:4] + b"\x00\x01" + diskcache.MAGIC[6:]  # format 1: an unkeyed BLAKE2b digest
    (disk / name).write_bytes(old_magic + hashlib.blake2b(body, digest_size=32).digest() + body)
    lc.cache.clear()
    metrics.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program(3)
    assert counts() == (1, 0, 0, 1)
    assert (disk / name).read_bytes().startswith(diskcache.MAGIC)
    lc.cache.clear()
    program(3)
    assert metrics.counters()["disk_cache_hits"] == 1


def test_an_entry_copied_from_a_cache_with_another_secret_is_refused(disk, tmp_path):
    other = tmp_path / "other"
    with config.override(cache_dir=other):
        program(3)
    (name,) = entries(other)
    lc.cache.clear()
    program(4)  # this folder's own secret exists
    assert (disk / SECRET_FILE).read_bytes() != (other / SECRET_FILE).read_bytes()
    shutil.copy(other / name, disk / name)
    refused(rf"entry {disk / name}: its digest does not match .*copied from a cache with another secret")
    with pytest.raises(ValueError, match="digest does not match"):
        diskcache.unpack((other / name).read_bytes(), bytes.fromhex(name[: -len(SUFFIX)]),
                         (disk / SECRET_FILE).read_bytes())
    diskcache.unpack((other / name).read_bytes(), bytes.fromhex(name[: -len(SUFFIX)]),
                     (other / SECRET_FILE).read_bytes())


@pytest.mark.parametrize("bits, problem", [(0o640, "is readable by others than its owner"),
                                           (0o604, "is readable by others than its owner"),
                                           (0o660, "is writable by its group")])
def test_a_secret_others_may_read_is_not_used(disk, bits, problem):
    program(3)
    (name,) = entries(disk)
    before = (disk / name).read_bytes()
    os.chmod(disk / SECRET_FILE, bits)
    refused(rf"secret {disk / SECRET_FILE} {problem} \(mode {bits:04o}")
    assert metrics.counters()["disk_cache_writes"] == 0 and (disk / name).read_bytes() == before
    assert mode(disk / SECRET_FILE) == bits  # not repaired behind the user's back


def test_a_secret_of_the_wrong_size_or_another_user_is_not_used(disk, monkeypatch):
    program(3)
    secret = (disk / SECRET_FILE).read_bytes()
    (disk / SECRET_FILE).write_bytes(secret[:16])
    refused(rf"secret {disk / SECRET_FILE} is not 32 bytes")
    (disk / SECRET_FILE).write_bytes(secret)
    real = diskcache.untrusted
    me = os.getuid()

    def secret_owned_by_someone_else(st, what):
        if what.endswith(SECRET_FILE):
            st = os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, me + 3, *tuple(st)[5:]))
        return real(st, what)

    monkeypatch.setattr(diskcache, "untrusted", secret_owned_by_someone_else)
    DISK._refusals_reported.discard(str(disk / SECRET_FILE))
    refused(rf"secret {disk / SECRET_FILE} belongs to user id {me + 3}")


def test_the_secret_is_made_without_replacing_one(tmp_path):
    made = diskcache.secret(str(tmp_path))
    assert len(made) == 32 and mode(tmp_path / SECRET_FILE) == 0o600
    assert diskcache.secret(str(tmp_path)) == made
    assert diskcache._make_secret(str(tmp_path / SECRET_FILE)) is None  # O_EXCL: an existing one stays
    assert (tmp_path / SECRET_FILE).read_bytes() == made
    assert diskcache.secret(str(tmp_path / "none"), create=False) is None


def test_the_meta_store_reads_through_the_same_checks(disk):
    from lazycore.frontends.torch import meta_store

    table = {"k": ("v", 1)}
    DISK.store_data(meta_store._ENTRY, pickle.dumps(table))
    assert meta_store.STORE._load() == table
    (path,) = [disk / p for p in os.listdir(disk) if p.endswith(DATA_SUFFIX)]
    os.chmod(path, 0o666)
    with pytest.warns(DiskCacheWarning, match=rf"entry {path} is writable by its group and others") as caught:
        assert meta_store.STORE._load() == {}
    assert [w.filename for w in caught if issubclass(w.category, DiskCacheWarning)] == [__file__]
    os.chmod(path, 0o600)
    assert meta_store.STORE._load() == table
    os.chmod(disk, 0o757)
    with pytest.warns(DiskCacheWarning, match=rf"folder {disk} is writable by others"):
        assert DISK.load_data(meta_store._ENTRY) is None
    os.chmod(disk, 0o700)
    # the store's payload is a pickle: an entry signed with another secret is not unpickled
    (disk / SECRET_FILE).unlink()
    with pytest.warns(DiskCacheWarning, match="digest does not match"):
        assert meta_store.STORE._load() == {}


def test_a_second_process_loads_what_the_first_wrote(tmp_path):
    folder = tmp_path / "fresh" / "cache"
    first = run_process(SMALL, folder)
    assert (first["counters"]["compiles"], first["counters"]["disk_cache_writes"]) == (1, 1)
    assert mode(folder) == 0o700 and mode(folder / SECRET_FILE) == 0o600
    second = run_process(SMALL, folder)
    assert (second["counters"]["compiles"], second["counters"]["disk_cache_hits"]) == (0, 1)
    assert second["counters"]["disk_cache_errors"] == 0 and "Warning" not in second["stderr"]
    assert second["result"] == first["result"]
