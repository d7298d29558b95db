"""Training-mode batch norm rounds as eager's CPU kernel does (issue 39).

Eager (aten/src/ATen/native/Normalization.cpp, cpu/batch_norm_kernel.cpp)
divides the variance and the unbiased variance in the statistics' type, takes
``1 / sqrt(var + eps)`` in double, updates the running mean in that type with
the momentum rounded into it and the running variance in ``acc_type`` (double
for float32), and gives ``x * alpha + beta``; a channels-last input (or one of
one element per channel and image) it sums row after row in float32 within each
thread's chunk. ``torch._decomp`` does these in float32 in another order: 29 of
512 running-variance elements were off eager's after one call. Each case counts
the elements of the output, saved mean and invstd, and new running statistics
that differ from eager's: none may, but where eager's sums take an order only a
loop over every element could follow (:data:`NEAR`)."""

import pytest
import torch
import torch.nn.functional as F

import lazycore
from _bits import FULL  # (tests/ is on the path)

aten = torch.ops.aten

CL, CL3 = torch.channels_last, torch.channels_last_3d
# id -> (shape, memory format, input dtype, parameters' dtype)
CASES = {
    "2d": ((4, 16, 8, 8), None, torch.float32, None),
    "2d-odd": ((3, 7, 5, 9), None, torch.float32, None),
    "3d": ((2, 8, 4, 4, 4), None, torch.float32, None),
    "1d-sequence": ((8, 16, 12), None, torch.float32, None),
    "1d-rows": ((37, 24), None, torch.float32, None),
    "2d-channels-last": ((4, 16, 6, 6), CL, torch.float32, None),
    "3d-channels-last": ((2, 8, 3, 4, 4), CL3, torch.float32, None),
    "float64": ((4, 8, 5, 5), None, torch.float64, None),
    "bfloat16": ((4, 8, 6, 6), None, torch.bfloat16, None),
    "float16-rows": ((16, 12), None, torch.float16, None),
    "bfloat16-float32-params": ((4, 8, 6, 6), None, torch.bfloat16, torch.float32),
}
CI = ("2d", "1d-rows", "2d-channels-last", "float16-rows")
"""The cases CI runs (each compiles two programs); ``LAZYCORE_TEST_FULL=1`` runs them all."""
NEAR = {"float64", "bfloat16-float32-params"}
"""Eager sums these in order in their own precision (float64's in double, with fused
multiply-adds, one element after another; a bfloat16 input's with float32
statistics in float32 vector lanes), which float64 sums in any order round to
either side of: the mean and running mean are eager's, the rest within a few
ulps (float64: 151 output, 2 invstd, 1 running-variance elements of 200, 8, 8
differ; the bfloat16 case 4 invstd and 1 running-variance of 8)."""


def _data(shape, fmt, dtype, params_dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3 + 5).to(dtype)
    if fmt is not None:
        x = x.contiguous(memory_format=fmt)
    c = shape[1]
    params = [torch.randn(c, generator=g), torch.randn(c, generator=g),
              torch.randn(c, generator=g), torch.rand(c, generator=g) * 4 + 0.5]
    return x, [p.to(params_dtype or dtype) for p in params]


def _off(got, want):
    """Elements of ``got`` (lazy) that are not ``want``'s (NaN equal to NaN)."""
    g = got.cpu()
    assert (g.shape, g.dtype) == (want.shape, want.dtype), (g.shape, g.dtype, want.shape, want.dtype)
    same = (g == want) | (g.isnan() & want.isnan())
    return int((~same).sum())


def _calls(dev, x, params, momentum, eps=1e-5):
    """``[(lazy, eager)]`` for the output, save_mean, save_invstd, running mean and variance."""
    eager = [p.clone() for p in params]
    lazy = [p.to(dev) for p in params]
    want = list(aten.native_batch_norm(x, *eager, True, momentum, eps)) + eager[2:]
    got = list(aten.native_batch_norm(x.to(dev), *lazy, True, momentum, eps)) + lazy[2:]
    lazycore.mark_step()
    return list(zip(got, want))


def _native(dev, x, params, momentum, eps=1e-5):
    return [_off(g, w) for g, w in _calls(dev, x, params, momentum, eps)]


