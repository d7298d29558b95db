"""Lowerings of shardings and collectives (see lazycore.dialect.collectives).

They produce what jax produces for ``with_sharding_constraint`` and
``shard_map`` with the GSPMD partitioner: ``stablehlo.custom_call @Sharding``
with an ``mhlo.sharding`` attribute in XLA's text form, and each collective
on the device's block between ``@SPMDFullToShardShape`` and
``@SPMDShardToFullShape``. Device ids in shardings and replica groups are
positions in the program's device assignment, which the runtime makes the
mesh's devices in row-major order.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import TensorType, attr
from lazycore.dialect.collectives import check_pairs, result_sharding
from lazycore.dialect.mlir import ir

from . import hlo
from .registry import lowering
from .reduction import REDUCERS

MANUAL = "{manual}"


def hlo_sharding(mesh, sharding) -> str:
    """XLA's text for a value of rank ``len(sharding)`` laid out over ``mesh``:
    a tile per device, tiles ordered by the split axes, the other axes
    replicating each tile (``last_tile_dim_replicate``)."""
    mesh, sharding = tuple(mesh), tuple(sharding)
    split = [a for a in sharding if a >= 0]
    if not any(mesh[a] > 1 for a in split):
        return "{replicated}"
    rest = [a for a in range(len(mesh)) if a not in split]
    tiles = [mesh[a] if a >= 0 else 1 for a in sharding]
    replicas = int(np.prod([mesh[a] for a in rest], dtype=np.int64))
    ids = np.arange(int(np.prod(mesh, dtype=np.int64))).reshape(mesh).transpose(split + rest).reshape(-1)
    dims = tiles + ([replicas] if replicas > 1 else [])
    text = f"devices=[{','.join(map(str, dims))}]{','.join(map(str, ids))}"
    return "{" + text + (" last_tile_dim_replicate" if replicas > 1 else "") + "}"


def local_type(t: TensorType, mesh, sharding) -> TensorType:
    """The block of ``t`` one device holds."""
    shape = tuple(n // mesh[a] if a >= 0 else n for n, a in zip(t.shape, sharding))
    return TensorType(shape, t.dtype)


def groups(mesh, axis: int) -> np.ndarray:
    """The devices along mesh axis ``axis``, one row per position on the other axes."""
    ids = np.arange(int(np.prod(mesh, dtype=np.int64)), dtype=np.int64).reshape(tuple(mesh))
    return np.moveaxis(ids, axis, -1).reshape(-1, mesh[axis])


def _string(text: str) -> ir.StringAttr:
    return ir.StringAttr.get(text)


def custom_call(target: str, x: ir.Value, result, sharding: str) -> ir.Value:
    return hlo.value(
        "custom_call", [x], result,
        call_target_name=_string(target), backend_config=_string(""), **{"mhlo.sharding": _string(sharding)},
    )


def constrain(x: ir.Value, sharding: str) -> ir.Value:
    """``x`` with a sharding constraint (jax's ``with_sharding_constraint``)."""
    return custom_call("Sharding", x, x.type, sharding)


@lowering("shard")
def _shard(op, rewriter):
    return constrain(op.operands[0], hlo_sharding(attr(op, "mesh"), attr(op, "sharding")))


def _manual(op):
    """The operand's block on each device: what a collective works on."""
    x = op.operands[0]
    mesh, sharding = attr(op, "mesh"), attr(op, "sharding")
    full = constrain(x, hlo_sharding(mesh, sharding))
    return custom_call("SPMDFullToShardShape", full, local_type(hlo.type_of(x), mesh, sharding), MANUAL)


def _result_sharding(op) -> tuple[int, ...]:
    name = op.name.removeprefix("lazy.")
    return result_sharding(name, {n: attr(op, n) for n in _ATTRS[name]})


_ATTRS = {
    "all_reduce": ("sharding", "axis"),
    "all_gather": ("sharding", "axis"),
    "reduce_scatter": ("sharding", "axis", "dim"),
    "all_to_all": ("sharding", "axis", "split_dim", "concat_dim"),
    "collective_permute": ("sharding",),
}


def _global(block: ir.Value, op) -> ir.Value:
    """Blocks back to the global value of ``op``'s result, laid out as the op says."""
    block = constrain(block, MANUAL)
    sharding = hlo_sharding(attr(op, "mesh"), _result_sharding(op))
    return custom_call("SPMDShardToFullShape", block, op.results[0].type, sharding)


def _collective_attrs(op) -> dict:
    """The attributes jax gives a collective in ``shard_map``: one channel for
    all, and replica groups of device ids (``all_to_all`` has no
    ``use_global_device_ids``: with a channel its groups are device ids already)."""
    out = {"channel_handle": ir.Attribute.parse("#stablehlo.channel_handle<handle = 1, type = 1>")}
    if op.name != "lazy.collective_permute":
        out["replica_groups"] = hlo.constant_attr(groups(attr(op, "mesh"), attr(op, "axis")))
    if op.name not in ("lazy.collective_permute", "lazy.all_to_all"):
        out["use_global_device_ids"] = ir.UnitAttr.get()
    return out


def _result_block(op) -> TensorType:
    """The block of ``op``'s result one device holds."""
    return local_type(hlo.type_of(op.results[0]), attr(op, "mesh"), _result_sharding(op))


def _combiner(op, t: TensorType):
    name = {"sum": "reduce_sum", "prod": "reduce_prod", "max": "reduce_max", "min": "reduce_min"}[attr(op, "reduction")]
    combiner = REDUCERS[name][0]
    scalar = TensorType((), t.dtype)
    return [scalar, scalar], lambda a, b: [hlo.binary(combiner, a, b)]


@lowering("all_reduce")
def _all_reduce(op, rewriter):
    block = _manual(op)
    t = hlo.type_of(block)
    args, body = _combiner(op, t)
    reduced = hlo.with_body("all_reduce", [block], [t], args, body, **_collective_attrs(op)).result
    # every device of a group holds the combined block: the result's dimension is one block
    return _global(reduced, op)


@lowering("all_gather")
def _all_gather(op, rewriter):
    block = _manual(op)
    gathered = hlo.value("all_gather", [block], _result_block(op),
                         all_gather_dim=hlo.i64(list(attr(op, "sharding")).index(attr(op, "axis"))),
                         **_collective_attrs(op))
    return _global(gathered, op)


@lowering("reduce_scatter")
def _reduce_scatter(op, rewriter):
    block = _manual(op)
    args, body = _combiner(op, hlo.type_of(block))
    scattered = hlo.with_body(
        "reduce_scatter", [block], [_result_block(op)], args, body,
        scatter_dimension=hlo.i64(attr(op, "dim")), **_collective_attrs(op),
    ).result
    return _global(scattered, op)


@lowering("all_to_all")
def _all_to_all(op, rewriter):
    block = _manual(op)
    moved = hlo.value(
        "all_to_all", [block], _result_block(op),
        split_dimension=hlo.i64(attr(op, "split_dim")), concat_dimension=hlo.i64(attr(op, "concat_dim")),
        split_count=hlo.i64(attr(op, "mesh")[attr(op, "axis")]), **_collective_attrs(op),
    )
    return _global(moved, op)


@lowering("collective_permute")
def _collective_permute(op, rewriter):
    block = _manual(op)
    mesh, axis = attr(op, "mesh"), attr(op, "axis")
    pairs = [(int(g[s]), int(g[t])) for g in groups(mesh, axis) for s, t in check_pairs(attr(op, "pairs"), mesh[axis])]
    moved = hlo.value(
        "collective_permute", [block], block.type,
        source_target_pairs=hlo.constant_attr(np.array(pairs, np.int64).reshape(-1, 2)),
        **_collective_attrs(op),
    )
    return _global(moved, op)
