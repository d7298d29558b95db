"""What the thread tests share: a test body run in a child process with
faulthandler on, and a group of threads whose errors the caller asserts on.

A thread test can crash the process (a segfault in MLIR) or hang (a lock
taken in the wrong order): in a child, a crash fails that one test with the
native stacks of every thread, and a hang dumps them and exits before the
parent's timeout kills the child without a word (tests/isolated.py runs it).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import traceback

from isolated import run_isolated

_TARGET = "LAZYCORE_TEST_THREADS_TARGET"
_HANG = "LAZYCORE_TEST_THREADS_HANG_S"

_MARGIN = 20
"""Seconds before the parent's timeout at which a hung child dumps its stacks and exits."""


def in_child(test_file: str, function: str, timeout: int = 300) -> None:
    """Call ``function`` of the test module ``test_file`` in a child process
    under faulthandler (crashes and hangs print every thread's stack); fail
    unless it returns normally within ``timeout`` seconds."""
    module = os.path.splitext(os.path.basename(test_file))[0]
    env = {_TARGET: f"{os.path.dirname(os.path.abspath(test_file))}:{module}:{function}",
           _HANG: str(max(timeout - _MARGIN, 1))}
    try:
        run_isolated(__file__, "_entry", timeout=timeout, env=env)
    except AssertionError as e:  # (its message names the entry point, not the test's function)
        raise AssertionError(f"{module}.{function} in a child: {e}") from None


def _entry() -> None:
    """The child's side of :func:`in_child`."""
    import faulthandler

    folder, module, function = os.environ[_TARGET].rsplit(":", 2)
    faulthandler.enable()
    faulthandler.dump_traceback_later(float(os.environ[_HANG]), exit=True)
    try:
        sys.path.insert(0, folder)
        getattr(importlib.import_module(module), function)()
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_threads(work, args: list, errors: list | None = None, timeout: float | None = None) -> list:
    """Call ``work(*a)`` for each ``a`` of ``args``, each in a thread of its
    own, and join them (each within ``timeout`` seconds). Returns ``errors``
    (a new list if None) with one line per exception a thread raised and per
    thread still running after its join; the caller asserts it is empty."""
    errors = [] if errors is None else errors

    def guarded(a):
        try:
            work(*a)
        except BaseException as e:  # noqa: BLE001 (reported by the caller's thread)
            errors.append(f"{a}: {e!r}\n{traceback.format_exc()}")

    threads = [threading.Thread(target=guarded, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t, a in zip(threads, args):
        t.join(timeout)
        if t.is_alive():
            errors.append(f"{a}: still running after {timeout} s")
    return errors
