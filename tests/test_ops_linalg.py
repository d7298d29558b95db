"""dot_general and convolution through the real stack, against NumPy and PyTorch."""

import itertools

import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect import ShapeError, TensorType, infer
from lazycore.dialect.types import type_of


def i64_array(values) -> str:
    return f"array<i64: {', '.join(map(str, values))}>" if values else "array<i64>"


def run_binary(name: str, a: np.ndarray, b: np.ndarray, **attrs) -> np.ndarray:
    ta, tb = type_of(a), type_of(b)
    (result,) = infer(name, ta, tb, **attrs)
    attr_text = ", ".join(f"{k} = {v if isinstance(v, int) else i64_array(v)}" for k, v in attrs.items())
    text = f"""
func.func @main(%a: {ta}, %b: {tb}) -> {result} {{
  %0 = "lazy.{name}"(%a, %b) {{{attr_text}}} : ({ta}, {tb}) -> {result}
  return %0 : {result}
}}
"""
    (out,) = compiler.run_module(text, [a, b])
    return out


def sample(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# --- dot_general -------------------------------------------------------------------

# (lhs shape, rhs shape, lhs_batch, rhs_batch, lhs_contract, rhs_contract, einsum)
DOTS = {
    "matmul": ((3, 4), (4, 5), (), (), (1,), (0,), "ik,kj->ij"),
    "batched_matmul": ((2, 3, 4), (2, 4, 5), (0,), (0,), (2,), (1,), "bik,bkj->bij"),
    "vector_dot": ((6,), (6,), (), (), (0,), (0,), "k,k->"),
    "matvec": ((3, 4), (4,), (), (), (1,), (0,), "ik,k->i"),
    "two_contract_dims": ((2, 3, 4), (4, 5, 3), (), (), (1, 2), (2, 0), "ikl,ljk->ij"),
    "batch_not_leading": ((3, 2, 4), (4, 5, 2), (1,), (2,), (2,), (0,), "ibk,kjb->bij"),
    "outer": ((3,), (4,), (), (), (), (), "i,j->ij"),
}


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("case", DOTS)
def test_dot_general_matches_einsum(rng, case, dtype):
    ls, rs, lb, rb, lc, rc, spec = DOTS[case]
    a, b = sample(rng, ls, dtype), sample(rng, rs, dtype)
    out = run_binary("dot_general", a, b, lhs_batch=lb, rhs_batch=rb, lhs_contract=lc, rhs_contract=rc)
    want = np.einsum(spec, a, b).astype(dtype)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_dot_general_rule_errors():
    a, b = TensorType((3, 4), "f32"), TensorType((5, 6), "f32")
    with pytest.raises(ShapeError, match="contract dims must have equal sizes: lhs dim 1 is 4, rhs dim 0 is 5"):
        infer("dot_general", a, b, lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    with pytest.raises(ShapeError, match=r"lhs_contract \[1\] and rhs_contract \[\] must have the same length"):
        infer("dot_general", a, b, lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=())
    with pytest.raises(ShapeError, match="overlap"):
        infer("dot_general", a, a, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(0,), rhs_contract=(1,))
    with pytest.raises(ShapeError, match="same element type, got f32 and i32"):
        infer("dot_general", a, TensorType((4,), "i32"), lhs_batch=(), rhs_batch=(),
              lhs_contract=(1,), rhs_contract=(0,))


# --- convolution -------------------------------------------------------------------


def conv_reference(x, w, strides, padding, lhs_dilation, rhs_dilation, groups):
    """Direct N-d grouped convolution in float64: dilate, pad, sum over kernel taps."""
    n_spatial = x.ndim - 2
    n, c = x.shape[:2]
    o = w.shape[0]
    dilated = np.zeros((n, c) + tuple((s - 1) * d + 1 for s, d in zip(x.shape[2:], lhs_dilation)))
    dilated[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
    pads = [(0, 0), (0, 0)] + [(padding[2 * k], padding[2 * k + 1]) for k in range(n_spatial)]
    xp = np.pad(dilated, pads)
    out_sizes = [
        (xp.shape[2 + k] - ((w.shape[2 + k] - 1) * rhs_dilation[k] + 1)) // strides[k] + 1
        for k in range(n_spatial)
    ]
    out = np.zeros((n, o, *out_sizes))
    cg, og = c // groups, o // groups
    for g, taps in itertools.product(range(groups), itertools.product(*map(range, w.shape[2:]))):
        window = tuple(
            slice(t * d, t * d + s * (m - 1) + 1, s)
            for t, d, s, m in zip(taps, rhs_dilation, strides, out_sizes)
        )
        patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
        tap = w[(slice(g * og, (g + 1) * og), slice(None)) + taps]
        out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, tap)
    return out


# (input shape, kernel shape, strides, padding, lhs_dilation, rhs_dilation, groups)
CONVS = {
    "1d_plain": ((2, 3, 10), (4, 3, 3), (1,), (0, 0), (1,), (1,), 1),
    "1d_stride_pad": ((2, 3, 11), (4, 3, 4), (2,), (2, 1), (1,), (1,), 1),
    "2d_plain": ((1, 2, 6, 7), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), (1, 1), 1),
    "2d_stride_pad_dilation": ((2, 3, 9, 8), (5, 3, 3, 2), (2, 3), (1, 1, 2, 0), (1, 1), (2, 1), 1),
    "2d_groups": ((2, 6, 7, 7), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), (1, 1), 2),
    "2d_depthwise": ((1, 4, 5, 5), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), (1, 1), 4),
    "2d_lhs_dilation": ((1, 2, 4, 5), (3, 2, 3, 3), (1, 1), (2, 2, 1, 2), (2, 3), (1, 1), 1),
    "3d": ((1, 2, 4, 5, 6), (2, 2, 2, 3, 2), (1, 2, 1), (0, 1, 1, 0, 0, 0), (1, 1, 1), (1, 1, 2), 1),
}


