"""``lazy.lane_sum`` of rows of more than 256 vectors (issue 39): GPT-2's
50,257 classes are 3,141 vectors of 16 lanes. The lowering unrolled a slice
and an add per vector, so rows of more than ``lane_sums.MAX_VECTORS`` (1,024)
vectors took XLA's ``reduce_sum`` (a tree): a 4 x 50,257 ``F.cross_entropy``
input gradient was 127,819 of 201,028 elements off eager, ``log_softmax``'s
output the same 127,819 and its backward 7,663. Long rows now add their
vectors in a ``stablehlo.while`` over blocks of 64, in eager's order
(``vec::reduce_all``: lane ``i`` adds elements ``i, i + L, ..``, the tail
fused into the first lanes, then the lanes halved), bit for bit.

Eager's ``torch.sum`` is not this order (its cascade sum: ``lazy.cascade_sum``'s
kind); the softmax kernels' row sums are, so eager's bits are compared through
``log_softmax`` and its backward; other lane counts and the fused form against
a NumPy model of the order."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazycore.torch as ltorch
from lazycore.dialect import TensorType, create, tensor_type
from lazycore.dialect.build import new_context
from lazycore.dialect.mlir import func, ir
from lazycore.frontends.torch.ops import lane_sums
from lazycore.passes.lowering import lanes as lowering_lanes
from lazycore.runtime import compiler

aten = torch.ops.aten


def _off(got, want):
    same = (got == want) | (got.isnan() & want.isnan())
    return int((~same).sum())


def _lowered(a, b, **attrs):
    """``lazy.lane_sum(a, b)`` built, lowered to StableHLO: (module text, executable)."""
    dtypes = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            types = [tensor_type(TensorType(v.shape, dtypes[v.dtype])) for v in (a, b)]

            @func.FuncOp.from_py_func(*types, name="main")
            def main(x, y):
                return create("lane_sum", x, y, **attrs).results[0]

        compiler.lower(module)
        return str(module), compiler.compile_stablehlo(module)


def _run(a, b, **attrs):
    return _lowered(a, b, **attrs)[1].run_numpy([a, b])[0]


def _model(a, b, lanes, halving, fused):
    """Eager's ``map2_reduce_all`` order in NumPy: each step rounded to the type
    (a fused multiply-add as its exact float64 product and sum rounded: exact
    products of float32s, one extra rounding of the sum that these inputs
    never meet: float32 only)."""
    t = a.dtype
    wide = lambda v: v.astype(np.float64)  # noqa: E731
    p = a * b
    n = a.shape[-1]
    k = n // lanes
    acc = p[..., :lanes].copy()
    for i in range(1, k):
        s = slice(i * lanes, (i + 1) * lanes)
        acc = (wide(a[..., s]) * wide(b[..., s]) + wide(acc)).astype(t) if fused else acc + p[..., s]
    r = n - k * lanes
    if r:
        acc[..., :r] = (wide(a[..., k * lanes:]) * wide(b[..., k * lanes:]) + wide(acc[..., :r])).astype(t)
    if halving:
        width = lanes
        while width > 1:
            width //= 2
            acc = acc[..., :width] + acc[..., width:2 * width]
        return acc[..., 0]
    total = acc[..., 0]
    for j in range(1, lanes):
        total = total + acc[..., j]
    return total


def _rows(rng, rows, n, dtype=np.float32):
    # a spread of magnitudes, so that the order of the adds moves the last bits
    return (rng.standard_normal((rows, n)) * np.exp(rng.uniform(-3, 3, (rows, n)))).astype(dtype)


# (elements, lanes): 1,025 vectors and a tail, GPT-2's vocabulary at 16 and 8 lanes,
# a multiple of the loop's block plus one, 60,000 vectors
LENGTHS = [(1025 * 16 + 3, 16), (50257, 16), (50257, 8), (64 * 40 * 16 + 16, 16), (60000 * 16, 16)]


@pytest.mark.parametrize("n,lanes", LENGTHS)
def test_long_rows_sum_in_eagers_order(n, lanes):
    rng = np.random.default_rng(n + lanes)
    a = _rows(rng, 3, n)
    b = np.ones_like(a) if n > 100_000 else _rows(rng, 3, n)
    want = _model(a, b, lanes, True, False)
    assert np.sum(want != (a * b).sum(-1)) > 0  # (NumPy's pairwise order differs: the rows test the order)
    got = _run(a, b, lanes=lanes, halving=True, fused=False)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize("n,lanes", [(4113, 1), (50257, 8)])
def test_long_fused_rows_are_a_chain_of_fused_multiply_adds(n, lanes):
    rng = np.random.default_rng(n)
    a, b = _rows(rng, 4, n), _rows(rng, 4, n)
    want = _model(a, b, lanes, False, True)
    assert np.any(want != _model(a, b, lanes, False, False))  # (the products' roundings show)
    got = _run(a, b, lanes=lanes, halving=False, fused=True)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_long_float64_rows_add_their_lanes_in_order():
    rng = np.random.default_rng(7)
    a = _rows(rng, 3, 4 * 2000 + 3, np.float64)
    b = np.ones_like(a)
    got = _run(a, b, lanes=4, halving=False, fused=False)
    assert np.array_equal(got.view(np.int64), _model(a, b, 4, False, False).view(np.int64))


def test_the_program_does_not_grow_with_the_row():
    """Past :data:`UNROLL_VECTORS` the vectors are added in a loop: 3,141
    vectors unrolled were 6,282 slices and adds."""
    sizes = []
    for n in (50257, 60000 * 16):
        a = np.zeros((2, n), np.float32)
        text, _ = _lowered(a, a, lanes=16, halving=True, fused=False)
        assert "stablehlo.while" in text
        sizes.append(text.count("stablehlo."))
    assert max(sizes) < 6 * lowering_lanes.BLOCK + 100, sizes  # (the loop, and under a block unrolled after it)


def test_cross_entropy_takes_the_lane_sum_for_gpt2_rows():
    assert 50257 // 16 <= lane_sums.MAX_VECTORS


def _logits(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * 3


@pytest.mark.parametrize("c", [1025 * 16 + 3, 50257, 60000 * 16 + 7])
def test_log_softmax_of_long_rows_is_eagers_bits(dev, no_fallback, c):
    x = _logits((2, c), seed=c)
    out = torch.log_softmax(x, 1)
    assert _off(torch.log_softmax(x.to(dev), 1).cpu(), out) == 0
    grad = _logits((2, c), seed=c + 1)
    want = aten._log_softmax_backward_data(grad, out, 1, torch.float32)
    got = aten._log_softmax_backward_data(grad.to(dev), out.to(dev), 1, torch.float32).cpu()
    assert _off(got, want) == 0


@pytest.mark.parametrize("shape", [(4, 50257), (2, 128, 50257)], ids=["4x50257", "2x128x50257"])
def test_gpt2_cross_entropy_is_eagers_bits(dev, no_fallback, shape):
    """GPT-2's loss over its vocabulary: the loss and the input gradient (the
    sequence flattened into rows, as its training loop does)."""
    x = _logits(shape, seed=1)
    target = torch.randint(0, shape[-1], shape[:-1], generator=torch.Generator().manual_seed(2))
    results = []
    for d in ("cpu", dev):
        v = x.detach().clone().to(d).requires_grad_()
        loss = F.cross_entropy(v.reshape(-1, shape[-1]), target.to(d).reshape(-1))
        loss.backward()
        results.append((loss.detach().cpu(), v.grad.cpu()))
    (got_loss, got_grad), (want_loss, want_grad) = results[1], results[0]
    assert _off(got_loss, want_loss) == 0
    assert _off(got_grad, want_grad) == 0


def test_gpt2_cross_entropy_over_a_padded_batch(dev, clean_runtime, no_fallback):
    """Rows of 33 and 47 padded to one bucket (64): the loop sums each row as the unpadded one."""
    compiles = []
    for rows in (33, 47):
        x = _logits((rows, 50257), seed=rows)
        target = torch.randint(0, 50257, (rows,), generator=torch.Generator().manual_seed(rows))
        want_x = x.clone().requires_grad_()
        want = F.cross_entropy(want_x, target)
        want.backward()
        v = ltorch.dynamic(x.to(dev), 0).requires_grad_()
        got = F.cross_entropy(v, ltorch.dynamic(target.to(dev), 0))
        got.backward()
        from lazycore.observe import metrics

        before = metrics.counters()["compiles"]
        ltorch.mark_step()
        compiles.append(metrics.counters()["compiles"] - before)
        assert _off(got.cpu(), want.detach()) == 0
        assert _off(v.grad.cpu(), want_x.grad) == 0
    assert compiles[1] == 0, compiles
