"""Batch norm outside training and group norm (forward and backward) are eager's CPU kernels' bits (issue 39).

Batch norm outside training (every torchvision or timm model in ``eval()``, a
frozen backbone) went through the decomposition's ``(x - mean) * rsqrt(var +
eps) * w + b``: 14,583 of 32,768 float32 outputs were off eager's, which
computes ``1 / sqrt(running_var + eps)`` and then ``x * alpha + beta`` as
training does. Group norm (diffusion UNets, detection heads) was 6,675 of
32,768 off: eager takes ``RowwiseMoments``, an inverse deviation in double
(its ``eps`` is a double), and ``scale * x + (-scale * mean + b)`` contracted.
Its backward was 14,061 of 32,768 input gradients and most weight and bias
gradients off: eager sums per plane in vector lanes, per group with
``CalcDsDb``, and the parameters' gradients as chains over the samples."""

import pytest
import torch
import torch.nn.functional as F

from tests._bits import BY_HAND, bits_equal

DTYPES = [torch.float32, torch.float64]


def _randn(*shape, seed=0, dtype=torch.float32):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 2 + 0.5).to(dtype)


def _same(got, want):
    got, want = got.detach().cpu(), want.detach()
    if want.dtype == torch.bfloat16:  # (no NumPy type: its bits as int16)
        got, want = got.view(torch.int16), want.view(torch.int16)
        assert torch.equal(got, want), f"{(got != want).sum().item()} of {want.numel()} differ"
        return
    bits_equal(got.numpy(), want.numpy())


BN_SHAPES = [(8, 16, 6, 6), (32, 16), (4, 16, 5), (2, 16, 3, 4, 5), (3, 16, 1, 1)]


