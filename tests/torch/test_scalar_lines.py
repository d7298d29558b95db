"""The scalar policy's line places (``ScalarPolicy._line_varied``) under a
backward pass.

A line place (the user's instruction, the number's dtype and the op logged
before it) promotes a number at a *new* step-log position if the
instruction made another value before: a loop's steady positions are first
met at its second step (the first step's log also holds what ran before the
loop), so a number that varies per step is a parameter there at once,
instead of baked once more and promoted, with a compile, a step later.

The backward pass under one ``backward()`` makes many numbers at one
instruction: two embeddings compare their indices with their padding
indices (0 after 5, or 5 after 0) after one op kind. The first value
baked in the first step was a parameter at its moved position in the
second (the line promoted by the other): a compile. A factor varying per
step in the backward pass is still a parameter at once.
"""

import pytest
import torch

import lazycore

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles():
    c = lazycore.metrics.counters()
    return c.get("compiles", 0) + c.get("stack_compiles", 0)


def _counted(step, steps):
    counts = []
    for i in range(steps):
        c0 = _compiles()
        step(i)
        lazycore.mark_step()
        counts.append(_compiles() - c0)
    return counts


class _TwoTables(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Embedding(30, 4, padding_idx=5)
        self.b = torch.nn.Embedding(50, 4, padding_idx=0)

    def forward(self, i, j):
        return (self.a(i) * self.b(j)).sum()


def _two_tables(device, lengths):
    """Two embeddings whose backward passes compare their indices with their
    padding indices, 5 and 0, under one ``backward()``; token batches of
    dynamic length (their first step also holds the tables' upload)."""
    import lazycore.torch as ltorch

    torch.manual_seed(0)
    m = _TwoTables().to(device)
    grads = []

    def step(k):
        t = lengths[k]
        i = torch.randint(0, 30, (t,))
        j = torch.randint(0, 50, (t,))
        if device.type != "cpu":
            i, j = ltorch.dynamic(i.to(device), 0), ltorch.dynamic(j.to(device), 0)
        m.zero_grad()
        m(i, j).backward()
        grads.append((m.a.weight.grad.detach().clone(), m.b.weight.grad.detach().clone()))

    counts = _counted(step, len(lengths))
    return counts, [g.cpu() for pair in grads for g in pair]


def test_two_padding_indices_under_one_backward_compile_once(dev):
    counts, lazy = _two_tables(dev, (40, 43, 47))
    _, eager = _two_tables(torch.device("cpu"), (40, 43, 47))
    assert counts == [1, 0, 0], counts
    for a, b in zip(lazy, eager):
        torch.testing.assert_close(a, b)


def _backward_factor(device):
    """A factor ``i`` of the loss (0.0, 1.0, 2.0, ...): the backward pass
    multiplies the gradient by it, under ``backward()``; the first step
    also holds work from before the loop, so the factor's steady place is
    first met at the second step, where it must be a parameter at once
    (baked, 2.0 would promote it a step later: a compile)."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(4).to(device))
    x = torch.randn(8, 4).to(device) * 2  # pending in the first step only
    out = []

    def step(i):
        loss = ((x * w).tanh() * float(i)).sum()
        loss.backward()
        with torch.no_grad():
            w.sub_(0.1 * w.grad - 0.01)
        w.grad = None
        out.append(loss.detach())

    counts = _counted(step, 5)
    return counts, [t.cpu() for t in out] + [w.detach().cpu()]


def test_a_factor_varying_per_step_in_the_backward_pass_promotes_at_once(dev):
    counts, lazy = _backward_factor(dev)
    _, eager = _backward_factor(torch.device("cpu"))
    assert counts[2:] == [0, 0, 0], counts
    for a, b in zip(lazy, eager):
        torch.testing.assert_close(a, b)
