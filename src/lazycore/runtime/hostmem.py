"""Host memory that XLA's CPU programs get back without page faults.

On CPU every program's results and its scratch buffer come from this
process's ``malloc``. With glibc's defaults a buffer of 32 MiB or more is
always a fresh ``mmap`` and goes back to the kernel when freed, and a large
one served from a thread's arena usually lands in a new arena heap that is
unmapped again when it empties. So a training step pays for its scratch
memory anew every time: the kernel zeroes each 4 KiB page at its first write.
Benchmark 7's GPT step, captured, took 9,500 page faults per step (about
37 MiB): 21-24 ms a step against 15 ms without them.

:func:`keep_freed_buffers` sets glibc's allocator to keep what it frees: no
``mmap`` for large blocks, no trimming of a heap's top, and 64 MiB of room
added whenever a heap grows, so that a thread's arena heap made for a large
block also holds small ones and is not unmapped when the block is freed. A
repeating step then reuses the same memory, as a device's caching allocator
does (PyTorch's on CUDA, XLA's BFC allocator on GPU). The cost: the
process's resident memory stays at its high-water mark plus the heaps' room
(the GPT process: 930 MB against 800 MB). Limiting the process
to one arena also stopped the faults, but serialized the compiler's threads'
allocations: compile-heavy tests ran 35-50% longer.

It is applied once, when lazycore first asks for its PJRT devices, and only
where it is glibc's ``malloc`` to tune: not when the user tunes it
(``MALLOC_*`` variables, ``glibc.malloc`` tunables) or preloads another
allocator (``LD_PRELOAD``), and not with ``LAZYCORE_KEEP_HOST_MEMORY=0``.
Settings made later by the process win.

What is kept must also be given back where reuse is not the point. A compile
(XLA's passes and LLVM's code generation, in the compiler's threads) frees
far more than a step uses, and dropped programs free their code and
constants; kept in the threads' arena heaps, such memory is never used again
by a steady step, and a process that trains many models grew without
bound: 29 transformers models trained one after another in one process held
3.85 GB resident; emptying the compile cache left 3.77 GB, and glibc's
``malloc_trim`` then 1.03 GB (the rest of the 3.85 GB was the cached
programs: an XLA CPU executable of a small transformer's training step
holds some 37 MB). So
after every compile or load, and when the compile cache drops programs,
:func:`give_back_freed` hands the free pages back to the kernel once the
process's resident memory has grown by :data:`GIVE_BACK_STEP` since it last
did, or programs holding about that much were dropped: one ``malloc_trim``
(tens to a few hundred milliseconds with gigabytes of heaps) per that much,
and none in a steady loop, which compiles nothing.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

from lazycore.ir import events
from lazycore.ir.config import settings

# glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1  # mallopt takes an int
_TOP_PAD = 64 << 20

_why: list[str | None] = [None]  # once set: "applied", or why not

GIVE_BACK_STEP = 256 << 20
"""Bytes of growth of the resident memory, or of programs dropped, since the
last give back that make :func:`give_back_freed` trim again."""
MAPPING_BYTES = 64 << 10
"""What a dropped program held, per memory mapping it gave back: an XLA CPU
executable holds its kernels' code in mappings of their own and about 50-120
KiB of memory per mapping in all (a transformers GPT-2 tiny training step:
37 MB and 466 mappings; a jax.jit program of 200 layers: 25 MB and 606).
Freed memory does not lower the resident size, so drops are counted apart."""
_given_back_at = [0]  # resident bytes after the last trim (or when applied)
_dropped = [0]  # mappings programs gave back since then


def _left_to_the_user() -> str | None:
    """Why glibc's allocator is not ours to tune here, or None."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return "not glibc"
    if os.environ.get("LD_PRELOAD"):
        return "LD_PRELOAD is set (another allocator may be in use)"
    tuned = sorted(k for k in os.environ if k.startswith("MALLOC_"))
    if tuned:
        return f"the environment tunes malloc ({', '.join(tuned)})"
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES tunes malloc"
    return None


def keep_freed_buffers() -> bool:
    """Once per process: tune glibc's ``malloc`` to keep freed memory (see the
    module's text). Whether it was applied."""
    if _why[0] is None:
        _why[0] = _apply()
    return _why[0] == "applied"


def _apply() -> str:
    if not settings.keep_host_memory:
        return "LAZYCORE_KEEP_HOST_MEMORY=0"
    why = _left_to_the_user()
    if why is not None:
        return why
    libc = ctypes.CDLL(None)
    # each returns 1 on success; the three only work together (one alone still
    # hands large buffers back to the kernel), so a refusal undoes nothing
    # and is reported instead
    ok = (libc.mallopt(_M_MMAP_MAX, 0) == 1) & (libc.mallopt(_M_TRIM_THRESHOLD, _INT_MAX) == 1) \
        & (libc.mallopt(_M_TOP_PAD, _TOP_PAD) == 1)
    if not ok:
        return "mallopt refused a setting"
    _given_back_at[0] = _resident()
    return "applied"


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


def give_back_freed(dropped_mappings: int = 0) -> bool:
    """Hand the free memory glibc keeps back to the kernel, where
    :func:`keep_freed_buffers` made it keep it, once the process's resident
    memory grew by :data:`GIVE_BACK_STEP` since the last time or dropped
    programs (``dropped_mappings``: the mappings they gave back) held about
    that much (the module's text). Whether it trimmed."""
    if _why[0] != "applied":
        return False
    _dropped[0] += dropped_mappings
    resident = _resident()
    if resident - _given_back_at[0] < GIVE_BACK_STEP and _dropped[0] * MAPPING_BYTES < GIVE_BACK_STEP:
        return False
    ctypes.CDLL(None).malloc_trim(0)
    _given_back_at[0], _dropped[0] = _resident(), 0
    events.bump("host_memory_given_back", max(0, resident - _given_back_at[0]))
    return True


def status() -> str:
    """``applied``, or why glibc's allocator was left as it is (``not yet``
    before lazycore first used its devices)."""
    return _why[0] or "not yet"
