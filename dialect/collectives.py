"""Shardings and collectives: one program over a mesh of devices.

A mesh is a logical array of devices; ``mesh`` gives its axis sizes. A
sharding says how a value is laid out over it: ``sharding`` has one entry per
dimension of the value, the mesh axis that dimension is split along (into
equal blocks, one per position along the axis), or -1 where it is not split
(every device holds all of it). Mesh axes that split no dimension replicate
the value. XLA's SPMD partitioner turns a program of global values with such
annotations into one program per device.

``lazy.shard`` is the annotation: a sharding constraint. The collectives are
written on global values too, with the meaning a ``shard_map`` body gives
them (each device works on its block, the operand's ``sharding`` says which):

- ``all_reduce``: the blocks of the dimension split along ``axis`` combined
  by ``reduction``; that dimension shrinks to one block, no longer split.
- ``all_gather``: the same value, the dimension split along ``axis`` now
  whole on every device.
- ``reduce_scatter``: ``all_reduce``'s value, split along ``axis`` on ``dim``.
- ``all_to_all``: the same value, split along ``axis`` on ``split_dim``
  instead of ``concat_dim``.
- ``collective_permute``: blocks moved between positions along ``axis``
  (``pairs``: source, target, ...); a block that receives nothing is zero.

Each lowers to the StableHLO collective between XLA's manual-sharding
conversions, as jax lowers ``shard_map``.
"""

from __future__ import annotations

from .rules import require_dtype
from .spec import op
from .types import ShapeError, TensorType, is_float8

REDUCTIONS = ("sum", "prod", "max", "min")


def check_mesh(mesh) -> tuple[int, ...]:
    mesh = tuple(mesh)
    if not mesh or any(n < 1 for n in mesh):
        raise ShapeError(f"mesh must have at least one axis, each of size >= 1, got {list(mesh)}")
    return mesh


def check_sharding(x: TensorType, mesh, sharding, what: str = "sharding") -> tuple[int, ...]:
    """One entry per dimension of ``x``: a mesh axis or -1; an axis splits at
    most one dimension, into equal blocks."""
    sharding = tuple(sharding)
    if len(sharding) != x.rank:
        raise ShapeError(f"{what} must have {x.rank} entries (one per dimension), got {len(sharding)}")
    used = set()
    for d, a in enumerate(sharding):
        if not -1 <= a < len(mesh):
            raise ShapeError(f"{what} {list(sharding)}: dimension {d} names mesh axis {a}; the mesh has {len(mesh)} axes")
        if a < 0:
            continue
        if a in used:
            raise ShapeError(f"{what} {list(sharding)}: mesh axis {a} splits two dimensions")
        used.add(a)
        if x.shape[d] % mesh[a]:
            raise ShapeError(
                f"{what} {list(sharding)}: dimension {d} of size {x.shape[d]} is not divisible by "
                f"the size {mesh[a]} of mesh axis {a}"
            )
    return sharding


def _split_dim(x: TensorType, mesh, sharding, axis) -> int:
    """The dimension of ``x`` split along mesh axis ``axis``."""
    if not 0 <= axis < len(mesh):
        raise ShapeError(f"axis {axis} is not an axis of the mesh {list(mesh)}")
    if axis not in sharding:
        raise ShapeError(f"the operand is not split along mesh axis {axis} (sharding {list(sharding)})")
    return sharding.index(axis)


def _without(sharding, axis: int) -> tuple[int, ...]:
    return tuple(-1 if a == axis else a for a in sharding)


def _check_new_split(what: str, t: TensorType, sharding, dim, mesh, axis) -> None:
    """Dimension ``dim`` of ``t`` (laid out as ``sharding``) can be split along
    mesh axis ``axis``: it exists, no other axis splits it, the axis size divides it."""
    if not 0 <= dim < t.rank:
        raise ShapeError(f"{what} {dim} out of range for rank {t.rank}")
    if sharding[dim] != -1:
        raise ShapeError(f"{what} {dim} is already split along mesh axis {sharding[dim]}")
    if t.shape[dim] % mesh[axis]:
        raise ShapeError(
            f"{what} {dim} of size {t.shape[dim]} is not divisible by the size {mesh[axis]} of mesh axis {axis}"
        )


def _not_float8(x: TensorType) -> None:
    """XLA's CPU backend has no all-reduce of float8 values (UNIMPLEMENTED at
    compile): a float8 sum is combined in a wider type, converted first."""
    if is_float8(x.dtype):
        raise ShapeError(f"operand must have numeric element type other than float8, got {x.dtype} "
                         "(XLA has no float8 all-reduce: convert to a wider type first)")


def _reduction(reduction) -> None:
    if reduction not in REDUCTIONS:
        raise ShapeError(f"reduction must be one of {', '.join(REDUCTIONS)}, got '{reduction}'")


def _blocks_combined(x: TensorType, mesh, sharding, axis) -> TensorType:
    d = _split_dim(x, mesh, sharding, axis)
    shape = list(x.shape)
    shape[d] //= mesh[axis]
    return TensorType(tuple(shape), x.dtype)


# Padding refuses sharded values: a dimension split into blocks at bucket
# sizes puts other positions on each device than at the valid sizes.
@op("shard", ("operand",), attrs={"mesh": "i64[]", "sharding": "i64[]"}, padding="refused")
def _shard(x: TensorType, *, mesh, sharding):
    """The operand, laid out over the mesh as sharding says: dimension d split along mesh axis sharding[d] (-1: whole), each split dimension divisible by its axis size"""
    check_sharding(x, check_mesh(mesh), sharding)
    return x


