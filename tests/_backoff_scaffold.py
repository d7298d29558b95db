"""What the two capture-backoff tests share (tests/torch/test_capture_backoff.py,
tests/numpy/test_numpy_capture_backoff.py): a step that capture refuses to
record until a chosen call, the call at which a captured step first
replayed, the CaptureWarnings a run raised, and a step whose Python number
changes every call for a while."""

from __future__ import annotations

import contextlib
import warnings

from lazycore.trace.capture import CaptureWarning


class Stash:
    """The refusal: a step gives :meth:`keep` a value it made, which is kept
    in a list outside the step (capture cannot see it, so it refuses the
    recording) for the calls before ``until`` (all: None; none: 0)."""

    def __init__(self, until: int | None):
        self.until = until
        self.kept: list = []
        self.on = until != 0

    def before_call(self, i: int) -> None:
        if i == self.until:
            self.on = False  # (the step reads the flag: one value while it stashes and one after)

    def keep(self, value) -> None:
        if self.on:
            self.kept.append(value)


def first_replay():
    """``(on_call, first)``: ``on_call(i, fn)``, called after each call ``i`` of the
    captured ``fn``, puts in ``first`` the first ``i`` after which ``fn`` had replayed."""
    first: list = []

    def on_call(i, fn):
        if fn.replays and not first:
            first.append(i)

    return on_call, first


@contextlib.contextmanager
def capture_warnings():
    """Every CaptureWarning raised inside (each one, not once per line), in a list
    filled when the block ends."""
    said: list = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield said
    said.extend(w for w in caught if issubclass(w.category, CaptureWarning))


_SCALE = [1.0]
"""The step's number: a global (as a user's module-level setting), read each call."""


def number_changing_for_a_while(capture, x, host, calls: int = 60, changing: int = 30, settled: float = 7.0):
    """``x * scale`` captured by ``capture`` and called ``calls`` times, ``scale`` a
    new number at each of the first ``changing`` calls (the call's index) and
    ``settled`` after; ``(the values as host lists, the CaptureWarnings, the step)``."""
    @capture
    def step(x):
        return x * _SCALE[0]

    got = []
    with capture_warnings() as said:
        for i in range(calls):
            _SCALE[0] = float(i) if i < changing else settled  # a new number every call, then one number
            got.append(host(step(x)))
    return got, said, step
