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
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

from lazycore.ir.config import settings

# glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1  # mallopt takes an int
_TOP_PAD = 64 << 20

_why: list[str | None] = [None]  # once set: "applied", or why not


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
    return "applied" if ok else "mallopt refused a setting"


def status() -> str:
    """``applied``, or why glibc's allocator was left as it is (``not yet``
    before lazycore first used its devices)."""
    return _why[0] or "not yet"
