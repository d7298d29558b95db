"""The ``LAZYCORE_DEBUG`` barrier line gives the step program's own lowering
and compile times, the ones the slow-compile warning reports (issue 43,
item 10).

A step whose identical layers roll into a loop also compiles stacking
programs after its own (:mod:`lazycore.runtime.stacks`); the line used to
print the last of those (a 383 ms compile where the step's program took
8.7 s in a 16-layer training step), so the two lines disagreed. The stacking
programs now get their own count and times on the line."""

import io
import logging
import re

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import debug

LINE = re.compile(r"\[lazycore\] step \d+ cpu:\d+: (\d+) nodes .*?, compile: trace [\d.]+ ms, "
                  r"lowering ([\d.]+) ms, compile ([\d.]+) ms, execute [\d.]+ ms(?:; (\d+) stacking programs? "
                  r"compiled: lowering ([\d.]+) ms, compile ([\d.]+) ms)?$")
WARNING = re.compile(r"slow compile: [\d.]+ ms \(lowering ([\d.]+) ms, XLA ([\d.]+) ms; .*a graph of (\d+) nodes")


class _Both(io.StringIO):
    """The barrier lines and lazycore's warnings, in the order they came."""

    def __init__(self):
        super().__init__()
        self.events = []

    def write(self, text):
        self.events += [("line", t) for t in text.splitlines() if t]
        return len(text)


def _barriers(run) -> list[tuple]:
    """(barrier line match, the slow-compile warnings that came before it since the last line)."""
    both = _Both()
    old, debug.stream = debug.stream, both
    handler = logging.Handler()
    handler.emit = lambda record: both.events.append(("warning", record.getMessage()))
    logger = logging.getLogger("lazycore")
    logger.addHandler(handler)
    try:
        with override(debug=1, slow_compile_ms=0):
            run()
    finally:
        debug.stream = old
        logger.removeHandler(handler)
    out, warned = [], []
    for kind, text in both.events:
        if kind == "warning" and WARNING.search(text):
            warned.append(WARNING.search(text))
        elif kind == "line" and LINE.match(text):
            out.append((LINE.match(text), warned))
            warned = []
    return out


def test_a_rolled_steps_line_gives_its_programs_compile_time_as_the_warning_does(clean_runtime):
    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
                                  for _ in range(6)]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8).to(dev)
    ltorch.mark_step()

    def run():
        for _ in range(2):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            ltorch.mark_step()

    with override(roll_loops=True):
        barriers = _barriers(run)
    assert lazycore.metrics.counters()["stack_compiles"] > 0  # the case this test is about
    assert barriers, "no compile line"
    stacked = [(m, w) for m, w in barriers if m.group(4)]
    assert stacked, [m.group(0) for m, _ in barriers]
    for m, warned in barriers:
        # the step's own program compiles first; its warning has the line's size and times
        first = warned[0]
        assert int(first.group(3)) == int(m.group(1)), (m.group(0), first.group(0))
        assert abs(float(first.group(1)) - float(m.group(2))) <= 0.051, (m.group(0), first.group(0))
        assert abs(float(first.group(2)) - float(m.group(3))) <= 0.051, (m.group(0), first.group(0))
        if m.group(4):  # the stacking programs: the barrier's other compiles, added up
            assert int(m.group(4)) == len(warned) - 1, (m.group(0), [w.group(0) for w in warned])
            rest = sum(float(w.group(2)) for w in warned[1:])
            assert abs(float(m.group(6)) - rest) <= 0.05 * len(warned) + 0.01 * rest, (m.group(0), rest)


def test_a_plain_steps_line_is_unchanged(clean_runtime):
    a = lnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))

    def run():
        np.asarray(a * 3.0 + 1.0)

    ((line, warned),) = _barriers(run)
    assert len(warned) == 1 and line.group(4) is None
    assert abs(float(line.group(2)) - float(warned[0].group(1))) <= 0.051
    assert abs(float(line.group(3)) - float(warned[0].group(2))) <= 0.051
