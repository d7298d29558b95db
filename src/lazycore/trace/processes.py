"""Collectives between processes on values of single devices: what
``torch.distributed``'s calls mean, for its ``lazy`` backend.

Each process of a group (:mod:`lazycore.runtime.distributed`) holds its own
value on its own device; every process calls the same collective in the same
order. The values become the blocks of one value of a mesh with a device per
process (:func:`~lazycore.runtime.device.process_mesh`), the mesh's
collective (:mod:`lazycore.trace.sharding`) runs as one program on all of
them (XLA's, through PJRT; gloo between CPU processes), and each process gets
its block of the result back on its own device. No value passes through the
host; each call runs the pending work of the value first and the collective
program at once, as a barrier.
"""

from __future__ import annotations

from lazycore.ir.tensor import LazyTensor
from lazycore.runtime.device import Mesh, process_mesh
from lazycore.runtime.transfer import block_of, from_blocks

from . import sharding
from .core import apply, broadcast_to, scalar

__all__ = ["all_gather", "all_reduce", "broadcast", "reduce_scatter"]

AXIS = "processes"
OPS = ("sum", "avg", "prod", "max", "min")


def _single(x, what: str):
    if not isinstance(x, LazyTensor):
        raise TypeError(f"{what}: expected a lazy value, got {type(x).__name__}")
    if isinstance(x.device, Mesh):
        raise ValueError(f"{what}: the value is on {x.device.name}; collectives between processes take "
                         f"values of a single device")
    return process_mesh(x.device, AXIS)


def _stacked(x: LazyTensor, mesh: Mesh) -> LazyTensor:
    """The processes' values one after another along dimension 0 (a 0-d value as 1 element)."""
    if not x.shape:
        x = apply("reshape", x, shape=(1,))
    n, shape = mesh.size, tuple(x.shape)
    return from_blocks(x, mesh, (AXIS,), (n * shape[0],) + shape[1:])


def _local(y: LazyTensor, x: LazyTensor) -> LazyTensor:
    """This process's block of ``y``, as a value of ``x``'s device, in ``x``'s rank."""
    out = block_of(y, x.device)
    return apply("reshape", out, shape=()) if not x.shape else out


def all_reduce(x: LazyTensor, op: str = "sum") -> LazyTensor:
    """Every process's ``x`` combined by ``op`` (sum, avg, prod, max, min), in every process."""
    if op not in OPS:
        raise ValueError(f"all_reduce: op must be one of {', '.join(OPS)}, got {op!r}")
    mesh = _single(x, "all_reduce")
    total = sharding.all_reduce(_stacked(x, mesh), mesh, AXIS, "sum" if op == "avg" else op)
    out = _local(total, x)
    return apply("div", out, _scalar_like(mesh.size, out)) if op == "avg" else out


def _scalar_like(n: int, like: LazyTensor) -> LazyTensor:
    return broadcast_to(scalar(n, dtype=like.dtype, device=like.device), like.shape)


def all_gather(x: LazyTensor) -> list[LazyTensor]:
    """Every process's ``x``, in process order (each of ``x``'s shape), in every process."""
    mesh = _single(x, "all_gather")
    whole = block_of(sharding.all_gather(_stacked(x, mesh), mesh, AXIS), x.device)  # stacked: rank 1 at least
    return [_piece(whole, i, x) for i in range(mesh.size)]


def _piece(whole: LazyTensor, i: int, x: LazyTensor) -> LazyTensor:
    """Process ``i``'s value from the processes' values stacked along dimension 0."""
    shape = tuple(x.shape) or (1,)
    start = [i * shape[0]] + [0] * (len(shape) - 1)
    limit = [(i + 1) * shape[0]] + list(shape[1:])
    part = apply("slice", whole, start=start, limit=limit, strides=[1] * len(shape))
    return apply("reshape", part, shape=()) if not x.shape else part


def broadcast(x: LazyTensor, src: int) -> LazyTensor:
    """Process ``src``'s ``x``, in every process."""
    mesh = _single(x, "broadcast")
    if not 0 <= src < mesh.size:
        raise ValueError(f"broadcast: source process {src} is not in [0, {mesh.size})")
    return all_gather(x)[src]


def reduce_scatter(x: LazyTensor, op: str = "sum") -> LazyTensor:
    """``x`` (dimension 0 a multiple of the process count) combined over the
    processes by ``op``; process ``i`` gets the ``i``-th of the equal pieces
    of dimension 0."""
    if op not in OPS:
        raise ValueError(f"reduce_scatter: op must be one of {', '.join(OPS)}, got {op!r}")
    mesh = _single(x, "reduce_scatter")
    n = mesh.size
    if not x.shape or x.shape[0] % n:
        raise ValueError(f"reduce_scatter: dimension 0 of a value of shape {tuple(x.shape)} does not split "
                         f"into {n} equal pieces")
    spread = sharding.reduce_scatter(_stacked(x, mesh), mesh, AXIS, 0, "sum" if op == "avg" else op)
    out = block_of(spread, x.device)
    return apply("div", out, _scalar_like(n, out)) if op == "avg" else out