def run_conv(x, w, strides, padding, lhs_dilation, rhs_dilation, groups):
    return run_binary("convolution", x, w, strides=strides, padding=padding,
                      lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, groups=groups)


@pytest.mark.parametrize("case", CONVS)
def test_convolution_matches_reference(rng, case):
    xs, ws, *params = CONVS[case]
    x, w = sample(rng, xs, np.float32), sample(rng, ws, np.float32)
    out = run_conv(x, w, *params)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, conv_reference(x, w, *params), rtol=1e-4, atol=1e-4)


def test_integer_convolution_is_exact(rng):
    x, w = sample(rng, (2, 4, 6, 6), np.int32), sample(rng, (4, 2, 3, 3), np.int32)
    params = ((2, 1), (1, 0, 1, 1), (1, 1), (1, 2), 2)
    out = run_conv(x, w, *params)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, conv_reference(x, w, *params).astype(np.int32))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_convolution_matches_torch(rng, dims):
    """The fixed layouts and the output size are PyTorch's."""
    import torch  # imported here: only this test needs it, and it is slow to load

    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[dims]
    x = sample(rng, (2, 6) + (7,) * dims, np.float32)
    w = sample(rng, (4, 3) + (3,) * dims, np.float32)
    stride, pad, dilation = (2,) * dims, (1,) * dims, (2,) * dims
    want = conv(torch.from_numpy(x), torch.from_numpy(w), stride=stride, padding=pad,
                dilation=dilation, groups=2).numpy()
    out = run_conv(x, w, stride, (1,) * (2 * dims), (1,) * dims, dilation, 2)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_convolution_rule_errors():
    x, w = TensorType((1, 4, 8, 8), "f32"), TensorType((6, 2, 3, 3), "f32")
    ok = dict(strides=(1, 1), padding=(0, 0, 0, 0), lhs_dilation=(1, 1), rhs_dilation=(1, 1), groups=2)
    assert infer("convolution", x, w, **ok) == (TensorType((1, 6, 6, 6), "f32"),)
    with pytest.raises(ShapeError, match=r"input channels \(4\) must equal kernel input channels \(2\) times"):
        infer("convolution", x, w, **{**ok, "groups": 1})
    with pytest.raises(ShapeError, match="padding .* must have 4 entries"):
        infer("convolution", x, w, **{**ok, "padding": (1, 1)})
    with pytest.raises(ShapeError, match="strides must be positive"):
        infer("convolution", x, w, **{**ok, "strides": (0, 1)})
    with pytest.raises(ShapeError, match="dilated kernel size 7 exceeds padded input size 2"):
        infer("convolution", TensorType((1, 4, 2, 8), "f32"), w, **{**ok, "rhs_dilation": (3, 1)})
    with pytest.raises(ShapeError, match=r"kernel output channels \(5\) must be divisible by groups \(2\)"):
        infer("convolution", x, TensorType((5, 2, 3, 3), "f32"), **ok)
