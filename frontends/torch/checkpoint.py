"""``torch.utils.checkpoint`` on lazy tensors: the recomputation stays one.

Checkpointing drops a region's activations in forward and recomputes them in
backward. On the lazy device both computations are recorded in one graph,
and the graph is hash-consed: the recomputation, the same ops on the same
values, would be the forward's nodes again (and XLA's CSE would merge what
was left), so the activations would be kept after all. As ``jax.checkpoint``
and PyTorch/XLA do, the recomputation here takes the region's inputs through
one ``lazy.optimization_barrier`` (``stablehlo.optimization_barrier``): its
results are the inputs' values, but the ops computed from them are new nodes,
which neither lazycore, MLIR's CSE nor XLA merges with the forward's, and XLA
computes them only once every operand of the barrier is available.

- **Non-reentrant** (``use_reentrant=False``): the recomputation runs in the
  saved-tensor unpack hook on the inputs ``_CheckpointFrame.get_inputs``
  returns; those are wrapped.
- **Reentrant** (``use_reentrant=True``): ``CheckpointFunction.backward``
  re-runs the function on ``detach_variable(inputs)``; there the barrier also
  takes the gradients flowing into the region (as PyTorch/XLA's
  ``optimization_barrier_(inputs + grads)``), so the recomputation cannot
  start before backward reaches the region.

The values through the barrier are detached copies with the inputs'
``requires_grad`` (what ``detach_variable`` makes), so the recomputation saves
the tensors the forward saved.
"""

from __future__ import annotations

import functools
import threading

import torch
import torch.utils.checkpoint as _cp

from lazycore.dialect.barrier import MAX_OPERANDS
from lazycore.trace import core

from .tensor import Tensor, read, wrap


def optimization_barrier(tensors) -> list:
    """``tensors`` with each lazy tensor replaced by its value through an
    optimization barrier (one per device, per 16 tensors): new tensors, detached,
    with the originals' ``requires_grad``. Other entries are returned as they are."""
    out = list(tensors)
    groups: dict = {}
    for i, t in enumerate(out):
        if isinstance(t, Tensor):
            groups.setdefault(t.device, []).append(i)
    for idx in groups.values():
        for k in range(0, len(idx), MAX_OPERANDS):
            chunk = idx[k:k + MAX_OPERANDS]
            handles = core.apply("optimization_barrier", [read(out[i]) for i in chunk])
            if not isinstance(handles, tuple):
                handles = (handles,)
            for i, h in zip(chunk, handles):
                t = out[i]
                new = wrap(h, owned=True)
                if t.requires_grad:
                    new.requires_grad_(True)
                out[i] = new
    return out


class _Backward(threading.local):
    grads = None  # the gradients of a reentrant checkpoint's backward, while it runs


_BACKWARD = _Backward()


def _reentrant_backward(original):
    @functools.wraps(original)
    def backward(ctx, *grads):
        saved, _BACKWARD.grads = _BACKWARD.grads, grads
        try:
            return original(ctx, *grads)
        finally:
            _BACKWARD.grads = saved

    backward.__lazycore_wrapped__ = original
    return backward


def _detach_variable(original):
    @functools.wraps(original)
    def detach_variable(inputs):
        grads = _BACKWARD.grads
        if grads is None or not isinstance(inputs, tuple) or not any(isinstance(t, Tensor) for t in inputs):
            return original(inputs)
        _BACKWARD.grads = None  # one barrier per backward call
        through = optimization_barrier(list(inputs) + [g for g in grads if isinstance(g, Tensor)])
        return tuple(through[: len(inputs)])

    detach_variable.__lazycore_wrapped__ = original
    return detach_variable


def _get_inputs(original):
    @functools.wraps(original)
    def get_inputs(self):
        args = original(self)
        if not any(isinstance(a, Tensor) for a in args):
            return args
        return optimization_barrier(args)

    get_inputs.__lazycore_wrapped__ = original
    return get_inputs


def install() -> None:
    """Wrap torch.utils.checkpoint's recomputation entry points (idempotent)."""
    cf = _cp.CheckpointFunction
    if not hasattr(cf.backward, "__lazycore_wrapped__"):
        cf.backward = staticmethod(_reentrant_backward(cf.backward))
    if not hasattr(_cp.detach_variable, "__lazycore_wrapped__"):
        _cp.detach_variable = _detach_variable(_cp.detach_variable)
    frame = _cp._CheckpointFrame
    if not hasattr(frame.get_inputs, "__lazycore_wrapped__"):
        frame.get_inputs = _get_inputs(frame.get_inputs)
