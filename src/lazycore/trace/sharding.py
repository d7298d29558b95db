"""Meshes, shardings and collectives: the core API for one program over many devices.

A value on a :class:`~lazycore.runtime.device.Mesh` is one global value laid
out over the mesh's devices. :func:`shard` lays it out: a spec names, per
dimension, the mesh axis it is split along (None: whole on every device).
Values whose layout nobody set are replicated when they are uploaded, and
laid out as XLA's SPMD partitioner decides when a program computes them; a
barrier runs one program for all the mesh's devices.

The collectives (:func:`all_reduce`, :func:`all_gather`,
:func:`reduce_scatter`, :func:`all_to_all`, :func:`collective_permute`)
are written on global values too, with the meaning a ``shard_map`` body
gives them (each device works on its block; see
:mod:`lazycore.dialect.collectives`). They need the operand's layout: the
one :func:`shard` (or the data itself) gives it, or ``spec=``.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect.collectives import COLLECTIVES, REDUCTIONS, check_pairs, result_sharding
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime.device import Mesh
from lazycore.runtime.transfer import shard_data, shard_local_data, to_numpy

from .core import apply

__all__ = [
    "Mesh",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "collective_permute",
    "reduce_scatter",
    "shard",
    "sharding_of",
]


def _mesh(mesh, what: str) -> Mesh:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{what}: expected a lazycore.Mesh, got {type(mesh).__name__}")
    return mesh


def shard(value, mesh: Mesh, spec, *, local: bool = False) -> LazyTensor:
    """``value`` laid out over ``mesh``: dimension ``d`` split into equal
    blocks along the mesh axis ``spec[d]`` names, whole where it is None (and
    for dimensions past the end of ``spec``).

    ``value`` is host data (copied straight to its blocks), a lazy value of
    the mesh (device data is moved between the mesh's devices at once; a
    pending value gets a ``lazy.shard`` constraint that the program's
    partitioner follows), or a lazy value of a single device (copied through
    the host). Bad specs raise at the call: ValueError for more entries than
    dimensions, an unknown axis, an axis used twice or a dimension its axis
    does not divide; a value of another mesh raises ValueError too.

    ``local=True``: ``value`` is this process's part of a value of a mesh
    spanning several processes (:mod:`lazycore.runtime.distributed`): the
    blocks its devices hold, together; every process passes its own part
    and the result is the global value."""
    mesh = _mesh(mesh, "shard")
    if local:
        if isinstance(value, LazyTensor):
            raise TypeError("shard(local=True) takes this process's part as host data, not a lazy value")
        host = np.asarray(value)
        names = mesh.spec_names(mesh.spec_axes(spec, host.shape, sizes=False))
        global_shape = mesh.pjrt.global_shape(names, host.shape)
        mesh.spec_axes(spec, global_shape)  # each split dimension divisible
        return shard_local_data(host, mesh, names, global_shape)
    shape = value.shape if isinstance(value, LazyTensor) else np.shape(value)
    axes = mesh.spec_axes(spec, shape)
    names = mesh.spec_names(axes)
    if not isinstance(value, LazyTensor):
        return shard_data(value, mesh, names)
    if value.device is not mesh:
        if isinstance(value.device, Mesh):
            raise ValueError(
                f"shard: the value is on {value.device.name}, not on {mesh.name}; values never move "
                f"between meshes implicitly (copy it with lazycore.to_device(value, mesh) first)"
            )
        return shard_data(to_numpy(value), mesh, names)
    node = value._value.node
    if type(node) is Data and type(node.storage) is not Failure:
        return shard_data(value, mesh, names)
    return apply("shard", value, mesh=mesh.shape, sharding=axes)


def sharding_of(value: LazyTensor) -> tuple | None:
    """The layout of a value of a mesh as a spec (an axis name or None per
    dimension), when it is known before it runs: set by :func:`shard` or a
    collective, or that of its device data. None for values whose layout the
    partitioner decides (and for values of a single device)."""
    if not isinstance(value.device, Mesh):
        return None
    axes = _axes_of(value)
    return None if axes is None else value.device.spec_names(axes)


def _axes_of(value: LazyTensor) -> tuple[int, ...] | None:
    node, index = value._value
    if type(node) is Data:
        spec = node.sharding.spec if node.sharding is not None else None
        return None if spec is None else value.device.spec_axes(spec, node.types[0].shape)
    if node.op == "shard" or node.op in COLLECTIVES:
        return result_sharding(node.op, node.attrs)
    return None


def _operand(x, mesh, axis, spec, what: str):
    """The operand's layout as axis indices and the collective's axis index;
    ValueError for an operand of another device, an unknown axis or a layout
    that is not known."""
    mesh = _mesh(mesh, what)
    if not isinstance(x, LazyTensor):
        raise TypeError(f"{what}: expected a lazy value, got {type(x).__name__}")
    if x.device is not mesh:
        raise ValueError(f"{what}: the value is on {x.device.name}, not on {mesh.name}")
    a = mesh.axis_index(axis)
    if spec is not None:
        axes = mesh.spec_axes(spec, x.shape)
    else:
        axes = _axes_of(x)
        if axes is None:
            raise ValueError(
                f"{what}: the layout of the value is not known before it runs (XLA's partitioner decides it); "
                f"pass spec= or lay it out with lazycore.shard(value, mesh, spec) first"
            )
    if a not in axes:
        raise ValueError(
            f"{what}: the value is not split along mesh axis {axis!r} (its layout is {mesh.spec_names(axes)})"
        )
    return mesh, axes, a


def _reduction(op: str, what: str) -> str:
    if op not in REDUCTIONS:
        raise ValueError(f"{what}: op must be one of {', '.join(REDUCTIONS)}, got {op!r}")
    return op


def all_reduce(x: LazyTensor, mesh: Mesh, axis: str, op: str = "sum", *, spec=None) -> LazyTensor:
    """The blocks of ``x`` along the dimension split on mesh axis ``axis``,
    combined by ``op`` (sum, prod, max, min): that dimension shrinks to one
    block, whole on every device of the axis (``psum`` in a ``shard_map``)."""
    mesh, axes, a = _operand(x, mesh, axis, spec, "all_reduce")
    return apply("all_reduce", x, mesh=mesh.shape, sharding=axes, axis=a, reduction=_reduction(op, "all_reduce"))


def all_gather(x: LazyTensor, mesh: Mesh, axis: str, *, spec=None) -> LazyTensor:
    """``x``, with its dimension split on mesh axis ``axis`` gathered whole on
    every device of the axis."""
    mesh, axes, a = _operand(x, mesh, axis, spec, "all_gather")
    return apply("all_gather", x, mesh=mesh.shape, sharding=axes, axis=a)


def reduce_scatter(x: LazyTensor, mesh: Mesh, axis: str, dim: int, op: str = "sum", *, spec=None) -> LazyTensor:
    """:func:`all_reduce`'s value, split along mesh axis ``axis`` on dimension ``dim``."""
    mesh, axes, a = _operand(x, mesh, axis, spec, "reduce_scatter")
    return apply("reduce_scatter", x, mesh=mesh.shape, sharding=axes, axis=a, dim=_dim(dim, x, "reduce_scatter"),
                 reduction=_reduction(op, "reduce_scatter"))


