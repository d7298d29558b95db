"""Batch norm's backward sums as eager's CPU kernel sums them (issue 39).

``native_batch_norm_backward``'s two reductions per channel, the output
gradient's sum and its dot product with ``x - mean``: for a contiguous input
with images of 2 to 512 elements eager's own sums (each image in float32
lanes, the images in a double), elsewhere float64 sums of the float32 terms
on the CPU (eager's ``acc_type<float, false>``) rounded once. Neither depends
on the order XLA adds in: a convolution's weight
gradient behind batch norm is the same bits in the channels-last programs
(``lazy-channels-last``) as in the N, C, H, W ones, where float32 sums in each
layout's order could differ, and each is the float64 answer of its float32
terms rounded once. The arithmetic after the sums is eager's kernel's
(``ops/conv.py`` ``_native_batch_norm_backward``)."""

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore import config
from lazycore.observe import metrics
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE, DEFAULT_PIPELINE

aten = torch.ops.aten


def _data(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 16, 24, 24, generator=g)
    w = torch.randn(32, 16, 3, 3, generator=g) * 0.1
    gamma, beta = torch.rand(32, generator=g) + 0.5, torch.randn(32, generator=g)
    r = torch.randn(8, 32, 24, 24, generator=g)
    return [t.to(dtype) for t in (x, w, gamma, beta, r)]


def _grads(data, device):
    """conv, batch norm in training, ReLU, a weighted sum: the gradients of the input, the
    convolution's weight and batch norm's weight and bias."""
    x, w, gamma, beta, r = [t.to(device) for t in data]
    leaves = [t.clone().requires_grad_() for t in (x, w, gamma, beta)]
    x, w, gamma, beta = leaves
    out = F.relu(F.batch_norm(F.conv2d(x, w, padding=1), None, None, gamma, beta, training=True, eps=1e-5))
    (out * r).sum().backward()
    return [t.grad for t in leaves]


def _lazy_grads(dev, data, pipeline):
    with config.override(pipeline=pipeline):
        grads = _grads(data, dev)
        lazycore.mark_step()
    return [g.cpu() for g in grads]


NAMES = ("input", "conv weight", "bn weight", "bn bias")


def test_the_gradients_are_the_same_bits_in_either_layout(dev, clean_runtime):
    data = _data(0)
    plain, last = _lazy_grads(dev, data, DEFAULT_PIPELINE), _lazy_grads(dev, data, CHANNELS_LAST_PIPELINE)
    for name, a, b in zip(NAMES, plain, last):
        assert torch.equal(a, b), (name, int((a != b).sum()), a.numel())
    assert metrics.counters().get("fallbacks", 0) == 0


@pytest.mark.parametrize("shape", [(8, 32, 16, 16), (2, 3, 5, 7), (4, 8, 22, 23)])
def test_a_contiguous_input_s_sums_are_eagers(dev, clean_runtime, shape):
    """A contiguous input with images of more than one element: eager's
    ``batch_norm_cpu_backward_contiguous_impl`` sums each image's plane in its
    vector lanes in float32 and adds the planes into a double; the weight, bias
    and input gradients are its bits."""
    g = torch.Generator().manual_seed(7)
    x, gy = torch.randn(shape, generator=g) * 2 + 0.5, torch.randn(shape, generator=g)
    w = torch.rand(shape[1], generator=g) + 0.5
    _, mean, invstd = aten.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    want = aten.native_batch_norm_backward(gy, x, w, None, None, mean, invstd, True, 1e-5, [True, True, True])
    args = [t.to(dev) for t in (gy, x, w)]
    got = aten.native_batch_norm_backward(*args, None, None, mean.to(dev), invstd.to(dev), True, 1e-5,
                                          [True, True, True])
    lazycore.mark_step()
    for name, a, b in zip(("input", "weight", "bias"), got, want):
        assert torch.equal(a.cpu(), b), (name, int((a.cpu() != b).sum()), b.numel())


