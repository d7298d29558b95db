"""Lines a native library writes to the process's stdout unasked: dropped.

jaxlib 0.10.2 bundles a gloo whose ``tcp::Context::printConnectivityInfo``
writes ``[Gloo] Rank R is connected to N peer ranks. Expected number of
connected peer ranks is : N`` with ``std::cout`` each time it connects a
communicator between processes: at the first run of a collective over a new
set of devices, once per local device (upstream gloo made it an optional log
line, pytorch/gloo d97133a). No Python capture sees it: it goes to file
descriptor 1.

So the few native calls of a group of processes that may connect one run
inside :func:`filtered`, each until the devices it runs on are done (the
first launch of a program over several processes' devices, waited for; a
read that gathers a value from every process; at ``initialize()``, a program
connecting every pair of the processes' k-th devices, the pairs jax's own
same-value check uses when a value is put on such a mesh, whose result it
reads from one device only, so its other devices could connect after it
returned: :func:`lazycore.runtime.pjrt.connect_processes`): for that
window file descriptor 1 is a pipe, and a thread hands everything written to
it on to the real stdout as it arrives, every line but gloo's connection
lines; then descriptor 1 is the real stdout again. Python's and the C
library's buffers are flushed at both ends, so the user's output keeps its
order; a line cut by the window's end is handed on whole.

The same filter, on descriptor 2, drops c10d's once-per-process warning
``Time stats are currently only collected for CPU and CUDA devices`` where
the torch frontend's ``lazy`` process group consumes it
(:mod:`lazycore.frontends.torch.distributed`).
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import threading
from contextlib import contextmanager

__all__ = ["GLOO", "Lines", "dropped", "filtered", "restore"]


class Lines:
    """Lines a window drops: those that ``pattern`` matches whole (without the
    newline), which all start with ``prefix`` and are shorter than ``longest``
    bytes (the start of a line held back until its end is known)."""

    def __init__(self, pattern: bytes, prefix: bytes, longest: int = 400):
        self.pattern, self.prefix, self.longest = re.compile(pattern), prefix, longest
        self.anywhere = re.compile(pattern + rb"\n")

    def drops(self, line: bytes) -> bool:
        return self.pattern.fullmatch(line) is not None

    def strip(self, data: bytes, at_start: bool = True) -> tuple[bytes, int]:
        """``data`` (whose first byte starts a line when ``at_start``) without
        the dropped lines in it, and how many. A dropped line starts a line,
        or follows the first part of one: the native library's threads each
        write their line unlocked, so one line can land inside another's
        start (``[Gloo] Rank [Gloo] Rank 2 is ...\n3 is ...\n``); taking the
        inner one out leaves the outer one whole, taken out in turn."""
        count, pos = 0, 0
        while True:
            m = self.anywhere.search(data, pos)
            if m is None:
                return data, count
            start = data.rfind(b"\n", 0, m.start()) + 1
            before = data[start:m.start()]
            if (start > 0 or at_start) and (not before or self.may_start(before)):
                data, count, pos = data[:m.start()] + data[m.end():], count + 1, start
            else:
                pos = m.start() + 1

    def may_start(self, part: bytes) -> bool:
        return len(part) < self.longest and (self.prefix.startswith(part) or part.startswith(self.prefix))


GLOO = Lines(rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
             rb"Expected number of connected peer ranks is : \d+\r?", b"[Gloo] Rank ")
"""gloo's connection line, on stdout."""

try:
    _LIBC = ctypes.CDLL(None)
except OSError:  # no C library to open by that name (not glibc): its buffers stay as they are
    _LIBC = None

JOIN_S = 2.0
"""How long the end of a window waits for the thread to hand on what was
written in it (it sees the pipe's end at once unless a child process started
in the window holds the pipe: then the thread carries on by itself)."""


