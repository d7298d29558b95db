"""``F.softmax`` over the last dim gives eager's CPU float32 bits (issue 39:
25,949 of 49,152 values of 2 * N(0, 1) in rows of 768 were off, every value
of a row of 1000). Eager's kernel (``SoftMaxKernel.cpp``,
``_vec_softmax_lastdim``): ``m = max(x)``, ``e = exp(x - m)`` with SLEEF's
exp (a row's tail as a short vector), ``s`` the 16-lane vector sum of ``e``,
then ``e * (1 / s)``. Other dims and types are not claimed."""

import contextlib

import pytest
import torch
import torch.nn.functional as F

from _bits import BY_HAND  # (tests/ is on the path)

# Not values that put a row's exps between 2**-149 and 2**-126 (88 among N(0, 9)):
# eager's are subnormal there, which XLA's CPU loops flush to 0.
_SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), -100.0, 1e4, -1e4, 3e38, -3e38, 20.0, -20.0]


def _off(got, want):
    same = (got == want) | (got.isnan() & want.isnan())
    return int((~same).sum())


# CI: (7, 17) and (3, 1000) (whole vectors and a tail) keep (5, 33)'s path
@pytest.mark.parametrize("shape", [(64, 768), (3, 1000), (7, 17), pytest.param((5, 33), marks=BY_HAND), (4, 3), (1, 1),
                                   (2, 50257), (2, 3, 130), (40000,)])
def test_softmax_last_dim_is_eagers_bits(dev, no_fallback, shape):
    n = 1
    for s in shape:
        n *= s
    g = torch.Generator().manual_seed(n)
    x = (torch.randn(n, generator=g, dtype=torch.float64) * 4).float().reshape(shape)
    want = F.softmax(x, dim=-1)
    got = F.softmax(x.to(dev), dim=-1).cpu()
    assert _off(got, want) == 0


@pytest.mark.parametrize("value", _SPECIAL)
def test_softmax_of_rows_with_a_special_is_eagers_bits(dev, no_fallback, value):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 37, generator=g) * 3
    x[0, 0] = value  # (in the first vector)
    x[1, 36] = value  # (in the row's tail)
    x[2, :] = value  # (a whole row)
    want = F.softmax(x, dim=1)
    got = F.softmax(x.to(dev), dim=1).cpu()
    assert _off(got, want) == 0, (got, want)


def test_softmax_still_differentiates(dev, no_fallback):
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(2))
    grads = []
    for d in ("cpu", dev):
        v = x.to(d).detach().requires_grad_()
        (F.softmax(v, dim=-1) * torch.arange(40.0).to(d)).sum().backward()
        grads.append(v.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])  # (the backward is not claimed bitwise)


def test_softmax_over_a_padded_row_is_eagers_bits_with_one_program_per_bucket(dev, clean_runtime, no_fallback):
    """Rows marked dynamic along the softmax's dim (attention over a growing
    sequence): every length of a bucket runs the bucket's one program, padded,
    and keeps eager's bits: rows under one 16-lane vector (summed in order in
    eager), exactly a vector, with a tail, and causally masked rows."""
    import lazycore.torch as ltorch
    from lazycore.ir.config import override
    from lazycore.observe import metrics

    g = torch.Generator().manual_seed(3)
    before = metrics.counters()["compiles"]
    with override(buckets="16,48"):
        for n in range(1, 49):
            x = torch.randn(3, 5, n, generator=g) * 4
            x[1] = x[1].masked_fill(torch.ones(5, n, dtype=torch.bool).triu(1), float("-inf"))
            x[2, 0, : min(n, 3)] = 0.0
            want = F.softmax(x, dim=-1)
            got = F.softmax(ltorch.dynamic(x.to(dev), 2), dim=-1).cpu()
            assert _off(got, want) == 0, n
    # (a dimension of size 1 broadcasts, so n = 1 runs a program of its own)
    assert metrics.counters()["compiles"] - before == 3


# CI: (300, 21) and (64, 37) (one and two whole vectors and a tail, over many rows) keep (7, 17)'s and (5, 33)'s paths
@pytest.mark.parametrize("shape", [(64, 768), (3, 1000), pytest.param((7, 17), marks=BY_HAND),
                                   pytest.param((5, 33), marks=BY_HAND), (4, 3), (1, 1), (2, 3, 130), (40000,),
                                   (2, 50257), (300, 12), (300, 21), (64, 37)])