@pytest.mark.parametrize("dtype", DTYPES + [torch.bfloat16], ids=str)
# CI: test_batch_norm_outside_training[*-(8, 16, 6, 6)-*] and [*-(32, 16)-*] keep the path (per-channel terms, one
# fused multiply-add an element); the 3-d, 5-d and 1x1 inputs differ only in the rank they broadcast over
@pytest.mark.parametrize("shape", [s if s in BN_SHAPES[:2] else pytest.param(s, marks=BY_HAND) for s in BN_SHAPES],
                         ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm_outside_training(dev, no_fallback, dtype, shape, affine):
    x = _randn(*shape, dtype=dtype)
    rm, w, b = (_randn(16, seed=s, dtype=dtype) for s in (1, 2, 3))
    rv = (torch.rand(16, generator=torch.Generator().manual_seed(4)) + 0.5).to(dtype)
    params = (w, b) if affine else (None, None)
    want = F.batch_norm(x, rm, rv, *params, eps=1e-3)
    got = F.batch_norm(x.to(dev), rm.to(dev), rv.to(dev), *(p if p is None else p.to(dev) for p in params), eps=1e-3)
    _same(got, want)


@pytest.mark.parametrize("layout", ["contiguous", "channels-last"])
def test_an_eval_module_is_eagers(dev, no_fallback, layout):
    """A BatchNorm2d in ``eval()`` after two training steps: the running
    statistics it was given and the output from them, both eager's."""
    torch.manual_seed(0)
    m = torch.nn.BatchNorm2d(16)
    x = _randn(4, 16, 7, 7)
    if layout == "channels-last":
        x = x.contiguous(memory_format=torch.channels_last)
    lazy = torch.nn.BatchNorm2d(16).to(dev)
    for step in range(2):
        m(x * (step + 1))
        lazy(x.to(dev) * (step + 1))
    m.eval()
    lazy.eval()
    _same(lazy(x.to(dev)), m(x))
    _same(lazy.running_var, m.running_var)


GN_CASES = [((8, 32, 6, 6), 4), ((4, 32, 5), 8), ((2, 32, 3, 4, 5), 32), ((3, 32, 1, 1), 2), ((2, 6, 7, 7), 3),
            ((2, 64), 4)]


# CI: every params branch on ((8, 32, 6, 6), 4), "affine" on ((4, 32, 5), 8), ((2, 6, 7, 7), 3) and ((2, 64), 4):
# the moments' branches follow the row's length (whole Welford chunks; a partial chunk, a scalar tail or none), the
# params' ones the affine step after them, which no row length changes; ((2, 32, 3, 4, 5), 32) repeats
# ((4, 32, 5), 8)'s rows (a partial chunk, float32's tail of 4) and ((3, 32, 1, 1), 2) is ((2, 64), 4)'s rows of 16
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("params,case", [
    pytest.param(params, case, id=f"{params}-{case}",
                 marks=() if case == GN_CASES[0] or (case in (GN_CASES[1], GN_CASES[4], GN_CASES[5])
                                                     and params == "affine") else BY_HAND)
    for case in GN_CASES for params in ["affine", "plain", "weight", "bias"]])
def test_group_norm(dev, no_fallback, dtype, case, params):
    shape, groups = case
    c = shape[1]
    x = _randn(*shape, dtype=dtype) * 3
    w = _randn(c, seed=1, dtype=dtype) if params in ("affine", "weight") else None
    b = _randn(c, seed=2, dtype=dtype) if params in ("affine", "bias") else None
    n, image = shape[0], x[0, 0].numel()
    want = torch.native_group_norm(x, w, b, n, c, image, groups, 1e-5)
    moved = [None if t is None else t.to(dev) for t in (x, w, b)]
    got = torch.native_group_norm(*moved, n, c, image, groups, 1e-5)
    for g, e in zip(got, want):  # the output, the groups' mean and inverse deviation
        _same(g, e)


def test_group_norm_of_a_constant_group(dev, no_fallback):
    """A group of equal values: variance 0 (rounded to 0 or a little above by
    Welford's steps), an output of zeros from ``1 / sqrt(eps)``, as eager's."""
    x = torch.full((2, 8, 3, 3), 1.7)
    x[1] = _randn(8, 3, 3)
    _same(F.group_norm(x.to(dev), 2), F.group_norm(x, 2))


BACKWARD_CASES = [((8, 32, 6, 6), 4), ((4, 32, 5), 8), ((2, 6, 7, 7), 6), ((2, 6, 7, 7), 1), ((3, 16, 17), 2),
                  ((2, 40, 3), 2), ((2, 64, 4, 4), 32)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# CI: the other cases keep ((4, 32, 5), 8)'s paths (planes under a vector: ((2, 40, 3), 2); float64's vector and
# tail: ((3, 16, 17), 2)) and ((2, 6, 7, 7), 6)'s (one channel a group, no vector: ((2, 64, 4, 4), 32)'s two)
@pytest.mark.parametrize("case", [pytest.param(c, marks=BY_HAND) if c in (BACKWARD_CASES[1], BACKWARD_CASES[2]) else c
                                  for c in BACKWARD_CASES], ids=str)
def test_group_norm_backward(dev, no_fallback, dtype, case):
    """The kernel itself, from eager's saved statistics (the planes' sums
    with and without a partial vector, groups of 1 to 20 channels)."""
    shape, groups = case
    c, n = shape[1], shape[0]
    x, gy = _randn(*shape, dtype=dtype), _randn(*shape, seed=5, dtype=dtype)
    w = _randn(c, seed=1, dtype=dtype)
    image = x[0, 0].numel()
    _, mean, rstd = torch.native_group_norm(x, w, None, n, c, image, groups, 1e-5)
    mask = [True, True, True]
    want = torch.ops.aten.native_group_norm_backward(gy, x, mean, rstd, w, n, c, image, groups, mask)
    moved = [t.to(dev) for t in (gy, x, mean, rstd, w)]
    got = torch.ops.aten.native_group_norm_backward(*moved, n, c, image, groups, mask)
    for g, e in zip(got, want):
        _same(g, e)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# CI: per 3, 6, 13 and 22 keep every branch of the channel sum (no whole vector and a tail under and over 16 bytes;
# one, and two or more, whole vectors then a tail rounded in part and fused in part, in both types' lanes);
# 2, 4, 5, 7 and 10 repeat them
@pytest.mark.parametrize("per", [p if p in (3, 6, 13, 22) else pytest.param(p, marks=BY_HAND)
                                 for p in [2, 3, 4, 5, 6, 7, 10, 13, 22]])
@pytest.mark.parametrize("samples", [1, 2])
def test_group_norm_backward_channel_tails(dev, no_fallback, threads, dtype, per, samples):
    """A group's channels after ``CalcDsDb``'s vectors: fused in order in
    ``parallel_for``'s threads, and in the calling thread (one torch thread,
    or one sample and group) rounded 16 bytes' worth at a time first, as the
    compiler vectorized that copy (1 torch thread: 180 of 588 input gradients
    off at 6 channels a group, before)."""
    shape = (samples, per, 5)
    x, gy = _randn(*shape, dtype=dtype), _randn(*shape, seed=5, dtype=dtype)
    w = _randn(per, seed=1, dtype=dtype)
    _, mean, rstd = torch.native_group_norm(x, w, None, samples, per, 5, 1, 1e-5)
    mask = [True, True, True]
    want = torch.ops.aten.native_group_norm_backward(gy, x, mean, rstd, w, samples, per, 5, 1, mask)
    moved = [t.to(dev) for t in (gy, x, mean, rstd, w)]
    got = torch.ops.aten.native_group_norm_backward(*moved, samples, per, 5, 1, mask)
    for g, e in zip(got, want):
        _same(g, e)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# CI: [((8, 32, 6, 6), 4)-*] (whole vectors of channels) and [((2, 6, 7, 7), 1)-*] (a channel tail) keep the
# weightless backward; ((4, 32, 5), 8) and ((2, 6, 7, 7), 6) repeat them (test_group_norm_backward has their sums)
@pytest.mark.parametrize("case", [pytest.param(c, marks=BY_HAND) if c in (BACKWARD_CASES[1], BACKWARD_CASES[2]) else c
                                  for c in BACKWARD_CASES[:4]], ids=str)
def test_group_norm_input_gradient_without_weight(dev, no_fallback, dtype, case):
    shape, groups = case
    x, gy = _randn(*shape, dtype=dtype), _randn(*shape, seed=5, dtype=dtype)
    grads = []
    for device in ("cpu", dev):
        leaf = x.detach().to(device).requires_grad_()
        F.group_norm(leaf, groups).backward(gy.to(device))
        grads.append(leaf.grad)
    _same(grads[1], grads[0])


def test_group_norm_module_trains_as_eager(dev, no_fallback):
    """A GroupNorm trained three SGD steps on ``(gn(x) * r).sum()``: its
    weight and bias are eager's bits after every step."""
    x, r = _randn(4, 16, 5, 5), _randn(4, 16, 5, 5, seed=7)
    results = []
    for device in ("cpu", dev):
        torch.manual_seed(0)
        m = torch.nn.GroupNorm(4, 16).to(device)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            (m(x.to(device)) * r.to(device)).sum().backward()
            opt.step()
        results.append({k: v.detach().cpu() for k, v in m.named_parameters()})
    for k in results[0]:
        _same(results[1][k], results[0][k])
