"""``torch.distributed``'s ``lazy`` backend: DistributedDataParallel on lazy tensors.

Under ``torchrun`` (or any launcher that sets ``WORLD_SIZE``, ``RANK``,
``MASTER_ADDR``, ``MASTER_PORT``), a script that calls
``lazycore.distributed.initialize()`` and then
``torch.distributed.init_process_group("lazy")`` gets a process group whose
collectives take tensors on the lazy device: ``all_reduce``, ``all_gather``
(and ``all_gather_into_tensor``), ``reduce_scatter`` (and
``reduce_scatter_tensor``), ``broadcast`` and ``barrier``. So
``DistributedDataParallel(model)`` over a model on ``lazycore.torch.device()``
runs unchanged: it broadcasts rank 0's parameters at the start and averages
the gradients across processes in backward.

Each collective is one XLA program over a mesh with one device per process
(:mod:`lazycore.trace.processes`), run at the call: the tensors' pending work
first, then the collective (gloo between CPU processes). The process group
is the whole group of processes ``lazycore.distributed.initialize()``
joined; sub-groups are not supported.

DDP's C++ reducer times its iterations with a timer registered per device
type, in C++, for the CPU and CUDA only; on any other device (the lazy one,
XLA's) its logger writes ``Time stats are currently only collected for CPU
and CUDA devices`` to stderr once per process, at the second iteration,
which no Python registration can answer. Making the group consumes that one
warning, with stderr filtered of exactly it (:func:`_consume_time_stats_warning`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from lazycore.runtime import distributed as _processes
from lazycore.runtime import nativeout
from lazycore.runtime.transfer import from_numpy, to_numpy
from lazycore.trace import processes

from .tensor import Tensor, device, read, wrap

__all__ = ["ProcessGroupLazy"]

BACKEND = "lazy"

_OPS = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.AVG: "avg",
    dist.ReduceOp.PRODUCT: "prod",
    dist.ReduceOp.MAX: "max",
    dist.ReduceOp.MIN: "min",
}


def _op(reduce_op) -> str:
    for k, name in _OPS.items():
        if reduce_op == k:
            return name
    raise ValueError(f"the lazy backend does not support reduce op {reduce_op}")


def _lazy(t, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise RuntimeError(f"{what}: the lazy backend takes tensors on a lazy device, got one on {t.device}")
    return t


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


class ProcessGroupLazy(dist.ProcessGroup):
    """The process group of every process lazycore joined (rank = process index)."""

    def __init__(self, rank: int, size: int):
        super().__init__(rank, size)
        self._rank, self._size = rank, size

    def getBackendName(self) -> str:
        return BACKEND

    def allreduce(self, tensors, opts):
        op = _op(opts.reduceOp)
        for t in tensors:
            _lazy(t, "all_reduce").copy_(wrap(processes.all_reduce(read(t.contiguous()), op)))
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        for t in tensors:
            _lazy(t, "broadcast").copy_(wrap(processes.broadcast(read(t.contiguous()), opts.rootRank)))
        return _done(tensors)

    def allgather(self, output_tensors, input_tensors, opts):
        for outs, t in zip(output_tensors, input_tensors):
            parts = processes.all_gather(read(_lazy(t, "all_gather").contiguous()))
            for o, p in zip(outs, parts):
                o.copy_(wrap(p))
        return _done(output_tensors)

    def _allgather_base(self, output, input, opts):
        parts = processes.all_gather(read(_lazy(input, "all_gather_into_tensor").contiguous()))
        output.copy_(torch.cat([wrap(p) for p in parts]).view(output.shape))
        return _done([output])

    all_gather_single = _allgather_base  # all_gather_into_tensor's path in torch 2.13

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        op = _op(opts.reduceOp)
        for o, ins in zip(output_tensors, input_tensors):
            whole = torch.cat([_lazy(i, "reduce_scatter").reshape(-1) for i in ins])
            o.copy_(wrap(processes.reduce_scatter(read(whole), op)).view(o.shape))
        return _done(output_tensors)

    def _reduce_scatter_base(self, output, input, opts):
        op = _op(opts.reduceOp)
        flat = _lazy(input, "reduce_scatter_tensor").reshape(-1)
        output.copy_(wrap(processes.reduce_scatter(read(flat.contiguous()), op)).view(output.shape))
        return _done([output])

    reduce_scatter_single = _reduce_scatter_base  # reduce_scatter_tensor's path in torch 2.13

    def barrier(self, opts=None):
        # every process reads the sum of a token, so none returns before all have called
        to_numpy(processes.all_reduce(from_numpy(np.zeros((), np.float32))))
        return _done([])

    def __repr__(self) -> str:
        return f"ProcessGroupLazy(rank={self._rank}, size={self._size})"


def _create(store, rank: int, size: int, timeout) -> ProcessGroupLazy:
    count = _processes.process_count()
    if size > 1 and not _processes.is_initialized():
        raise RuntimeError(
            "the lazy backend runs on the processes lazycore.distributed.initialize() joined: call it first, "
            "before anything uses a device, then torch.distributed.init_process_group('lazy')"
        )
    if size != count or rank != _processes.process_index():
        raise RuntimeError(
            f"the lazy backend's group is every process lazycore joined ({count}, this one "
            f"{_processes.process_index()}); got a group of {size} with rank {rank} (sub-groups are not supported)"
        )
    group = ProcessGroupLazy(rank, size)
    _consume_time_stats_warning(group)
    return group


TIME_STATS = nativeout.Lines(rb"(\[rank\d+\]:)?\[W[^\]]*\] Warning: Time stats are currently only collected for CPU and "
                             rb"CUDA devices\.[^\n]*", b"[")
"""c10d's logger's warning for a device with no reducer timer (module doc), on stderr."""


def _consume_time_stats_warning(group: ProcessGroupLazy) -> None:
    """Have c10d's logger give its once-per-process time-stats warning now,
    for a reducer over a lazy parameter in the new group, with stderr filtered
    of it: a DDP model on the lazy device then trains without it. No
    collective runs (a reducer's first forward only counts the iteration)."""
    param = torch.zeros(1, device=device(), requires_grad=True)
    reducer = dist.Reducer([param], [[0]], [param.element_size()], group)
    logger = dist.Logger(reducer)
    reducer.prepare_for_forward()
    with nativeout.filtered(2, TIME_STATS):
        logger.set_runtime_stats_and_log()


if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create, devices=["lazy"])