def test_softmax_backward_last_dim_is_eagers_bits(dev, no_fallback, shape):
    """``_vec_host_softmax_backward_lastdim``: ``(g - s) * y`` with ``s`` the
    ``map2_reduce_all`` of ``g * y`` in the kernel's lanes (22,606 of 49,152 off
    at 64 x 768 with XLA's sum); a row's partial vector as eager's build
    computes it (the AVX2 build fuses its products into the lanes: 78 of 3,600
    off at 300 x 12 on a Zen 3 with them rounded, T5's attention gradients
    with it)."""
    g = torch.Generator().manual_seed(sum(shape))
    y = F.softmax(torch.randn(shape, generator=g) * 3, dim=-1)
    gy = torch.randn(shape, generator=g)
    want = torch.ops.aten._softmax_backward_data(gy, y, -1, torch.float32)
    got = torch.ops.aten._softmax_backward_data(gy.to(dev), y.to(dev), -1, torch.float32).cpu()
    assert _off(got, want) == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_gradient_over_a_padded_row_is_eagers_bits_with_one_program_per_bucket(dev, no_fallback,
                                                                                     clean_runtime, threads):
    """Attention's backward over a growing sequence: the gradient of a padded
    row's softmax keeps eager's bits (the whole vectors' products rounded
    apart, the valid tail's as eager's build takes them: fused into the sum in
    the calling thread on AVX2, one torch thread here, where the padded row is
    summed fused with the products before the tail rounded first) in the
    bucket's one program."""
    import lazycore.torch as ltorch
    from lazycore.ir.config import override
    from lazycore.observe import metrics

    g = torch.Generator().manual_seed(4)
    before, was = metrics.counters()["compiles"], torch.get_num_threads()
    torch.set_num_threads(threads)
    with override(buckets="16,48"), contextlib.ExitStack() as restore:
        restore.callback(torch.set_num_threads, was)
        for n in range(2, 49):
            x = torch.randn(3, 5, n, generator=g) * 4
            w = torch.randn(3, 5, n, generator=g)
            x[1] = x[1].masked_fill(torch.ones(5, n, dtype=torch.bool).triu(1), float("-inf"))
            grads = []
            for lazy in (False, True):
                v = (ltorch.dynamic(x.to(dev), 2) if lazy else x.clone()).requires_grad_()
                (F.softmax(v, dim=-1) * (ltorch.dynamic(w.to(dev), 2) if lazy else w)).sum().backward()
                grads.append(v.grad.cpu())
            assert _off(grads[1], grads[0]) == 0, n
    assert metrics.counters()["compiles"] - before == 2


# CI: ((64, 12, 33), 1) (vectors of columns and a scalar tail) keeps ((2, 3, 40), 1)'s path, ((4, 10, 5), 1) (every
# column scalar) ((5, 2), 0)'s
@pytest.mark.parametrize("shape, dim", [((4, 10, 5), 1), pytest.param((2, 3, 40), 1, marks=BY_HAND), ((8, 2, 64), 1),
                                        ((64, 12, 33), 1), ((512, 64), 0), pytest.param((5, 2), 0, marks=BY_HAND),
                                        ((6, 16, 256), 0)])
def test_softmax_over_a_dim_with_elements_after_it_is_eagers_bits(dev, no_fallback, shape, dim):
    """``_vec_softmax``: 16 columns at a time, SLEEF's exp (glibc's expf in
    the kernel's scalar columns: a row's last ``inner % 16``, a thread
    chunk's ends), the column summed in order, ``e / sum`` (before: 29,289 of
    32,768 off at 512x64 over dim 0, 10,365 of 25,344 at 64x12x33 over dim
    1). glibc's expf is not always correctly rounded, which the model is, so
    a scalar column can be an ulp off: these shapes have none."""
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g) * 4
    want = F.softmax(x, dim=dim)
    got = F.softmax(x.to(dev), dim=dim).cpu()
    assert _off(got, want) == 0


def test_softmax_over_the_middle_dim_of_a_padded_batch(dev, clean_runtime, no_fallback):
    """Split attention's softmax over its radix (dim 1) of a batch marked
    dynamic: eager's bits, one program for the bucket."""
    import lazycore.torch as ltorch
    from lazycore.ir.config import override
    from lazycore.observe import metrics

    g = torch.Generator().manual_seed(5)
    before = metrics.counters()["compiles"]
    with override(buckets="16"):
        for n in range(9, 17):
            x = torch.randn(n, 2, 32, generator=g) * 4
            want = F.softmax(x, dim=1)
            got = F.softmax(ltorch.dynamic(x.to(dev), 0), dim=1).cpu()
            assert _off(got, want) == 0, n
    assert metrics.counters()["compiles"] - before == 1


