"""Shape ops through the real stack (lazy -> StableHLO -> PJRT) against NumPy.

Shape ops move elements without computing on them, so results must match
NumPy exactly, element type included.
"""

import numpy as np
import pytest

from lazycore import dialect

from lazycore.runtime import compiler
from lazycore.dialect import ShapeError, TensorType, create, tensor_type
from lazycore.dialect.types import to_numpy_dtype, type_of
from lazycore.dialect.mlir import func, ir
from lazycore.dialect.build import new_context


def random_array(rng, shape, dtype):
    if dtype == "i1":
        return rng.random(shape) < 0.5
    if dtype.startswith(("i", "ui")):
        return rng.integers(-100 if dtype.startswith("i") else 0, 100, shape).astype(to_numpy_dtype(dtype))
    return rng.standard_normal(shape).astype(to_numpy_dtype(dtype))


def run_op(name, *operands, **kwargs):
    """Run one ``lazy.<name>`` on NumPy operands (a list for the variadic group)."""
    flat = [a for o in operands for a in (o if isinstance(o, list) else [o])]
    flat = [np.asarray(a) for a in flat]
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):

            @func.FuncOp.from_py_func(*(tensor_type(type_of(a)) for a in flat), name="main")
            def main(*args):
                args, grouped = list(args), []
                for o in operands:
                    n = len(o) if isinstance(o, list) else 1
                    grouped.append(args[:n] if isinstance(o, list) else args[0])
                    args = args[n:]
                return create(name, *grouped, **kwargs).result

        text = str(module)
    (out,) = compiler.run_module(text, flat)
    return out


def check(out, expected):
    assert out.dtype == expected.dtype
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


# --- broadcast_in_dim ------------------------------------------------------------


def broadcast_in_dim_ref(x, dims, shape):
    # Put the operand dims in result order, then give every result dim without
    # an operand dim size 1 so NumPy broadcasting does the rest.
    order = np.argsort(dims)
    expanded = [1] * len(shape)
    for i in order:
        expanded[dims[i]] = x.shape[i]
    return np.broadcast_to(np.transpose(x, order).reshape(expanded), shape)


@pytest.mark.parametrize(
    "in_shape, dims, shape, dtype",
    [
        ((3,), (1,), (2, 3), "f32"),
        ((2, 1), (0, 2), (2, 4, 5), "i32"),
        ((), (), (3, 2), "i64"),
        ((3, 2), (1, 0), (2, 3), "f32"),  # a transposing broadcast
        ((1, 4), (0, 1), (3, 4), "i1"),
    ],
)
def test_broadcast_in_dim(rng, in_shape, dims, shape, dtype):
    x = random_array(rng, in_shape, dtype)
    check(run_op("broadcast_in_dim", x, dims=dims, shape=shape), broadcast_in_dim_ref(x, dims, shape))


# --- reshape -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "in_shape, shape, dtype",
    [((2, 3), (6,), "f32"), ((2, 3, 4), (4, 3, 2), "i32"), ((1,), (), "i64"), ((4, 2), (2, 2, 2), "i1"),
     ((0, 3), (3, 0), "f32")],
)
def test_reshape(rng, in_shape, shape, dtype):
    x = random_array(rng, in_shape, dtype)
    check(run_op("reshape", x, shape=shape), x.reshape(shape))


# --- permute -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "in_shape, dims, dtype",
    [((2, 3), (1, 0), "f32"), ((2, 3, 4), (2, 0, 1), "i64"), ((2, 3, 4), (0, 1, 2), "i32"), ((3, 1, 2), (1, 2, 0), "i1")],
)
def test_permute(rng, in_shape, dims, dtype):
    x = random_array(rng, in_shape, dtype)
    check(run_op("permute", x, dims=dims), np.transpose(x, dims))


# --- slice -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "in_shape, start, limit, strides, dtype",
    [
        ((7,), (1,), (6,), (2,), "f32"),
        ((4, 5), (0, 1), (4, 5), (1, 1), "i32"),
        ((5, 6), (1, 0), (5, 6), (3, 4), "i64"),
        ((4, 4), (2, 2), (2, 4), (1, 1), "f32"),  # an empty dim
        ((3, 8), (0, 1), (2, 8), (1, 3), "i1"),
    ],
)
def test_slice(rng, in_shape, start, limit, strides, dtype):
    x = random_array(rng, in_shape, dtype)
    expected = x[tuple(slice(b, e, s) for b, e, s in zip(start, limit, strides))]
    check(run_op("slice", x, start=start, limit=limit, strides=strides), expected)


