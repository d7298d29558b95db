"""lazy.gather and lazy.scatter, run through the real stack against NumPy.

Each case is an index pattern a frontend lowers onto gather/scatter (take,
torch.gather, embeddings, advanced indexing, index_put, np.add.at ...), with
the dimension numbers a frontend would pick for it.
"""

import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect import ShapeError, TensorType, infer, spec_of
from lazycore.dialect.types import type_of

# The attribute kinds, from the op table itself (the tests write IR text).
GATHER_ATTRS = spec_of("gather").attrs
SCATTER_ATTRS = spec_of("scatter").attrs


def _attr_text(kind, v):
    if kind == "i64[]":
        return f"array<i64: {', '.join(map(str, v))}>" if len(v) else "array<i64>"
    if kind == "i64":
        return f"{v} : i64"
    if kind == "bool":
        return "true" if v else "false"
    return f'"{v}"'


def run_op(name, kinds, inputs, **attrs):
    """Build a one-op module around ``lazy.<name>`` and run it on ``inputs``."""
    types = [type_of(a) for a in inputs]
    (result,) = infer(name, *types, **attrs)
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    text = f"""
func.func @main({args}) -> {result} {{
  %0 = "lazy.{name}"({", ".join(f"%a{i}" for i in range(len(types)))})
      {{{", ".join(f"{k} = {_attr_text(kinds[k], v)}" for k, v in attrs.items())}}}
      : ({", ".join(map(str, types))}) -> {result}
  return %0 : {result}
}}"""
    (out,) = compiler.run_module(text, inputs)
    return out


def gather(operand, indices, *, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
           slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(), indices_are_sorted=False):
    return run_op("gather", GATHER_ATTRS, [operand, indices], offset_dims=offset_dims,
                  collapsed_slice_dims=collapsed_slice_dims, operand_batching_dims=operand_batching_dims,
                  start_indices_batching_dims=start_indices_batching_dims, start_index_map=start_index_map,
                  index_vector_dim=index_vector_dim, slice_sizes=slice_sizes,
                  indices_are_sorted=indices_are_sorted)


def scatter(operand, indices, updates, *, mode, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(),
            scatter_indices_batching_dims=()):
    return run_op("scatter", SCATTER_ATTRS, [operand, indices, updates], update_window_dims=update_window_dims,
                  inserted_window_dims=inserted_window_dims, input_batching_dims=input_batching_dims,
                  scatter_indices_batching_dims=scatter_indices_batching_dims,
                  scatter_dims_to_operand_dims=scatter_dims_to_operand_dims,
                  index_vector_dim=index_vector_dim, mode=mode)


def same(out, expected, exact=True):
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


# --- gather --------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype,idx_dtype", [(np.float32, np.int64), (np.int32, np.int32)])
def test_take_along_one_axis(rng, axis, dtype, idx_dtype):
    """np.take(x, idx, axis) / torch.index_select: one coordinate, implicit index vector dim."""
    x = (rng.standard_normal((4, 5, 6)) * 10).astype(dtype)
    idx = rng.integers(0, x.shape[axis], size=7).astype(idx_dtype)
    sizes = list(x.shape)
    sizes[axis] = 1
    out = gather(x, idx, offset_dims=[d for d in range(3) if d != axis], collapsed_slice_dims=[axis],
                 start_index_map=[axis], index_vector_dim=1, slice_sizes=sizes)
    same(out, np.take(x, idx, axis=axis))


def test_embedding_lookup(rng):
    """table[ids] for a (batch, seq) id tensor: the embedding dim is the trailing offset dim."""
    table = rng.standard_normal((50, 8)).astype(np.float32)
    ids = rng.integers(0, 50, size=(3, 4)).astype(np.int64)
    out = gather(table, ids, offset_dims=[2], collapsed_slice_dims=[0], start_index_map=[0],
                 index_vector_dim=2, slice_sizes=[1, 8])
    same(out, table[ids])