@pytest.mark.parametrize("name", [n for n in CASES if FULL or n in CI])
def test_training_batch_norm_is_eagers_to_the_bit(dev, name):
    """native_batch_norm: output, save_mean, save_invstd, running mean and variance."""
    shape, fmt, dtype, params_dtype = CASES[name]
    for seed, momentum in ((0, 0.1), (1, 0.3))[:2 if FULL else 1]:
        x, params = _data(shape, fmt, dtype, params_dtype, seed)
        if name not in NEAR:
            assert _native(dev, x, params, momentum) == [0] * 5, (seed, momentum)
            continue
        pairs = _calls(dev, x, params, momentum)
        assert [_off(*pairs[i]) for i in (1, 3)] == [0, 0], (seed, momentum)
        ulp = torch.finfo(pairs[2][1].dtype).eps
        for got, want in pairs:  # (the output's near-zero elements: to within ulps of its largest)
            torch.testing.assert_close(got.cpu(), want, rtol=4 * ulp, atol=4 * ulp * float(want.abs().max()))


def test_module_training_steps_are_eagers(dev):
    """nn.BatchNorm2d in training (its _batch_norm_with_update), two calls, with the
    running statistics carried: the outputs and buffers are eager's."""
    torch.manual_seed(0)
    eager = torch.nn.BatchNorm2d(16)
    lazy = torch.nn.BatchNorm2d(16).to(dev)
    lazy.load_state_dict(eager.state_dict())
    for step in range(2):
        x = torch.randn(4, 16, 8, 8) * 2 + step
        want = eager(x)
        got = lazy(x.to(dev))
        lazycore.mark_step()
        assert _off(got, want) == 0, step
        assert _off(lazy.running_mean, eager.running_mean) == 0, step
        assert _off(lazy.running_var, eager.running_var) == 0, step


@pytest.mark.parametrize("threads", [1, 3] if FULL else [3])
def test_rows_follow_eagers_thread_chunks(dev, threads):
    """(N, C) batches are summed in float32 within each thread's chunk of rows."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x, params = _data((29, 40), None, torch.float32, None, seed=2)
        assert _native(dev, x, params, 0.1) == [0] * 5
    finally:
        torch.set_num_threads(before)


def test_zero_variance_without_eps(dev):
    """A constant channel with eps 0: eager's invstd is 0 (InvStd), so the output is the bias."""
    x, params = _data((4, 3, 5, 5), None, torch.float32, None)
    x[:, 1] = 2.5
    assert _native(dev, x, params, 0.1, eps=0.0) == [0] * 5


def test_functional_call_without_running_statistics(dev):
    """F.batch_norm in training with no running statistics (_native_batch_norm_legit.no_stats)."""
    x, (w, b, _, _) = _data((4, 16, 8, 8), None, torch.float32, None, seed=3)
    want = F.batch_norm(x, None, None, w, b, training=True)
    got = F.batch_norm(x.to(dev), None, None, w.to(dev), b.to(dev), training=True)
    assert _off(got, want) == 0


def test_a_large_channels_last_input_takes_no_long_loop(dev):
    """Past ``ROW_LOOP_STEPS`` (here 4,096 rows a thread: 512 steps) a channels-last
    input's statistics are float64 sums rounded once, with no loop in the program:
    the mean is the exact mean rounded once, every result near eager's."""
    from lazycore.frontends.torch import batch_norm_stats
    from lazycore.observe import testing

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x, params = _data((2, 8, 64, 64), CL, torch.float32, None, seed=4)
        assert batch_norm_stats._row_steps(2 * 64 * 64) > batch_norm_stats.ROW_LOOP_STEPS
        with testing.capture() as cap:
            pairs = _calls(dev, x, params, 0.1)
        assert "while" not in cap.text(stage="stablehlo")
    finally:
        torch.set_num_threads(before)
    exact = x.double().mean((0, 2, 3)).float()
    assert _off(pairs[1][0], exact) == 0
    # eager's own float32 sums of 4,096 rows a thread are up to ~15 ulps from the exact
    # mean here (1.4e-6 relative): the results are held to 64 ulps of eager's
    for got, want in pairs:
        ulp = torch.finfo(want.dtype).eps
        torch.testing.assert_close(got.cpu(), want, rtol=64 * ulp, atol=64 * ulp * float(want.abs().max()))