# --- dynamic_slice / dynamic_update_slice -------------------------------------------


def clamped(starts, window, shape):
    """StableHLO clamps each start so the window stays inside the operand."""
    return [min(max(int(s), 0), n - w) for s, w, n in zip(starts, window, shape)]


@pytest.mark.parametrize(
    "in_shape, starts, sizes, dtype, index_dtype",
    [
        ((5, 6), (1, 2), (3, 3), "f32", np.int32),
        ((5, 6), (4, -3), (3, 2), "i32", np.int64),  # both starts clamped
        ((8,), (7,), (8,), "i64", np.int32),
        ((3, 4, 2), (1, 1, 0), (2, 2, 2), "i1", np.int64),
    ],
)
def test_dynamic_slice(rng, in_shape, starts, sizes, dtype, index_dtype):
    x = random_array(rng, in_shape, dtype)
    idx = [index_dtype(s) for s in starts]
    at = clamped(starts, sizes, in_shape)
    expected = x[tuple(slice(s, s + n) for s, n in zip(at, sizes))]
    check(run_op("dynamic_slice", x, idx, sizes=sizes), expected)


@pytest.mark.parametrize(
    "in_shape, up_shape, starts, dtype, index_dtype",
    [
        ((5, 6), (2, 3), (1, 2), "f32", np.int32),
        ((5, 6), (3, 6), (9, 1), "i32", np.int64),  # both starts clamped
        ((8,), (0,), (3,), "i64", np.int32),
        ((3, 4), (1, 4), (2, 0), "i1", np.int64),
    ],
)
def test_dynamic_update_slice(rng, in_shape, up_shape, starts, dtype, index_dtype):
    x = random_array(rng, in_shape, dtype)
    update = random_array(rng, up_shape, dtype)
    idx = [index_dtype(s) for s in starts]
    expected = x.copy()
    at = clamped(starts, up_shape, in_shape)
    expected[tuple(slice(s, s + n) for s, n in zip(at, up_shape))] = update
    check(run_op("dynamic_update_slice", x, update, idx), expected)


# --- concatenate --------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes, dim, dtype",
    [
        ([(2, 3), (2, 3)], 1, "f32"),
        ([(3,), (3,), (3,)], 0, "i1"),
        ([(2, 3), (4, 3)], 0, "f32"),
        ([(2, 1), (2, 3), (2, 2)], 1, "i32"),
        ([(5,), (0,)], 0, "i64"),
        ([(2, 0, 3), (2, 4, 3)], 1, "i1"),
    ],
)
def test_concatenate(rng, shapes, dim, dtype):
    # lazy.concatenate is binary: more inputs chain, as frontends do.
    xs = [random_array(rng, s, dtype) for s in shapes]
    out = run_op("concatenate", xs[0], xs[1], dim=dim)
    for x in xs[2:]:
        out = run_op("concatenate", out, x, dim=dim)
    check(out, np.concatenate(xs, axis=dim))


# --- pad --------------------------------------------------------------------------------


def pad_ref(x, value, low, high, interior):
    for axis, (lo, hi, mid) in enumerate(zip(low, high, interior)):
        n = x.shape[axis]
        spread = np.full(x.shape[:axis] + (n + max(n - 1, 0) * mid,) + x.shape[axis + 1:], value, x.dtype)
        spread[(slice(None),) * axis + (slice(None, None, mid + 1),)] = x
        spread = np.pad(spread, [(0, 0)] * axis + [(max(lo, 0), max(hi, 0))] + [(0, 0)] * (x.ndim - axis - 1),
                        constant_values=value)
        end = spread.shape[axis] + min(hi, 0)
        x = spread[(slice(None),) * axis + (slice(-min(lo, 0), end),)]
    return x


@pytest.mark.parametrize(
    "in_shape, low, high, interior, dtype",
    [
        ((3,), (2,), (1,), (0,), "f32"),
        ((2, 3), (1, 0), (0, 2), (1, 2), "i32"),
        ((4, 5), (-1, 2), (1, -3), (0, 1), "i64"),  # negative edges crop
        ((2, 2), (0, 1), (1, 0), (2, 0), "i1"),
    ],
)
def test_pad(rng, in_shape, low, high, interior, dtype):
    x = random_array(rng, in_shape, dtype)
    value = random_array(rng, (), dtype)
    check(run_op("pad", x, value, low=low, high=high, interior=interior),
          pad_ref(x, value, low, high, interior))


