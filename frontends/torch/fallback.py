"""Ops with no lowering: run the eager CPU kernel on materialized inputs.

The shared mechanism (:mod:`lazycore.trace.fallback`) brings the inputs to the
host (a barrier if they are pending), runs the CPU kernel and uploads its
results, so the program continues lazily after it; every fallback is counted
in ``lazycore.metrics`` with the op's name and the line of user code that
reached it. This bridge says what is torch's: lazy tensors cross as CPU
tensors, the lazy device as the CPU, and the arguments the op's schema marks
as written are written back. Boolean-mask indexing on its way here whose mask
can be read first is lowered after all (:func:`.ops.indexing.host_masked`).
"""

from __future__ import annotations

import sys

import torch

from lazycore.ir import sourceloc
from lazycore.trace import fallback

from .counts import permutation
from .ops.indexing import host_masked
from .storage_resize import resize_
from .tensor import Tensor, from_host, read, to_host, write

sourceloc.skip(torch)
sourceloc.skip(sys.modules["lazycore.frontends"])


class _Bridge(fallback.Bridge):
    lazy = Tensor
    host = torch.Tensor

    def to_host(self, x, call):
        return to_host(x)

    def host_arg(self, x, call):
        if isinstance(x, torch.device) and x.type == "lazy":
            if call.device is None:
                call.device = x  # a factory's results go where it was asked to put them
            return torch.device("cpu")
        return x

    def changed(self, call, func):
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            positional = i < len(call.args) and not arg.kwarg_only
            lazy = call.args[i] if positional else call.kwargs.get(arg.name)
            cpu = call.host_args[i] if positional else call.host_kwargs.get(arg.name)
            if isinstance(lazy, Tensor):
                yield lazy, cpu
            elif isinstance(lazy, (list, tuple)):
                # a written list (``Tensor(a!)[]``: GradScaler's unscale of the
                # gradients, the ``_foreach_*_`` ops); its updates were lost, so the
                # gradients stayed scaled, silently
                for item, host in zip(lazy, cpu):
                    if isinstance(item, Tensor):
                        yield item, host

    def write(self, lazy, host, call):
        if host.shape != lazy.shape:  # the kernel resized it, as eager's resize their outputs
            resize_(None, (lazy, tuple(host.shape)), {})
        write(lazy, read(from_host(host, lazy.device)))

    def from_host(self, host, call):
        return from_host(host, call.device) if call.device is not None else host


_BRIDGE = _Bridge()


class _Permutations(_Bridge):
    """``randperm``'s draws, uploaded padded once their count varies (counts.py)."""

    def to_host(self, x, call):
        # randperm's only tensor argument is its out= tensor, which it only
        # writes: not read (a lazy empty of the count's size read alone was
        # a program per count)
        return torch.empty(x.shape, dtype=x.dtype)

    def write(self, lazy, host, call):  # (randperm.generator_out: torch.randperm's own path)
        if host.dim() != 1:
            return super().write(lazy, host, call)
        write(lazy, read(permutation(host, lazy.device)))

    def from_host(self, host, call):
        if call.device is None or host.dim() != 1:
            return super().from_host(host, call)
        return permutation(host, call.device)


_PERMUTATIONS = _Permutations()


class _Writes(_Bridge):
    """An op that writes some of its arguments: their host copies get storage of
    their own, which the op may resize (the fused fake-quant observer's per-channel
    min/max buffers start empty; a copy on a NumPy array's memory cannot grow)."""

    def __init__(self, written):
        self.written = written

    def to_host(self, x, call):
        host = to_host(x)
        return host.clone(memory_format=torch.preserve_format) if id(x) in self.written else host


def _written(func, args, kwargs):
    """The ids of the lazy tensors ``func``'s schema writes among ``args``/``kwargs``."""
    out = set()
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        x = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        for item in (x if isinstance(x, (list, tuple)) else (x,)):
            if isinstance(item, Tensor):
                out.add(id(item))
    return out


# Below __torch_dispatch__ torch excludes the Conjugate and Negative keys, so a
# CPU kernel run from here would read a conj view (pinv's mH, ...) as plain
# numbers: complex results came back wrong. The host call gets them back.
_VIEW_KEYS = (torch._C.DispatchKey.Conjugate, torch._C.DispatchKey.Negative)


def run(func, args, kwargs):
    done = host_masked(func, args, kwargs)  # a boolean mask whose values are known on the host: lowered after all
    if done is not NotImplemented:
        return done
    saved = [torch._C._dispatch_tls_is_dispatch_key_excluded(k) for k in _VIEW_KEYS]
    for k in _VIEW_KEYS:
        torch._C._dispatch_tls_set_dispatch_key_excluded(k, False)
    try:
        if func.overloadpacket is torch.ops.aten.randperm:
            bridge = _PERMUTATIONS
        else:
            written = _written(func, args, kwargs)
            bridge = _Writes(written) if written else _BRIDGE
        return fallback.run(str(func), func, args, kwargs, bridge)
    finally:
        for k, was in zip(_VIEW_KEYS, saved):
            torch._C._dispatch_tls_set_dispatch_key_excluded(k, was)
