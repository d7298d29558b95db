"""Batch norm's forward the same bits in the channels-last programs as in the N, C, H, W
ones (issue 40: the way to making ``lazy-channels-last`` the CPU's default).

Batch norm's statistics are float64 sums on the CPU (``moments.accumulator``), one
rounding of a nearly exact sum in whatever order XLA adds. With float32 sums the
channels-last program's batch norm moved whole channels by an ulp against the N, C, H, W
one's (1459 of 147456 outputs below), which tests/zoo's resnet18 grew to 4.3e-4 between
the two trainings (2.0e-6 with float64 sums).
"""

import torch
import torch.nn.functional as F

import lazycore
from lazycore import config
from lazycore.frontends.torch.ops import moments
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE, DEFAULT_PIPELINE


def _conv_bn(dev, pipeline):
    """conv, batch norm in training, ReLU: the output, saved statistics and running ones."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, 24, 24, generator=g)
    w = torch.randn(32, 16, 3, 3, generator=g) * 0.1
    gamma, beta = torch.rand(32, generator=g) + 0.5, torch.randn(32, generator=g)
    with config.override(pipeline=pipeline):
        rm, rv = torch.zeros(32, device=dev), torch.ones(32, device=dev)
        y = F.conv2d(x.to(dev), w.to(dev), padding=1)
        out, mean, invstd = torch.ops.aten.native_batch_norm(y, gamma.to(dev), beta.to(dev), rm, rv, True, 0.1, 1e-5)
        out = F.relu(out)
        lazycore.mark_step()
    return [t.cpu() for t in (out, mean, invstd, rm, rv)]


def test_batch_norm_after_a_convolution_is_the_same_bits_in_either_layout(dev, clean_runtime):
    plain, last = _conv_bn(dev, DEFAULT_PIPELINE), _conv_bn(dev, CHANNELS_LAST_PIPELINE)
    for name, a, b in zip(("output", "mean", "invstd", "running mean", "running var"), plain, last):
        assert torch.equal(a, b), (name, int((a != b).sum()), a.numel())


def test_float32_statistics_sum_in_float64_on_the_cpu_only():
    assert moments.accumulator("f32", "cpu") == "f64"
    assert moments.accumulator("f32", "gpu") == "f32"  # eager CUDA sums float32 in float32
    assert moments.accumulator("f32", "tpu") == "f32"


def test_a_float32_row_of_huge_values_has_eagers_statistics(dev):
    """Summed in float64, a row of 3e38s no longer overflows: eager's (0, 3e38)."""
    x = torch.full((4, 3), 3e38)
    want = torch.var_mean(x, dim=0)
    got = [t.cpu() for t in torch.var_mean(x.to(dev), dim=0)]
    for g, w in zip(got, want):
        assert torch.equal(g, w), (g, w)