# --- reverse ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "in_shape, dims, dtype",
    [((5,), (0,), "f32"), ((3, 4), (1,), "i32"), ((2, 3, 4), (0, 2), "i64"), ((3, 2), (0, 1), "i1")],
)
def test_reverse(rng, in_shape, dims, dtype):
    x = random_array(rng, in_shape, dtype)
    check(run_op("reverse", x, dims=dims), np.flip(x, axis=dims))


# --- rules on the runtime path -----------------------------------------------------------

F23 = TensorType((2, 3), "f32")
I32 = TensorType((), "i32")


@pytest.mark.parametrize(
    "name, operands, kwargs, message",
    [
        ("reshape", (F23,), dict(shape=(4,)), "reshape must keep the element count"),
        ("broadcast_in_dim", (F23,), dict(dims=(0, 1), shape=(2, 4)), "must be 1 or equal"),
        ("broadcast_in_dim", (F23,), dict(dims=(0,), shape=(2, 3)), "dims must have 2 entries"),
        ("broadcast_in_dim", (F23,), dict(dims=(1, 1), shape=(3, 3)), "repeated dimensions"),
        ("permute", (F23,), dict(dims=(0, 0)), "is not a permutation"),
        ("slice", (F23,), dict(start=(0, 2), limit=(2, 1), strides=(1, 1)), "0 <= start <= limit <= 3"),
        ("slice", (F23,), dict(start=(0, 0), limit=(2, 3), strides=(1, 0)), "strides must be positive"),
        ("dynamic_slice", (F23, [I32]), dict(sizes=(1, 1)), "start_indices must have 2 entries"),
        ("dynamic_slice", (F23, [I32, TensorType((), "f32")]), dict(sizes=(1, 1)), "integer|int element type"),
        ("dynamic_slice", (F23, [I32, TensorType((), "i64")]), dict(sizes=(1, 1)), "share one element type"),
        ("dynamic_slice", (F23, [I32, I32]), dict(sizes=(1, 4)), r"sizes\[1\] = 4 must lie in \[0, 3\]"),
        ("dynamic_slice", (F23, [TensorType((1,), "i32"), I32]), dict(sizes=(1, 1)), "must have rank 0"),
        ("dynamic_update_slice", (F23, TensorType((3, 1), "f32"), [I32, I32]), {}, "larger than the operand"),
        ("dynamic_update_slice", (F23, TensorType((1, 1), "i32"), [I32, I32]), {}, "operand's element type"),
        ("concatenate", (F23, TensorType((2, 2), "f32")), dict(dim=0), "agree on every dim but 0"),
        ("concatenate", (F23, TensorType((2, 3), "i32")), dict(dim=0), "share element type"),
        ("concatenate", (F23, F23), dict(dim=2), "out of range"),
        ("pad", (F23, TensorType((), "i32")), dict(low=(0, 0), high=(0, 0), interior=(0, 0)), "operand's element"),
        ("pad", (F23, TensorType((1,), "f32")), dict(low=(0, 0), high=(0, 0), interior=(0, 0)), "rank 0"),
        ("pad", (F23, TensorType((), "f32")), dict(low=(0, -4), high=(0, 0), interior=(0, 0)), "negative size"),
        ("pad", (F23, TensorType((), "f32")), dict(low=(0, 0), high=(0, 0), interior=(-1, 0)), "non-negative"),
        ("reverse", (F23,), dict(dims=(2,)), "out of range for rank 2"),
    ],
)
def test_rule_rejects(name, operands, kwargs, message):
    with pytest.raises(ShapeError, match=message):
        dialect.infer(name, *operands, **kwargs)


def test_rules_give_result_types():
    assert dialect.infer("pad", F23, TensorType((), "f32"), low=(1, -1), high=(0, 2), interior=(1, 0)) == (
        TensorType((4, 4), "f32"),
    )
    assert dialect.infer("slice", F23, start=(0, 0), limit=(2, 3), strides=(2, 2)) == (TensorType((1, 2), "f32"),)
    assert dialect.infer("broadcast_in_dim", F23, dims=(2, 0), shape=(3, 5, 2)) == (TensorType((3, 5, 2), "f32"),)