@pytest.mark.parametrize("shape", [(64, 10), (4, 16, 1, 1), (2, 3, 32, 32)])
def test_the_sums_are_their_float64_value_rounded_once(dev, clean_runtime, shape):
    """Where eager takes its channels-last kernel (one element an image), and
    for planes of more than ``PLANE_VECTORS`` vectors (32 x 32): the
    bias's gradient is the float64 sum of the output gradient rounded once, the
    weight's the float64 dot product (of float32 products, as eager's kernel
    multiplies) times invstd rounded once: eager's acc_type<float, false>,
    without its float32 per-thread partial sums."""
    g = torch.Generator().manual_seed(7)
    x, gy = torch.randn(shape, generator=g) * 2 + 0.5, torch.randn(shape, generator=g)
    w = torch.rand(shape[1], generator=g) + 0.5
    _, mean, invstd = aten.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    axes = [d for d in range(len(shape)) if d != 1]
    along = [1, -1] + [1] * (len(shape) - 2)
    want_bias = gy.double().sum(axes).float()
    dotp = ((x - mean.reshape(along)) * gy).double().sum(axes)
    want_weight = (dotp * invstd.double()).float()
    args = [t.to(dev) for t in (gy, x, w)]
    _, gw, gb = aten.native_batch_norm_backward(*args, None, None, mean.to(dev), invstd.to(dev), True, 1e-5,
                                                [True, True, True])
    lazycore.mark_step()
    for name, got, want in (("bias", gb.cpu(), want_bias), ("weight", gw.cpu(), want_weight)):
        assert torch.equal(got, want), (name, int((got != want).sum()), want.numel())


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("mask", [(True, True, True), (False, True, True), (True, False, False), (True, False, True)])
@pytest.mark.parametrize("affine", [True, False])
def test_every_output_mask_and_mode_is_eagers(dev, clean_runtime, train, mask, affine):
    g = torch.Generator().manual_seed(3)
    x, gy = torch.randn(4, 5, 6, 7, generator=g) * 2 + 1, torch.randn(4, 5, 6, 7, generator=g)
    w = torch.rand(5, generator=g) + 0.5 if affine else None
    rm, rv = torch.randn(5, generator=g), torch.rand(5, generator=g) + 0.5
    _, mean, invstd = aten.native_batch_norm(x, w, None, rm, rv, True, 0.1, 1e-5)
    args = lambda d: [None if t is None else t.to(d) for t in (gy, x, w, rm, rv, mean, invstd)]
    want = aten.native_batch_norm_backward(*args("cpu"), train, 1e-5, list(mask))
    got = aten.native_batch_norm_backward(*args(dev), train, 1e-5, list(mask))
    lazycore.mark_step()
    for i, (a, b) in enumerate(zip(got, want)):
        if b is None:
            continue  # eager's kernel leaves what the mask drops undefined
        torch.testing.assert_close(a.cpu(), b, rtol=2e-6, atol=1e-6, msg=lambda m: f"result {i}: {m}")
    assert metrics.counters().get("fallbacks", 0) == 0


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_element_types_are_eagers(dev, clean_runtime, dtype, train):
    """Halves compute in float32 (the decomposition's computation type) and round once."""
    g = torch.Generator().manual_seed(3)
    x, gy = torch.randn(4, 5, 6, 7, generator=g) * 2 + 1, torch.randn(4, 5, 6, 7, generator=g)
    w, rm, rv = torch.rand(5, generator=g) + 0.5, torch.randn(5, generator=g), torch.rand(5, generator=g) + 0.5
    x, gy, w, rm, rv = [t.to(dtype) for t in (x, gy, w, rm, rv)]
    _, mean, invstd = aten.native_batch_norm(x, w, None, rm, rv, True, 0.1, 1e-5)
    args = lambda d: [t.to(d) for t in (gy, x, w, rm, rv, mean, invstd)]
    want = aten.native_batch_norm_backward(*args("cpu"), train, 1e-5, [True, True, True])
    got = aten.native_batch_norm_backward(*args(dev), train, 1e-5, [True, True, True])
    lazycore.mark_step()
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype, i
        torch.testing.assert_close(a.cpu(), b, msg=lambda m: f"result {i}: {m}")
    assert metrics.counters().get("fallbacks", 0) == 0
