"""The torch frontend: PyTorch programs on a lazycore device.

    import lazycore
    import lazycore.torch as ltorch

    dev = ltorch.device()
    model = MyModel().to(dev)
    ...
    loss.backward()
    ltorch.optimizer_step(opt)      # opt.step(), then lazycore.mark_step()

Ops are recorded below autograd through a ``__torch_dispatch__`` wrapper
subclass (:class:`Tensor`), so autograd, ``torch.nn``, ``torch.optim`` and
``torch.no_grad()`` work unchanged.
"""

from __future__ import annotations

import sys

import torch

from lazycore.ir.context import TRACE
from lazycore.trace import core

from lazycore.ir import heap as _heap
import lazycore.observe  # noqa: F401  (metrics, guards, debug lines and dumps hear the runtime)

from . import dispatch, ops  # noqa: F401  (ops registers the lowerings)
from . import distributed as _distributed  # noqa: F401  (torch.distributed's "lazy" backend)
from . import hooks as _hooks
from . import generation as _generation
from . import prompt_step as _prompt_step
from . import optim as _optim
from . import optim_replay as _optim_replay
from . import backward_replay as _backward_replay
from lazycore.runtime.closures import add_step_closure
from . import capture as _capture
from .capture import Captured, capture
from .loader import DeviceLoader
from .lowering import register as register_lowering
from .lowering import unregister as unregister_lowering
from .ops.random import manual_seed
from .sharding import mark_sharding, shard, sharding_of
from .tensor import Tensor, device, lc_device

__all__ = [
    "Captured",
    "DeviceLoader",
    "Tensor",
    "add_step_closure",
    "capture",
    "device",
    "dynamic",
    "lc_device",
    "manual_seed",
    "mark_sharding",
    "mark_step",
    "optimizer_step",
    "register_lowering",
    "shard",
    "sharding_of",
    "unregister_lowering",
]

_optim.install()
_capture.install()  # (after optim's: its step hooks run first)
_optim_replay.install()
_backward_replay.install()
_hooks.install()  # torch._lazy, torch.lazy, torch.manual_seed, torch.autocast answer for lazycore
_generation.install(also=(_prompt_step.patch,))  # transformers' generate(): the growing sequence in buckets, the prompt replayed


def mark_step(wait: bool = False) -> None:
    """Run everything pending on every lazy device (``lazycore.mark_step``):
    returns once the step's program has started and the previous one has
    finished; ``wait=True`` waits for this one too."""
    core.mark_step(wait)


def dynamic(tensor, dim: int):
    """Mark dimension ``dim`` of ``tensor`` (an input on a lazy device, not a
    view) as varying from step to step: it is padded to a bucket size and
    what the padding would change is masked, so sizes in one bucket
    (``LAZYCORE_BUCKETS``, powers of two by default) share one program
    (:func:`lazycore.dynamic`). Returns ``tensor``."""
    from .tensor import read

    if not isinstance(tensor, Tensor):
        raise TypeError(f"dynamic expects a tensor on a lazy device, got {type(tensor).__name__}")
    if tensor._steps:
        raise ValueError("dynamic: the tensor is a view of another; mark the tensor it views")
    core.dynamic(read(tensor), dim)
    return tensor


def optimizer_step(optimizer, barrier: bool = True, optimizer_args: dict | None = None):
    """``optimizer.step()``, then the step barrier (as PyTorch/XLA's ``optimizer_step``;
    ``barrier=False``: none, not even the automatic one)."""
    with TRACE.cutter.holding():
        loss = optimizer.step(**(optimizer_args or {}))
    if barrier:
        mark_step()
    return loss


# --- factory functions with device=lazy ------------------------------------------------------

_LIB = torch.library.Library("aten", "IMPL")


def _factory_kernel(func):
    def kernel(*args, **kwargs):
        if kwargs.get("device") is None:
            kwargs = dict(kwargs, device=torch.device("lazy", 0))
        return dispatch.factory(func, args, kwargs, sys._getframe(1))  # (the frame that called into torch)

    return kernel


def _lazy_key_fallback(op, *args, **kwargs):
    from .fallback import run as fallback

    return fallback(op, args, kwargs)


for _f in ops.factories.FACTORIES:
    _LIB.impl(_f._schema.name.split("::")[1] + ("" if _f._overloadname == "default" else "." + _f._overloadname),
              _factory_kernel(_f), "Lazy")


def _copy_from(src, dst, non_blocking=False):
    # copy_ reaches the backend this way when torch has the Python key off
    # (torch.tensor(data, device=lazy) builds the tensor so).
    from .special import copy_

    return copy_(None, (dst, src), {})


_LIB.impl("_copy_from", _copy_from, "Lazy")

_PYTHON_KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


def _python_key_on(op):
    """``op``'s kernel at the Lazy key for a lazy tensor that reaches it with
    the Python key excluded: torch's tensor constructors build their result so,
    and ``torch.tensor([loss_a, loss_b])`` reads each 0-d element by ``item()``
    (``_local_scalar_dense``). Dispatched again with that key on, the op meets
    the tensor's ``__torch_dispatch__`` as any other call does."""

    def kernel(*args, **kwargs):
        saved = [torch._C._dispatch_tls_is_dispatch_key_excluded(k) for k in _PYTHON_KEYS]
        for k in _PYTHON_KEYS:
            torch._C._dispatch_tls_set_dispatch_key_excluded(k, False)
        try:
            return op(*args, **kwargs)
        finally:
            for k, was in zip(_PYTHON_KEYS, saved):
                torch._C._dispatch_tls_set_dispatch_key_excluded(k, was)

    return kernel


_LIB.impl("_local_scalar_dense", _python_key_on(torch.ops.aten._local_scalar_dense.default), "Lazy")


def _kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                   pin_memory=None):
    # torch's kernel is a CPU/CUDA DispatchStub ("unsupported device type lazy"):
    # eager's window made on the CPU, a constant of no inputs, then uploaded
    window = torch.ops.aten.kaiser_window.beta(window_length, periodic, beta, dtype=dtype, layout=layout)
    return window.to(device if device is not None else torch.device("lazy", 0))


for _overload in ("default", "periodic", "beta"):
    _LIB.impl("kaiser_window" + ("" if _overload == "default" else "." + _overload), _kaiser_window, "Lazy")

# Any other op routed to the Lazy key by its device argument (tril_indices, ...).
# (Reached with the Python key excluded, as a tensor constructor's item() is,
# torch 2.13 fails this Python fallback with an internal assert, func != nullptr:
# an op that arrives so needs a kernel of its own here, as _local_scalar_dense has.)
_FALLBACK_LIB = torch.library.Library("_", "IMPL")
_FALLBACK_LIB.fallback(_lazy_key_fallback, dispatch_key="Lazy")

from . import eager as _eager  # noqa: E402,F401  (LAZYCORE_EAGER: each aten op runs at once)

_heap.freeze_imports()  # last: what the imports made is kept for the process

from lazycore.runtime import programs as _programs  # noqa: E402

_programs.load_compiler_ahead()  # the compiler's imports, on a thread, where the first program must be compiled
