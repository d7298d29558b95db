"""Reductions and arg-reductions through the real stack, against NumPy."""

import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect import ShapeError, TensorType, infer
from lazycore.dialect.types import to_numpy_dtype, type_of


def one_op(name: str, x: np.ndarray, attrs: str, result: TensorType) -> str:
    t = type_of(x)
    return f"""
func.func @main(%x: {t}) -> {result} {{
  %0 = "lazy.{name}"(%x) {{{attrs}}} : ({t}) -> {result}
  return %0 : {result}
}}
"""


def i64_array(values) -> str:
    return f"array<i64: {', '.join(map(str, values))}>" if values else "array<i64>"


def run_reduce(name: str, x: np.ndarray, dims) -> np.ndarray:
    (result,) = infer(name, type_of(x), dims=tuple(dims))
    text = one_op(name, x, f"dims = {i64_array(dims)}", result)
    (out,) = compiler.run_module(text, [x])
    return out


def run_arg(name: str, x: np.ndarray, dim: int, dtype: str = "i64") -> np.ndarray:
    (result,) = infer(name, type_of(x), dim=dim, dtype=dtype)
    (out,) = compiler.run_module(one_op(name, x, f"dim = {dim}", result), [x])
    return out


def sample(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


NUMPY = {
    "reduce_sum": np.sum,
    "reduce_prod": np.prod,
    "reduce_max": np.max,
    "reduce_min": np.min,
}

CASES = [((5,), (0,)), ((3, 4), (1,)), ((3, 4), (0, 1)), ((2, 3, 4), (2, 0)), ((2, 3, 4), ())]


@pytest.mark.parametrize("name", NUMPY)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape,dims", CASES)
def test_reduce_matches_numpy(rng, name, dtype, shape, dims):
    x = sample(rng, shape, dtype)
    if name == "reduce_prod" and dtype == np.float32:
        x = x + np.float32(1.0)  # keep products well away from under/overflow
    out = run_reduce(name, x, dims)
    # NumPy widens small-int sums and products; lazy reductions keep the dtype.
    keep = {"dtype": x.dtype} if name in ("reduce_sum", "reduce_prod") else {}
    want = NUMPY[name](x, axis=tuple(dims), **keep)
    assert out.dtype == x.dtype
    np.testing.assert_allclose(out, want, rtol=1e-5)


@pytest.mark.parametrize("name,numpy_fn", [("reduce_max", np.any), ("reduce_min", np.all)])
def test_bool_max_min_are_any_all(rng, name, numpy_fn):
    x = rng.random((4, 6)) < 0.3
    x[0] = False  # an all-False row and an all-True row pin down the init values
    x[1] = True
    out = run_reduce(name, x, [1])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, numpy_fn(x, axis=1))


@pytest.mark.parametrize("name,fn", [("reduce_max", np.max), ("reduce_min", np.min)])
def test_extreme_integers_and_nan(name, fn):
    ints = np.array([[np.iinfo(np.int32).min] * 3, [np.iinfo(np.int32).max] * 3], dtype=np.int32)
    np.testing.assert_array_equal(run_reduce(name, ints, [1]), fn(ints, axis=1))
    floats = np.array([[1.0, np.nan, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0]], np.float32)
    np.testing.assert_array_equal(run_reduce(name, floats, [1]), fn(floats, axis=1))


def test_unsigned_min_uses_dtype_max():
    x = np.array([[3, 250, 7], [255, 255, 255]], dtype=np.uint8)
    out = run_reduce("reduce_min", x, [1])
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [3, 255])


# --- argmax / argmin -------------------------------------------------------------

ARG = {"argmax": np.argmax, "argmin": np.argmin}


@pytest.mark.parametrize("name", ARG)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), 1)])
def test_arg_matches_numpy(rng, name, dtype, shape, dim):
    x = sample(rng, shape, dtype)
    out = run_arg(name, x, dim)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, ARG[name](x, axis=dim))


@pytest.mark.parametrize("name", ARG)
def test_arg_ties_pick_the_first(rng, name):
    # Few distinct values in long rows: every row has many ties for the extreme.
    x = rng.integers(0, 3, (6, 40)).astype(np.float32)
    x[0] = 1.0
    np.testing.assert_array_equal(run_arg(name, x, 1), ARG[name](x, axis=1))
    np.testing.assert_array_equal(run_arg(name, x.T.copy(), 0), ARG[name](x.T, axis=0))


@pytest.mark.parametrize("name", ARG)
def test_arg_first_nan_wins(name):
    x = np.array(
        [
            [1.0, np.nan, 5.0, np.nan],
            [np.nan, 2.0, np.nan, -1.0],
            [np.inf, -np.inf, 3.0, np.nan],
            [-np.inf, -np.inf, -np.inf, -np.inf],
            [np.inf, np.inf, 0.0, -0.0],
        ],
        np.float32,
    )
    np.testing.assert_array_equal(run_arg(name, x, 1), ARG[name](x, axis=1))


@pytest.mark.parametrize("dtype", ["i32", "ui8"])
def test_arg_index_dtype(rng, dtype):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    out = run_arg("argmin", x, 1, dtype)
    assert out.dtype == to_numpy_dtype(dtype)
    np.testing.assert_array_equal(out, np.argmin(x, axis=1))


# --- rule errors -------------------------------------------------------------------


def test_reduce_rule_errors():
    t = TensorType((2, 3), "f32")
    with pytest.raises(ShapeError, match=r"dims \[2\] out of range for rank 2"):
        infer("reduce_sum", t, dims=(2,))
    with pytest.raises(ShapeError, match="repeated"):
        infer("reduce_max", t, dims=(1, 1))
    with pytest.raises(ShapeError, match="operand must have numeric or complex element type, got i1"):
        infer("reduce_sum", TensorType((2,), "i1"), dims=(0,))


def test_arg_rule_errors():
    t = TensorType((2, 3), "f32")
    with pytest.raises(ShapeError, match="result must have int element type, got f32"):
        infer("argmax", t, dim=1, dtype="f32")
    with pytest.raises(ShapeError, match=r"dim \[-1\] out of range"):
        infer("argmin", t, dim=-1, dtype="i64")
    with pytest.raises(ShapeError, match="dim 0 is empty"):
        infer("argmax", TensorType((0, 3), "f32"), dim=0, dtype="i64")


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f64"])
def test_other_float_widths(rng, dtype):
    # The -inf init constant must be built in each width (bf16 has no NumPy buffer type).
    x = (rng.standard_normal((3, 5)) - 10).astype(to_numpy_dtype(dtype))
    out = run_reduce("reduce_max", x, [1])
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.max(x, axis=1))
    np.testing.assert_array_equal(run_arg("argmax", x, 0), np.argmax(x, axis=0))
