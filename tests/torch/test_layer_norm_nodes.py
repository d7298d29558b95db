"""Layer norm's lowering on the CPU (issues 39, 40): a float32 row's mean and
variance are eager's ``RowwiseMoments`` (Welford in its vector lanes: one
``lazy.lane_moments`` node, frontends/torch/ops/norm_backward.py), in few
nodes a call (a transformers step has one or two a block, each recorded and
replayed per call). Before, the mean was the float64 sum over N rounded once
(23 nodes), not eager's bits; its overflow cases are
tests/torch/test_layer_norm_overflow.py's."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.ir.graph import LOG


def _nodes(f):
    ltorch.mark_step()
    n0 = len(LOG.nodes)
    out = f()
    return len(LOG.nodes) - n0, out


@pytest.mark.parametrize("shape,nd", [((4, 32, 64), 1), ((3, 5, 7), 2), ((6, 17), 1)])
def test_the_statistics_and_output_are_eagers(dev, shape, nd):
    torch.manual_seed(0)
    x = torch.randn(shape) * 3 + 1
    ns = shape[-nd:]
    got = [t.cpu() for t in torch.native_layer_norm(x.to(dev), ns, None, None, 1e-5)]
    for g, want in zip(got, torch.native_layer_norm(x, ns, None, None, 1e-5)):
        assert torch.equal(g, want), int((g != want).sum())


def test_a_layer_norm_call_makes_few_nodes(dev):
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 32, 64).to(dev), torch.randn(64).to(dev), torch.randn(64).to(dev)
    _nodes(lambda: torch.native_layer_norm(x, (64,), w, b, 1e-5))  # recorded
    again, _ = _nodes(lambda: torch.native_layer_norm(x, (64,), w, b, 1e-5))  # replayed, as in every step
    assert again <= 17, again  # (22 while float32's fused multiply-adds were float64 sums)


def test_a_constant_row_normalises_to_zero_and_the_bias(dev):
    x = torch.full((3, 64), 0.1)
    b = torch.randn(64)
    want = torch.nn.functional.layer_norm(x, (64,), None, b)
    got = torch.nn.functional.layer_norm(x.to(dev), (64,), None, b.to(dev)).cpu()
    assert torch.equal(got, want) and torch.equal(got, b.expand(3, 64))