# CI: ((64, 12, 33), 1) and ((2, 300, 200), 1) (vectors of columns and a scalar tail) keep ((2, 3, 40), 1)'s path
@pytest.mark.parametrize("shape, dim", [((4, 10, 5), 1), pytest.param((2, 3, 40), 1, marks=BY_HAND), ((64, 12, 33), 1),
                                        ((3, 7, 17, 19), 1), ((512, 64), 0), ((2, 300, 200), 1), ((6, 16, 256), 0)])
def test_log_softmax_over_a_dim_with_elements_after_it_is_eagers_bits(dev, no_fallback, shape, dim):
    """``_vec_logsoftmax`` (3-d cross-entropy's first half): each column's
    in-order sum of exps (SLEEF's, glibc's in a row's last ``inner % 16``
    columns), SLEEF's log, ``(x - max) - log(s)`` (before: 12,538 of 32,768
    off at 512x64 over dim 0, 35,424 of 120,000 at 2x300x200 over dim 1)."""
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g) * 4
    want = F.log_softmax(x, dim=dim)
    got = F.log_softmax(x.to(dev), dim=dim).cpu()
    assert _off(got, want) == 0


# CI: ((64, 12, 33), 1) and ((2, 300, 200), 1) (vectors of columns and a scalar tail) keep ((2, 3, 40), 1)'s path
@pytest.mark.parametrize("shape, dim", [((4, 10, 5), 1), pytest.param((2, 3, 40), 1, marks=BY_HAND), ((64, 12, 33), 1),
                                        ((512, 64), 0), ((2, 300, 200), 1), ((6, 16, 256), 0)])
def test_log_softmax_backward_over_a_dim_with_elements_after_it_is_eagers_bits(dev, no_fallback, shape, dim):
    """``_vec_log_softmax_backward``: per column the in-order sum ``s`` of the
    gradient, then ``g - exp(out) * s`` fused (before: 1,581 of 32,768 off at
    512x64 over dim 0, 6,805 of 120,000 at 2x300x200 over dim 1)."""
    g = torch.Generator().manual_seed(sum(shape))
    y = F.log_softmax(torch.randn(shape, generator=g) * 4, dim=dim)
    gy = torch.randn(shape, generator=g)
    want = torch.ops.aten._log_softmax_backward_data(gy, y, dim, torch.float32)
    got = torch.ops.aten._log_softmax_backward_data(gy.to(dev), y.to(dev), dim, torch.float32).cpu()
    assert _off(got, want) == 0


@pytest.mark.parametrize("shape", [(4, 10, 7), (8, 5, 33), (2, 21, 8, 8)])
def test_cross_entropy_with_the_class_dim_not_last_is_eagers_bits(dev, no_fallback, shape):
    """Token classification's and segmentation's ``F.cross_entropy`` of
    ``(N, C, ...)`` logits: loss and input gradient are eager's bits."""
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g) * 2
    y = torch.randint(0, shape[1], (shape[0],) + shape[2:], generator=g)
    res = []
    for d in ("cpu", dev):
        v = x.clone().to(d).requires_grad_()
        loss = F.cross_entropy(v, y.to(d))
        loss.backward()
        res.append((loss.detach().cpu(), v.grad.cpu()))
    assert _off(res[1][0], res[0][0]) == 0
    assert _off(res[1][1], res[0][1]) == 0


# CI: ((64, 12, 33), 1) (a column's unrolled fused sum) and ((512, 64), 0) (its loop form, past 256 rows) keep
# ((2, 3, 40), 1)'s and ((2, 300, 200), 1)'s paths: the lowering does not branch on the columns' tails here
@pytest.mark.parametrize("shape, dim", [pytest.param((2, 3, 40), 1, marks=BY_HAND), ((64, 12, 33), 1), ((512, 64), 0),
                                        pytest.param((2, 300, 200), 1, marks=BY_HAND), ((6, 16, 256), 0)])
def test_softmax_backward_over_a_dim_with_elements_after_it_is_eagers_bits(dev, no_fallback, shape, dim):
    """``_vec_softmax_backward``: each column's ``g * y`` fused into its
    in-order sum from zero, then ``y * (g - s)`` (before: 21,781 of 32,768
    off at 512x64 over dim 0, 77,758 of 120,000 at 2x300x200 over dim 1)."""
    g = torch.Generator().manual_seed(sum(shape))
    y = F.softmax(torch.randn(shape, generator=g) * 4, dim=dim)
    gy = torch.randn(shape, generator=g)
    want = torch.ops.aten._softmax_backward_data(gy, y, dim, torch.float32)
    got = torch.ops.aten._softmax_backward_data(gy.to(dev), y.to(dev), dim, torch.float32).cpu()
    assert _off(got, want) == 0