def test_advanced_indexing_with_two_index_arrays(rng):
    """x[i0, i1] with x of rank 3: the index pairs form an explicit index vector dim."""
    x = rng.standard_normal((4, 5, 6)).astype(np.float64)
    i0 = rng.integers(0, 4, size=(2, 3))
    i1 = rng.integers(0, 5, size=(2, 3))
    out = gather(x, np.stack([i0, i1], axis=-1), offset_dims=[2], collapsed_slice_dims=[0, 1],
                 start_index_map=[0, 1], index_vector_dim=2, slice_sizes=[1, 1, 6])
    same(out, x[i0, i1])


def test_advanced_indexing_index_map_out_of_order(rng):
    """x[:, i1, i0]-style: coordinates feed operand dims in the order start_index_map says."""
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    ia = rng.integers(0, 5, size=6)
    ib = rng.integers(0, 4, size=6)
    out = gather(x, np.stack([ia, ib], axis=0), offset_dims=[0], collapsed_slice_dims=[1, 2],
                 start_index_map=[2, 1], index_vector_dim=0, slice_sizes=[3, 1, 1])
    same(out, x[:, ib, ia])


def test_per_element_gather_with_batching_dims(rng):
    """torch.gather(x, 1, idx) = np.take_along_axis: the row dim is a batching dim."""
    x = rng.standard_normal((4, 7)).astype(np.float32)
    idx = rng.integers(0, 7, size=(4, 5)).astype(np.int32)
    out = gather(x, idx, offset_dims=[], collapsed_slice_dims=[1], operand_batching_dims=[0],
                 start_indices_batching_dims=[0], start_index_map=[1], index_vector_dim=2, slice_sizes=[1, 1])
    same(out, np.take_along_axis(x, idx, axis=1))


def test_windows_are_clamped_into_bounds(rng):
    """Slices longer than one element; a start too close to the end is clamped, as in dynamic_slice."""
    x = rng.standard_normal(10).astype(np.float32)
    starts = np.array([[0], [3], [8], [-2]], dtype=np.int64)
    out = gather(x, starts, offset_dims=[1], collapsed_slice_dims=[], start_index_map=[0],
                 index_vector_dim=1, slice_sizes=[4])
    expected = np.stack([x[s:s + 4] for s in np.clip(starts[:, 0], 0, 10 - 4)])
    same(out, expected)


# --- scatter -------------------------------------------------------------------

ROWS = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)


def test_scatter_add_with_duplicates_is_np_add_at(rng):
    x = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([1, 4, 1, 1, 0, 4, 5], dtype=np.int64)
    upd = rng.standard_normal((7, 3)).astype(np.float32)
    out = scatter(x, idx[:, None], upd, mode="add", **ROWS)
    expected = x.copy()
    np.add.at(expected, idx, upd)
    same(out, expected, exact=False)


def test_scatter_replace_unique_rows(rng):
    """x[idx] = updates (index_put without accumulate)."""
    x = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([5, 0, 2], dtype=np.int32)
    upd = rng.standard_normal((3, 3)).astype(np.float32)
    out = scatter(x, idx[:, None], upd, mode="replace", **ROWS)
    expected = x.copy()
    expected[idx] = upd
    same(out, expected)


@pytest.mark.parametrize("mode,ufunc", [("max", np.maximum), ("min", np.minimum), ("mul", np.multiply)])
def test_scatter_combiners_with_duplicates(rng, mode, ufunc):
    """Integer data, so the combine order of duplicates cannot change the result."""
    x = rng.integers(-5, 6, size=(5, 4)).astype(np.int32)
    idx = rng.integers(0, 5, size=9).astype(np.int64)
    upd = rng.integers(-5, 6, size=(9, 4)).astype(np.int32)
    out = scatter(x, idx[:, None], upd, mode=mode, **ROWS)
    expected = x.copy()
    ufunc.at(expected, idx, upd)
    same(out, expected)


def test_scatter_add_at_coordinate_pairs(rng):
    """x[i0, i1] += v with duplicates: full coordinates, scalar windows."""
    x = rng.standard_normal((4, 5)).astype(np.float64)
    i0 = rng.integers(0, 4, size=12)
    i1 = rng.integers(0, 5, size=12)
    v = rng.standard_normal(12)
    out = scatter(x, np.stack([i0, i1], axis=1), v, mode="add", update_window_dims=[], inserted_window_dims=[0, 1],
                  scatter_dims_to_operand_dims=[0, 1], index_vector_dim=1)
    expected = x.copy()
    np.add.at(expected, (i0, i1), v)
    same(out, expected, exact=False)


