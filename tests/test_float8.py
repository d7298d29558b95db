"""float8 element types (E4M3FN, E5M2 and their FNUZ variants) through every layer.

The dialect's types, NumPy's through ml_dtypes and torch's, host transfers
both ways by their bits, conversions with eager's rounding and saturation,
the ops eager's CPU kernels take for float8 (``mul``, ``mm``, ``addmm``,
``abs``, ``eq``, copies and data movement) value for value, eager's error for
the ones they refuse, the quantization recipe (scale, cast, dequantize), and
the NumPy frontend against ml_dtypes. Compared bitwise throughout.

XLA's CPU backend moves float8_e5m2 values through float16, which turns
every NaN into 0x7F; the ops that only move values (select, concatenate,
pad, slices) move e5m2 as bytes (lazycore.passes.lowering.float8), so NaNs
keep their bits there as in eager and ml_dtypes: the data-movement tests hold
NaNs of both signs. A NaN computed by NumPy-frontend arithmetic (``maximum``
of a -NaN included) is compared as a NaN: its sign and payload are XLA's,
where ml_dtypes passes an operand's on.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import lazycore.numpy as lnp
from lazycore.dialect import ShapeError, infer
from lazycore.dialect.types import FLOAT8_DTYPES, TensorType, from_numpy_dtype, is_float, to_numpy_dtype
from lazycore.frontends.torch import dtypes as tdtypes

from _bits import BY_HAND  # (tests/ is on the path)

@pytest.fixture(scope="module")
def dev():
    import lazycore.torch as ltorch

    return ltorch.device()


F8 = {
    torch.float8_e4m3fn: ("f8E4M3FN", ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: ("f8E5M2", ml_dtypes.float8_e5m2),
    torch.float8_e4m3fnuz: ("f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: ("f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz),
}
TORCH_F8 = list(F8)
IDS = [str(t).split(".")[1] for t in TORCH_F8]
# CI: the float8_e4m3fnuz variants take float8_e5m2fnuz's path (the FNUZ types share every branch: a plain
# convert with no saturation or NaN fix-up, no infinity, FNUZ NaN to 0 in i32/i64, no byte moves: that is e5m2's)
TORCH_F8_CI = [pytest.param(t, marks=BY_HAND) if t is torch.float8_e5m2fnuz else t for t in TORCH_F8]

# Values at every edge of the conversions: overflow (saturating to 448 in
# eager's e4m3fn, inf in e5m2, NaN in the FNUZ types), the largest finite
# values and the ties next to them, infinities, NaNs of both signs, signed
# zeros, subnormals and values below them, round-half-even ties.
EDGES = [0.0, -0.0, 1.0, -1.0, 0.3, 2.5, 1.0625, 1.1875, 3.0e-3, -7.0, 100.0,
         448.0, -448.0, 464.0, 470.0, 480.0, 500.0, 1000.0, -1e6, 57344.0, 61440.0, 65504.0,
         float("inf"), float("-inf"), float("nan"), -float("nan"),
         2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 2.0 ** -14, 2.0 ** -16, 2.0 ** -17, 2.0 ** -18, 1e-9,
         -(2.0 ** -9), 2.0 ** -10 * 1.5, 2.0 ** -16 * 1.5]


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.dtype in F8 else t


def assert_same(got: torch.Tensor, want: torch.Tensor):
    """Equal bit for bit for float8 (NaN's sign and payload included); floats
    with NaN where eager has NaN; anything else equal."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype in F8 or not got.is_floating_point():
        assert torch.equal(bits(got), bits(want)), (bits(got).tolist(), bits(want).tolist())
    else:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


# --- the element types --------------------------------------------------------------------


def test_dialect_numpy_and_torch_name_the_same_types():
    for tdt, (name, ml) in F8.items():
        assert name in FLOAT8_DTYPES and is_float(name)
        assert to_numpy_dtype(name) == np.dtype(ml) and from_numpy_dtype(ml) == name
        assert tdtypes.lazy_dtype(tdt) == name and tdtypes.TO_TORCH[name] is tdt
    f32 = TensorType((2, 3), "f32")
    assert infer("convert", f32, dtype="f8E4M3FN") == (TensorType((2, 3), "f8E4M3FN"),)
    assert infer("bitcast_convert", TensorType((4,), "f8E5M2"), dtype="ui8") == (TensorType((4,), "ui8"),)


def test_all_reduce_refuses_float8():
    """XLA's CPU backend has no float8 all-reduce (UNIMPLEMENTED at compile): the rule says so."""
    x = TensorType((4, 2), "f8E4M3FN")
    with pytest.raises(ShapeError, match="other than float8"):
        infer("all_reduce", x, mesh=(2,), sharding=(0, -1), axis=0, reduction="sum")
    with pytest.raises(ShapeError, match="other than float8"):
        infer("reduce_scatter", x, mesh=(2,), sharding=(0, -1), axis=0, dim=1, reduction="sum")


# --- host transfer ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", TORCH_F8_CI, ids=IDS)
def test_every_bit_pattern_goes_to_the_device_and_back(dev, dtype):
    host = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    lazy = host.to(dev)
    assert lazy.dtype == dtype
    assert_same(lazy.cpu(), host)
    assert_same(lazy.view(torch.uint8).cpu(), host.view(torch.uint8))  # a bitcast on the device
    # float8 -> float32 on the device: exact, as eager's
    assert_same(lazy.float().cpu(), host.float())


@pytest.mark.parametrize("dtype", TORCH_F8, ids=IDS)
def test_to_numpy_and_from_numpy_use_ml_dtypes(dtype):
    name, ml = F8[dtype]
    host = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    a = tdtypes.to_numpy(host)
    assert a.dtype == np.dtype(ml)
    np.testing.assert_array_equal(a.view(np.uint8), np.arange(256, dtype=np.uint8))
    assert torch.equal(tdtypes.from_numpy(a).view(torch.uint8), host.view(torch.uint8))


# --- conversions ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", TORCH_F8_CI, ids=IDS)
@pytest.mark.parametrize("source", [torch.float32, torch.float64, torch.bfloat16, torch.float16],
                         ids=["f32", "f64", "bf16", "f16"])
def test_cast_to_float8_is_eagers(dev, dtype, source):
    """Round to nearest even through float32; e4m3fn saturates (inf too), e5m2
    overflows to inf with c10's NaN (0x7F with the sign), the FNUZ types to NaN."""
    x = torch.tensor(EDGES, dtype=torch.float64)
    x = torch.cat([x, torch.tensor([1.0625 + 2.0 ** -40], dtype=torch.float64)])  # a double just past a tie
    x = x.to(source)
    assert_same(x.to(dev).to(dtype).cpu(), x.to(dtype))


@pytest.mark.parametrize("dtype", TORCH_F8_CI, ids=IDS)
@pytest.mark.parametrize("source", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_cast_integers_to_float8_is_eagers(dev, dtype, source):
    if source == torch.bool:
        x = torch.tensor([True, False, True])
    else:
        info = torch.iinfo(source)
        x = torch.tensor([0, 1, -1, 3, 17, 300, 449, 1000, 57344, 61440, 2**24 + 1, info.min, info.max],
                         dtype=torch.int64).clamp(info.min, info.max).to(source)
    assert_same(x.to(dev).to(dtype).cpu(), x.to(dtype))


@pytest.mark.parametrize("dtype", TORCH_F8_CI, ids=IDS)
# CI: float16 takes bfloat16's path (float8 -> f32 -> a half), int8 int16's (f32's 32-bit C cast, then the low bits)
# and float8_e4m3fnuz float8_e5m2fnuz's (the FNUZ types' plain convert)
@pytest.mark.parametrize("target", [torch.float32, torch.float64, pytest.param(torch.bfloat16, marks=BY_HAND),
                                    torch.float16, torch.int32, torch.int64, pytest.param(torch.int16, marks=BY_HAND),
                                    torch.int8, torch.uint8, torch.bool, *TORCH_F8_CI])
def test_cast_from_float8_is_eagers(dev, dtype, target):
    """Every value of the type (all 256 bit patterns) to floats, integers (through
    float, C's cast), bool and the other float8 types."""
    host = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    assert_same(host.to(dev).to(target).cpu(), host.to(target))


# --- the ops eager takes ---------------------------------------------------------------------


def _operands(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(6, 9, generator=g) * 40).to(dtype)
    b = (torch.randn(9, 5, generator=g) * 40).to(dtype)
    c = (torch.randn(6, 5, generator=g) * 40).to(dtype)
    # overflow of the product, NaN, infinity, signed zero
    u = torch.tensor([300.0, 20.0, float("nan"), -3.0, 0.5, float("inf"), -0.0, 448.0]).to(dtype)
    v = torch.tensor([2.0, 30.0, 1.0, -float("nan"), 0.25, 0.0, 5.0, -448.0]).to(dtype)
    return a, b, c, u, v


ARITH = {
    "mul": lambda a, b, c, u, v: u * v,
    "mul_matrices": lambda a, b, c, u, v: a * a,
    "mm": lambda a, b, c, u, v: a @ b,
    "addmm": lambda a, b, c, u, v: torch.addmm(c, a, b),
    "addmm_scaled": lambda a, b, c, u, v: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
    "linear": lambda a, b, c, u, v: torch.nn.functional.linear(a, b.t()),
    "linear_bias": lambda a, b, c, u, v: torch.nn.functional.linear(a, b.t(), c[0]),
    "abs": lambda a, b, c, u, v: v.abs(),
    "eq": lambda a, b, c, u, v: u == v,
    "ne": lambda a, b, c, u, v: u != v,
    "isnan": lambda a, b, c, u, v: u.isnan(),
}


@pytest.mark.parametrize("dtype", TORCH_F8_CI, ids=IDS)
# CI: "mul" takes mul_matrices' path (aten.mul.Tensor in float32, rounded once), with the edge values
@pytest.mark.parametrize("op", [pytest.param(op, marks=BY_HAND) if op == "mul_matrices" else op for op in ARITH])
def test_ops_eager_takes_match_it_bitwise(dev, dtype, op):
    """mul, mm, addmm compute in float32 and round once, as eager's kernels
    (e4m3fn saturating: 300 * 2 is 448, where XLA's float8 multiply gives NaN)."""
    args = _operands(dtype)
    want = ARITH[op](*args)
    got = ARITH[op](*(t.to(dev) for t in args)).cpu()
    assert_same(got, want)


MOVES = {
    "cat": lambda a, b, c: torch.cat([a, c], dim=1),
    "stack": lambda a, b, c: torch.stack([c, c]),
    "where": lambda a, b, c: torch.where(c.float() > 0, c, c.flip(0)),
    "t_contiguous": lambda a, b, c: a.t().contiguous(),
    "index": lambda a, b, c: a[torch.tensor([4, 0, 4])],
    "slice": lambda a, b, c: a[1:5:2, ::3].contiguous(),
    "index_put": lambda a, b, c: c.index_put((torch.tensor([1, 3]),), a[:2, :5]),
    "clone_fill": lambda a, b, c: c.clone().fill_(2.5),
    "zeros": lambda a, b, c: torch.zeros_like(c),
    "full": lambda a, b, c: torch.full((3,), 200.0, dtype=c.dtype, device=c.device),
    "copy_": lambda a, b, c: torch.empty_like(c).copy_(c),
}


@pytest.mark.parametrize("dtype", TORCH_F8_CI, ids=IDS)
@pytest.mark.parametrize("op", list(MOVES))
def test_data_movement_matches_eager_bitwise(dev, dtype, op):
    a, b, c, _, _ = _operands(dtype, seed=1)
    a[0, :4] = torch.tensor([448.0, -0.0, 2.0 ** -9, -3.0]).to(dtype)
    a[1, :2] = torch.tensor([float("nan"), -float("nan")]).to(dtype)
    c[2, 1:3] = torch.tensor([-float("nan"), float("nan")]).to(dtype)
    want = MOVES[op](a, b, c)
    got = MOVES[op](*(t.to(dev) for t in (a, b, c))).cpu()
    assert_same(got, want)


REFUSED = {
    "add": lambda u, v: u + v,
    "sub": lambda u, v: u - v,
    "neg": lambda u, v: -u,
    "div": lambda u, v: u / v,
    "exp": lambda u, v: u.exp(),
    "tanh": lambda u, v: torch.tanh(u),
    "sum": lambda u, v: u.sum(),
    "amax": lambda u, v: u.amax(),
    "maximum": lambda u, v: torch.maximum(u, v),
    "lt": lambda u, v: u < v,
    "mul_python_number": lambda u, v: u * 2.0,
    "mul_0d": lambda u, v: u * v[0],
    "bmm": lambda u, v: torch.bmm(u.reshape(1, 2, 4), v.reshape(1, 4, 2)),
    "dot": lambda u, v: u @ v,
    "relu": lambda u, v: torch.relu(u),
    "clamp": lambda u, v: u.clamp(-1, 1),
    "sort": lambda u, v: u.sort(),
    "gather": lambda u, v: u.gather(0, torch.zeros(2, dtype=torch.long, device=u.device)),
    "masked_fill": lambda u, v: u.masked_fill(u == u, 1.0),
    "flip": lambda u, v: u.flip(0),
    "full_overflow": lambda u, v: torch.full((3,), 1e6, dtype=u.dtype, device=u.device),
    "fill_overflow": lambda u, v: u.clone().fill_(-1e6),
    "fill_inf": lambda u, v: u.clone().fill_(float("inf")) if u.dtype != torch.float8_e5m2 else u.clone().fill_(1e6),
    "promote_f32": lambda u, v: u * v.float(),
    "promote_other_float8": lambda u, v: u * v.to(torch.float8_e5m2 if u.dtype != torch.float8_e5m2
                                                     else torch.float8_e4m3fn),
}


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=IDS[:2])
@pytest.mark.parametrize("op", list(REFUSED))
def test_ops_eager_refuses_raise_its_error_at_the_call(dev, dtype, op):
    _, _, _, u, v = _operands(dtype)
    with pytest.raises(Exception) as eager:
        REFUSED[op](u, v)
    with pytest.raises(type(eager.value)) as lazy:
        REFUSED[op](u.to(dev), v.to(dev))
    assert str(lazy.value) == str(eager.value)


# --- quantization ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=IDS[:2])
def test_scaled_quantization_recipe_matches_eager(dev, dtype):
    """Per-tensor scaling: scale = fmax / amax(|x|), q = (x * scale).to(float8),
    the product of the dequantized operands, and a second, deliberately
    overflowing cast (scale * 4) that e4m3fn saturates."""
    fmax = torch.finfo(dtype).max

    def recipe(x, w):
        sx = fmax / x.abs().amax()
        sw = fmax / w.abs().amax()
        qx, qw = (x * sx).to(dtype), (w * sw).to(dtype)
        over = (x * (sx * 4)).to(dtype)
        y = (qx.float() @ qw.float()) / (sx * sw)
        return qx, qw, over, qx.float() / sx, y

    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
    want = recipe(x, w)
    got = [t.cpu() for t in recipe(x.to(dev), w.to(dev))]
    for gt, wt in zip(got[:4], want[:4]):
        assert_same(gt, wt)
    # the float32 matrix product of float8 values: products are exact, the sums' order is XLA's
    torch.testing.assert_close(got[4], want[4], rtol=1e-6, atol=1e-6)


# --- the NumPy frontend --------------------------------------------------------------------


def _np_same(got, want, name, op):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.itemsize == 1 and want.dtype != np.bool_:
        if op in COMPUTING:  # a computed NaN's sign and payload are XLA's (module docstring)
            nan = np.isnan(want.astype(np.float32))
            np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
            np.testing.assert_array_equal(got.view(np.uint8)[~nan], want.view(np.uint8)[~nan])
        else:
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    else:
        np.testing.assert_array_equal(got, want)


NUMPY_OPS = {
    "astype": lambda x, y, w, dt: (x.astype(np.float32) * 3).astype(dt),
    "to_f32": lambda x, y, w, dt: x.astype(np.float32),
    "to_i32": lambda x, y, w, dt: y.astype(np.int32),
    "mul": lambda x, y, w, dt: x * y,
    "add": lambda x, y, w, dt: x + y,
    "neg": lambda x, y, w, dt: -x,
    "abs": lambda x, y, w, dt: np.abs(x),
    "matmul": lambda x, y, w, dt: y @ w,
    "less": lambda x, y, w, dt: x < y,
    "maximum": lambda x, y, w, dt: np.maximum(x, y),
    "concatenate": lambda x, y, w, dt: np.concatenate([x, y]),
    "where": lambda x, y, w, dt: np.where(x > y, x, y),
    "transpose": lambda x, y, w, dt: x.T,
}


COMPUTING = ("mul", "add", "neg", "abs", "matmul", "maximum", "astype")


# CI: the f8E4M3FNUZ variants take f8E5M2FNUZ's path (the FNUZ types share every branch)
@pytest.mark.parametrize("name", [pytest.param(n, marks=BY_HAND) if n == "f8E5M2FNUZ" else n for n in FLOAT8_DTYPES])
@pytest.mark.parametrize("op", list(NUMPY_OPS))
def test_numpy_frontend_matches_ml_dtypes(name, op):
    dt = to_numpy_dtype(name)
    rng = np.random.default_rng(0)
    x32 = (rng.standard_normal((4, 5)) * 100).astype(np.float32)
    x32[0, :4] = [np.nan, np.inf, 1e6, -0.0]
    x32[1, :1] = -np.nan
    x = x32.astype(dt)
    y = (rng.standard_normal((4, 5)) * 10).astype(dt)
    w = np.round(rng.standard_normal((5, 3)) * 4).astype(dt)  # small integers: the products' sums are exact
    with np.errstate(all="ignore"):
        want = np.asarray(NUMPY_OPS[op](x, y, w, dt))
        got = NUMPY_OPS[op](lnp.asarray(x), lnp.asarray(y), lnp.asarray(w), dt)
    _np_same(got, want, name, op)