def all_to_all(x: LazyTensor, mesh: Mesh, axis: str, split_dim: int, concat_dim: int, *, spec=None) -> LazyTensor:
    """``x``, split along mesh axis ``axis`` on ``split_dim`` instead of on
    ``concat_dim`` (each device sends a piece of its block to every other)."""
    mesh, axes, a = _operand(x, mesh, axis, spec, "all_to_all")
    return apply("all_to_all", x, mesh=mesh.shape, sharding=axes, axis=a,
                 split_dim=_dim(split_dim, x, "all_to_all"), concat_dim=_dim(concat_dim, x, "all_to_all"))


def collective_permute(x: LazyTensor, mesh: Mesh, axis: str, pairs, *, spec=None) -> LazyTensor:
    """``x`` with the blocks along mesh axis ``axis`` moved: for each
    ``(source, target)`` in ``pairs`` (positions along the axis) the block at
    ``target`` is ``x``'s block at ``source``; a block no pair targets is zero."""
    mesh, axes, a = _operand(x, mesh, axis, spec, "collective_permute")
    pairs = [tuple(p) for p in pairs]
    if any(len(p) != 2 for p in pairs):
        raise ValueError(f"collective_permute: pairs are (source, target), got {pairs}")
    flat = tuple(int(v) for p in pairs for v in p)
    try:
        check_pairs(flat, mesh.shape[a])
    except ValueError as e:
        raise ValueError(f"collective_permute: {e}") from None
    return apply("collective_permute", x, mesh=mesh.shape, sharding=axes, axis=a, pairs=flat)


def _dim(dim: int, x: LazyTensor, what: str) -> int:
    rank = len(x.shape)
    if not -rank <= dim < rank:
        raise IndexError(f"{what}: dimension {dim} out of range for a value of rank {rank}")
    return dim % rank