def _flush() -> None:
    streams = (sys.stdout, sys.__stdout__, sys.stderr, sys.__stderr__)
    for stream in {id(s): s for s in streams if s is not None}.values():
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or foreign stream: nothing of ours to flush
            pass
    if _LIBC is not None:
        _LIBC.fflush(None)  # the C library's buffers (std::cout writes through them)


class _Forward(threading.Thread):
    """Reads a window's pipe, writes all but the dropped lines to ``out``."""

    def __init__(self, fd: int, out: int, lines: Lines):
        super().__init__(name="lazycore-native-output", daemon=True)
        self.fd, self.out, self.lines = fd, out, lines
        self.dropped = 0

    def run(self) -> None:
        held = b""  # the start of a line that may be a dropped one
        at_start = True  # the next byte starts a line
        try:
            while True:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                data, n = self.lines.strip(held + chunk, at_start)
                held, self.dropped = b"", self.dropped + n
                keep = []
                while data:
                    cut = data.find(b"\n")
                    line = data if cut < 0 else data[:cut + 1]
                    data = b"" if cut < 0 else data[cut + 1:]
                    if at_start and cut >= 0 and self.lines.drops(line[:-1]):
                        self.dropped += 1
                        continue
                    if cut < 0 and at_start and self.lines.may_start(line):
                        held = line  # wait for the rest of the line
                        continue
                    keep.append(line)
                    at_start = cut >= 0
                self._write(b"".join(keep))
            self._write(held)
        finally:
            os.close(self.fd)

    def _write(self, data: bytes) -> None:
        while data and self.out is not None:
            try:
                data = data[os.write(self.out, data):]
            except InterruptedError:
                continue
            except OSError:
                self.out = None  # the real file is gone (a closed pipe): keep reading, drop the rest


class _Window:
    """The one redirection of descriptor ``fd``; windows of several threads share it."""

    def __init__(self, fd: int, lines: Lines):
        self.fd, self.lines = fd, lines
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: int | None = None
        self.thread: _Forward | None = None
        self.dropped = 0
        """Lines dropped so far in this process."""

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            _flush()
            read, write = os.pipe()
            self.saved = os.dup(self.fd)
            os.set_inheritable(self.saved, False)
            self.thread = _Forward(read, self.saved, self.lines)
            self.thread.start()
            os.dup2(write, self.fd)
            os.close(write)

    def exit(self) -> None:
        with self.lock:
            if self.depth > 0:  # else restore() ended the window already
                self.depth -= 1
                if self.depth == 0:
                    self._restore()

    def _restore(self) -> None:
        if self.saved is None:
            return
        _flush()
        os.dup2(self.saved, self.fd)  # the pipe's last writer closes: the thread reads to its end
        thread, self.thread = self.thread, None
        thread.join(JOIN_S)
        self.dropped += thread.dropped
        if not thread.is_alive():
            os.close(self.saved)
        self.saved = None

    def restore(self) -> None:
        """End any window now (the process is about to end)."""
        with self.lock:
            self.depth = 0
            self._restore()


_WINDOWS = {1: _Window(1, GLOO)}
"""Per descriptor, its window: gloo's line on stdout, and what :func:`filtered` was given for another."""


@contextmanager
def filtered(fd: int = 1, lines: Lines = GLOO):
    """Run the body with descriptor ``fd`` filtered of ``lines`` (module doc);
    windows of a descriptor open at once share one filter, of the same lines."""
    window = _WINDOWS.get(fd)
    if window is None:
        window = _WINDOWS.setdefault(fd, _Window(fd, lines))
    with window.lock:
        if window.lines is not lines:
            if window.depth:
                raise ValueError(f"descriptor {fd} is being filtered of other lines")
            window.lines = lines
    window.enter()
    try:
        yield
    finally:
        window.exit()


def restore() -> None:
    """Put the real files back at once (before ``os._exit``)."""
    for window in list(_WINDOWS.values()):
        window.restore()


def dropped(fd: int = 1) -> int:
    """How many lines this process dropped from descriptor ``fd``."""
    window = _WINDOWS.get(fd)
    return 0 if window is None else window.dropped