def test_scatter_add_along_dim_with_batching_dims(rng):
    """torch.scatter_add(x, 1, idx, src): rows are batching dims, columns are scattered."""
    x = rng.standard_normal((3, 6)).astype(np.float32)
    idx = rng.integers(0, 6, size=(3, 4)).astype(np.int64)
    src = rng.standard_normal((3, 4)).astype(np.float32)
    out = scatter(x, idx, src, mode="add", update_window_dims=[], inserted_window_dims=[1], input_batching_dims=[0],
                  scatter_indices_batching_dims=[0], scatter_dims_to_operand_dims=[1], index_vector_dim=2)
    expected = x.copy()
    for r in range(3):
        np.add.at(expected[r], idx[r], src[r])
    same(out, expected, exact=False)


def test_scatter_partial_windows(rng):
    """Update windows smaller than the operand's: x[i, :2] += u."""
    x = rng.integers(0, 10, size=(4, 5)).astype(np.int32)
    idx = np.array([[3], [0], [3]], dtype=np.int32)
    upd = rng.integers(0, 10, size=(3, 2)).astype(np.int32)
    out = scatter(x, idx, upd, mode="add", **ROWS)
    expected = x.copy()
    np.add.at(expected, (idx[:, 0][:, None], np.arange(2)[None, :]), upd)
    same(out, expected)


# --- rules ---------------------------------------------------------------------

F = TensorType((5, 3), "f32")
IDX = TensorType((4, 1), "i64")
GOOD_GATHER = dict(offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(),
                   start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
                   slice_sizes=(1, 3), indices_are_sorted=False)
GOOD_SCATTER = dict(update_window_dims=(1,), inserted_window_dims=(0,), input_batching_dims=(),
                    scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
                    mode="add")


@pytest.mark.parametrize("change,message", [
    (dict(slice_sizes=(2, 3)), r"slice_sizes\[0\] = 2 must be <= 1"),
    (dict(slice_sizes=(1, 4)), r"slice_sizes\[1\] = 4 must be in \[0, 3\]"),
    (dict(start_index_map=(0, 1)), r"start_index_map must have the index vector size = 1 entries"),
    (dict(offset_dims=(1, 0)), r"operand rank 2 must equal size\(offset_dims\)"),
    (dict(index_vector_dim=3), r"index_vector_dim 3 out of range \[0, 2\]"),
    (dict(collapsed_slice_dims=(0,), operand_batching_dims=(0,), start_indices_batching_dims=(0,)),
     r"repeated dimensions"),
])
def test_gather_rule_names_the_broken_constraint(change, message):
    with pytest.raises(ShapeError, match=message):
        infer("gather", F, IDX, **{**GOOD_GATHER, **change})


def test_gather_rule_rejects_float_indices():
    with pytest.raises(ShapeError, match="start_indices must have int element type"):
        infer("gather", F, TensorType((4, 1), "f32"), **GOOD_GATHER)


@pytest.mark.parametrize("updates,change,message", [
    (TensorType((4, 3), "f32"), dict(mode="xor"), "mode must be one of replace, add, mul, max, min"),
    (TensorType((4, 3), "f64"), {}, "updates element type f64 must match operand element type f32"),
    (TensorType((3, 3), "f32"), {}, "updates dim 0 is 3, but scatter_indices give 4"),
    (TensorType((4, 4), "f32"), {}, "updates window dim 1 is 4, larger than the operand's 3"),
    (TensorType((4, 3, 1), "f32"), {}, "updates rank 3 must equal"),
])
def test_scatter_rule_names_the_broken_constraint(updates, change, message):
    with pytest.raises(ShapeError, match=message):
        infer("scatter", F, IDX, updates, **{**GOOD_SCATTER, **change})


def test_scatter_add_refuses_bool():
    b = TensorType((5, 3), "i1")
    with pytest.raises(ShapeError, match="mode 'add' needs a numeric operand"):
        infer("scatter", b, IDX, TensorType((4, 3), "i1"), **GOOD_SCATTER)
    assert infer("scatter", b, IDX, TensorType((4, 3), "i1"), **{**GOOD_SCATTER, "mode": "max"}) == (b,)
