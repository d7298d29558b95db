"""Sharding torch tensors over a mesh, with PyTorch/XLA's ``mark_sharding``.

Tensors on a mesh's device (``lazycore.torch.device(mesh)``) are replicated
over its devices unless marked; a data-parallel training step marks only the
batch, split along the data axis (``("data", None)``). XLA's SPMD partitioner
splits the step's program over the mesh from the marks and inserts the
collectives (the gradients' all-reduce), and lays out what the program
computes (the updated parameters keep their layout).
"""

from __future__ import annotations

import torch

from lazycore.runtime.device import Mesh
from lazycore.trace import sharding

from . import dtypes
from .tensor import Tensor, lc_device, read, torch_device, wrap, write


def mark_sharding(tensor: Tensor, mesh: Mesh, spec) -> Tensor:
    """Lay ``tensor`` out over ``mesh`` in place: dimension ``d`` split into
    equal blocks along the mesh axis ``spec[d]`` names (None: whole on every
    device). The tensor must be on the mesh's device and not be a view (mark
    the tensor it views). Bad specs raise ValueError at the call, as
    :func:`lazycore.shard` says."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"mark_sharding expects a tensor on a lazy device, got {type(tensor).__name__}")
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mark_sharding: expected a lazycore.Mesh, got {type(mesh).__name__}")
    here = lc_device(tensor.device)
    if here is not mesh:
        raise ValueError(
            f"mark_sharding: the tensor is on {tensor.device} ({here.name}), not on the mesh's device "
            f"{torch_device(mesh)}; move it there first with .to(lazycore.torch.device(mesh))"
        )
    if tensor._steps:
        raise RuntimeError("mark_sharding: the tensor is a view of another; mark the tensor it views")
    return write(tensor, sharding.shard(read(tensor), mesh, spec))


def shard(tensor, mesh: Mesh, spec, *, local: bool = False) -> Tensor:
    """A new tensor on ``mesh``'s device laid out as ``spec``
    (:func:`lazycore.shard`), from a CPU tensor or a lazy one. ``local=True``:
    ``tensor`` is this process's part (a CPU tensor: the batch it loaded) of
    a tensor of a mesh spanning several processes; the result is the whole
    tensor (:mod:`lazycore.runtime.distributed`)."""
    if isinstance(tensor, Tensor):
        if local:
            raise TypeError("shard(local=True) takes this process's part as a CPU tensor")
        source = read(tensor)
    elif isinstance(tensor, torch.Tensor):
        source = dtypes.to_numpy(tensor.detach())
    else:
        raise TypeError(f"shard expects a tensor, got {type(tensor).__name__}")
    return wrap(sharding.shard(source, mesh, spec, local=local))


def sharding_of(tensor: Tensor):
    """The tensor's layout as a spec, when known before its program runs
    (:func:`lazycore.sharding_of`); None when XLA's partitioner decides it."""
    return sharding.sharding_of(read(tensor))
