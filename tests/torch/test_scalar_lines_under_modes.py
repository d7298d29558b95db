"""Ops under a user's torch mode keep their own lines
(``sourceloc.INTERPOSERS``): the ``__torch_function__`` that passes an op on
is not the op's line, its caller is.

Before, every op under a user's ``TorchFunctionMode`` (hunt 39's mode drawing
Mask2Former's random points on the CPU) had the mode's one line: the scalar
policy saw one place whose numbers kept changing and made each a program
parameter a step late, a compile each (Mask2Former: 40 such parameters and a
compile at its third step), and recompile reasons named the mode's line.
"""

import pytest
import torch
from torch.overrides import TorchFunctionMode

import lazycore
import lazycore.torch as ltorch
from lazycore.ir import sourceloc

pytestmark = pytest.mark.usefixtures("clean_runtime")


class PassOn(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _compiles():
    c = lazycore.metrics.counters()
    return c.get("compiles", 0) + c.get("stack_compiles", 0)


def _step(x):
    a = x * 2.0
    b = x * 3.0 + 0.5
    return (a * b - 7.0).sum()


def _counted(run, steps=4):
    counts, values = [], []
    for _ in range(steps):
        c0 = _compiles()
        values.append(run())
        ltorch.mark_step()
        counts.append(_compiles() - c0)
    return counts, values


def test_numbers_under_a_mode_keep_their_lines(dev):
    x = torch.arange(6.0).reshape(2, 3)
    want = float(_step(x))
    lx = x.to(dev)

    def run():
        with PassOn():
            return float(_step(lx))

    counts, values = _counted(run)
    assert values == [want] * 4
    assert counts == [1, 0, 0, 0], counts


def test_a_locations_line_is_the_modes_caller(dev):
    lx = torch.ones(3).to(dev)
    seen = []

    class Where(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(sourceloc.resolve(sourceloc.caller()))
            return func(*args, **(kwargs or {}))

    with Where():
        line = _line_of_next() + 1
        lx * 2.0
    assert seen and seen[0][1] == line, (seen, line)


def _line_of_next():
    import sys

    return sys._getframe(1).f_lineno
