"""A view read folds its steps: a run of permutes is one permute and a run
of reshapes is its last. A linear layer's backward reads its weight through
``t().t()`` at every call (T5's tiny training step: 34 reads a step), which
made two transposes each time (issue 40); now one (a read that gave the
storage's handle itself, no node, cost a captured step replays). Values
and layouts are eager's."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.ir.graph import LOG


def _nodes(f) -> int:
    n0 = len(LOG.nodes)
    f()
    return len(LOG.nodes) - n0


CASES = [
    # (name, view, nodes of the read, then one node for the neg)
    ("t().t()", lambda x: x.t().t(), 1),
    ("transpose twice", lambda x: x.transpose(0, 1).transpose(1, 0), 1),
    ("view then view back", lambda x: x.view(12).view(3, 4), 1),
    ("view then view", lambda x: x.view(12).view(2, 6), 1),
    ("t, then t, then view", lambda x: x.t().t().view(4, 3), 2),
    ("view, t, t, view", lambda x: x.view(6, 2).t().t().view(2, 6), 3),
    ("permute of rank 3 twice, then view", lambda x: x.view(3, 2, 2).permute(2, 0, 1).permute(1, 2, 0).view(12), 3),
]


@pytest.mark.parametrize("name,view,made", CASES, ids=[c[0] for c in CASES])
def test_a_view_read_makes_the_folded_steps_nodes_and_eagers_values(dev, name, view, made):
    host = torch.arange(12.0).reshape(3, 4)
    x = host.to(dev)
    want = view(host).neg()
    for _ in range(3):  # recorded, then replayed
        v = view(x)
        assert _nodes(lambda: v.neg()) == made + 1
        got = v.neg()
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
        ltorch.mark_step()


def test_composed_permutes_of_rank_three_are_eagers(dev):
    host = torch.arange(24.0).reshape(2, 3, 4)
    x = host.to(dev)
    for perms in [((2, 0, 1), (1, 2, 0)), ((1, 0, 2), (0, 2, 1)), ((2, 1, 0), (1, 0, 2))]:
        want, v = host, x
        for p in perms:
            want, v = want.permute(*p), v.permute(*p)
        for _ in range(2):
            n = _nodes(lambda: v.neg())
            got = v.neg()
            torch.testing.assert_close(got.cpu(), -want, rtol=0, atol=0)
            ltorch.mark_step()
        assert n <= 2  # one permute at most, then the neg


def test_a_write_through_folded_views_updates_the_base(dev):
    host = torch.zeros(3, 4)
    x = host.clone().to(dev)
    for t in (host, x):
        t.t().t().view(12)[5:7].add_(1.5)
        t.t().t()[0].mul_(3).add_(1)
    torch.testing.assert_close(x.cpu(), host, rtol=0, atol=0)


def test_a_linear_layers_backward_reads_its_weight_without_transposes(dev):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 6, bias=False)
    inp = torch.randn(5, 8)
    lin(inp).sum().backward()
    want = lin.weight.grad.clone()
    lazy = torch.nn.Linear(8, 6, bias=False).to(dev)
    with torch.no_grad():
        lazy.weight.copy_(lin.weight.to(dev))
    x = inp.to(dev).requires_grad_()
    for _ in range(3):
        lazy.weight.grad = None
        x.grad = None
        lazy(x).sum().backward()
        ltorch.mark_step()
    torch.testing.assert_close(lazy.weight.grad.cpu(), want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad.cpu(), torch.ones(5, 6) @ lin.weight.detach(), rtol=1e-6, atol=1e-6)
