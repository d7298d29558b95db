"""A sum starts from zero, so a sum of ``-0.0`` is ``+0.0`` in eager, also where
it adds one element (issue 39: folds exact for signed zeros). XLA folds a
reduce that keeps the element count into a reshape and drops an add of zero,
so a sum over size-1 dims (float16's path, a non-contiguous input) or of a
0-d tensor came out ``-0.0``; ``lazy.reduce_sum`` now lowers such a sum as
``0 + x``. Average pooling's window sum and batch norm's constant term
without a bias (``0 - mean * alpha``) start from zero as eager's loops do."""

import pytest
import torch

CASES = {
    "0-d": lambda z: z(()).sum(),
    "0-d mean": lambda z: z(()).mean(),
    "size-1 dim, float16": lambda z: z((1, 3), torch.float16).sum(0),
    "size-1 dim, bfloat16": lambda z: z((3, 1), torch.bfloat16).sum(1),
    "size-1 dim, non-contiguous": lambda z: z((3, 1, 2)).permute(2, 1, 0).sum(1),
    "size-1 dims, float64": lambda z: z((1, 1, 4), torch.float64).sum((0, 1)),
    "size-1 dim, mean": lambda z: z((1, 3)).mean(0),
    "whole tensor": lambda z: z((2, 3)).sum(),
    "columns": lambda z: z((4, 3)).sum(0),
    # window sums and the norms' constant term start from zero too
    "avg_pool2d": lambda z: torch.nn.functional.avg_pool2d(z((1, 1, 3, 3)), 3),
    "avg_pool1d": lambda z: torch.nn.functional.avg_pool1d(z((1, 1, 4)), 2),
    "avg_pool2d of size 1": lambda z: torch.nn.functional.avg_pool2d(z((1, 1, 2, 2)), 1),
    "batch norm in eval(), no bias": lambda z: torch.nn.functional.batch_norm(
        z((2, 3)), z((3,)) * 0, z((3,)) * 0 + 1),
    "batch norm in training, no bias": lambda z: torch.nn.functional.batch_norm(z((2, 3)), None, None, training=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_sum_of_negative_zeros_is_positive_zero(dev, no_fallback, case):
    f = CASES[case]
    want = f(lambda shape, dtype=torch.float32: torch.full(shape, -0.0, dtype=dtype))
    got = f(lambda shape, dtype=torch.float32: torch.full(shape, -0.0, dtype=dtype).to(dev)).cpu()
    assert got.dtype == want.dtype
    assert torch.equal(got.signbit(), want.signbit()), (got, want)
    assert not want.signbit().any()


def test_other_values_pass_through_unchanged(dev, no_fallback):
    x = torch.tensor([[float("nan"), float("inf"), -float("inf"), -2.5, 0.0, -0.0]]).t()
    got = x.to(dev).sum(1).cpu()
    want = x.sum(1)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(), want.nan_to_num())
    assert torch.equal(got.signbit(), want.signbit())