@op("all_reduce", ("operand",), attrs={"mesh": "i64[]", "sharding": "i64[]", "axis": "i64", "reduction": "str"},
    padding="refused")
def _all_reduce(x: TensorType, *, mesh, sharding, axis, reduction):
    """The blocks of the dimension split along mesh axis axis, combined by reduction (sum, prod, max, min): that dimension is divided by the axis size and no longer split"""
    require_dtype("operand", x, "numeric")
    _not_float8(x)
    _reduction(reduction)
    sharding = check_sharding(x, check_mesh(mesh), sharding)
    return _blocks_combined(x, mesh, sharding, axis)


@op("all_gather", ("operand",), attrs={"mesh": "i64[]", "sharding": "i64[]", "axis": "i64"}, padding="refused")
def _all_gather(x: TensorType, *, mesh, sharding, axis):
    """The operand, unchanged; the dimension split along mesh axis axis is gathered whole on every device"""
    sharding = check_sharding(x, check_mesh(mesh), sharding)
    _split_dim(x, mesh, sharding, axis)
    return x


@op("reduce_scatter", ("operand",),
    attrs={"mesh": "i64[]", "sharding": "i64[]", "axis": "i64", "dim": "i64", "reduction": "str"}, padding="refused")
def _reduce_scatter(x: TensorType, *, mesh, sharding, axis, dim, reduction):
    """all_reduce's result, then split along mesh axis axis on dimension dim (not split along another axis; divisible by the axis size)"""
    require_dtype("operand", x, "numeric")
    _not_float8(x)
    _reduction(reduction)
    sharding = check_sharding(x, check_mesh(mesh), sharding)
    result = _blocks_combined(x, mesh, sharding, axis)
    # the combined block's dimension may be the one split again
    _check_new_split("dim", result, _without(sharding, axis), dim, mesh, axis)
    return result


@op("all_to_all", ("operand",),
    attrs={"mesh": "i64[]", "sharding": "i64[]", "axis": "i64", "split_dim": "i64", "concat_dim": "i64"},
    padding="refused")
def _all_to_all(x: TensorType, *, mesh, sharding, axis, split_dim, concat_dim):
    """The operand, unchanged; split along mesh axis axis on split_dim instead of concat_dim (which the operand's sharding splits along it; split_dim is whole and divisible by the axis size)"""
    sharding = check_sharding(x, check_mesh(mesh), sharding)
    if _split_dim(x, mesh, sharding, axis) != concat_dim:
        raise ShapeError(f"concat_dim {concat_dim} is not the dimension split along mesh axis {axis}")
    if split_dim == concat_dim:
        raise ShapeError(f"split_dim {split_dim} must be another dimension than concat_dim")
    _check_new_split("split_dim", x, sharding, split_dim, mesh, axis)
    return x


def check_pairs(pairs, size: int) -> tuple[tuple[int, int], ...]:
    """``(source, target, ...)`` positions along an axis of ``size``; no source or target twice."""
    pairs = tuple(pairs)
    if len(pairs) % 2:
        raise ShapeError(f"pairs must hold (source, target) pairs, got {len(pairs)} numbers")
    out = tuple(zip(pairs[0::2], pairs[1::2]))
    for s, t in out:
        if not (0 <= s < size and 0 <= t < size):
            raise ShapeError(f"pair ({s}, {t}) is out of range for a mesh axis of size {size}")
    if len({s for s, _ in out}) != len(out) or len({t for _, t in out}) != len(out):
        raise ShapeError(f"pairs {[list(p) for p in out]} name a source or a target twice")
    return out


@op("collective_permute", ("operand",), attrs={"mesh": "i64[]", "sharding": "i64[]", "axis": "i64", "pairs": "i64[]"},
    padding="refused")
def _collective_permute(x: TensorType, *, mesh, sharding, axis, pairs):
    """The operand with the blocks of the dimension split along mesh axis axis moved: for each (source, target) of pairs the block at target is the operand's block at source; a block no pair targets is zero"""
    sharding = check_sharding(x, check_mesh(mesh), sharding)
    _split_dim(x, mesh, sharding, axis)
    check_pairs(pairs, mesh[axis])
    return x


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute")


def result_sharding(name: str, attrs) -> tuple[int, ...]:
    """How the result of ``lazy.<name>`` (``shard`` or a collective) with
    attributes ``attrs`` (a mapping) is laid out: a mesh axis or -1 per dimension."""
    sharding = tuple(attrs["sharding"])
    if name in ("shard", "collective_permute"):
        return sharding
    axis = attrs["axis"]
    out = list(_without(sharding, axis))
    if name == "reduce_scatter":
        out[attrs["dim"]] = axis
    elif name == "all_to_all":
        out[attrs["concat_dim"]], out[attrs["split_dim"]] = -1, axis
    elif name not in ("all_reduce", "all_gather"):
        raise KeyError(f"lazy.{name} is neither a sharding nor a collective")
    return tuple(out)


__all__ = ["COLLECTIVES", "REDUCTIONS", "check_mesh", "check_pairs", "check_sharding", "result_sharding"]
