"""Batch norm's saved statistics as eager's CPU kernel gives them.

The lazy device answers as eager's CPU does, but the meta kernels and the
decompositions of the batch-norm ops answer as CUDA does whenever the input is
not on the CPU (``torch._decomp``'s ``native_batch_norm_helper`` branches on
``input.device.type == "cpu"``): outside training they hand back the running
mean and ``1/sqrt(var + eps)`` as ``save_mean`` / ``save_invstd``, where
eager's CPU kernel returns empty (``(0,)``) tensors, and they keep the
statistics in float32 for a float16/bfloat16 input, where eager's CPU
kernel returns them in the input's element type. The dispatcher passes the meta
result through :func:`as_eager` (so every handler sees eager's shapes and
dtypes) and runs the decompositions wrapped by :func:`decomposition`.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_EVAL = False
_TRAIN = True

# op -> its mode when fixed (else its ``training`` argument decides)
TRAINING = {
    aten.native_batch_norm.default: None,
    aten._native_batch_norm_legit.default: None,
    aten._native_batch_norm_legit.no_stats: None,
    aten._native_batch_norm_legit_functional.default: None,
    aten._native_batch_norm_legit_no_training.default: _EVAL,
    aten._batch_norm_no_update.default: _EVAL,
    aten._batch_norm_with_update.default: _TRAIN,
    aten._batch_norm_with_update_functional.default: _TRAIN,
}
"""The ops whose results 1 and 2 are ``save_mean`` and ``save_invstd``."""

# functional op -> where its new running mean and variance are among its results
_NEW_RUNNING = {
    aten._native_batch_norm_legit_functional.default: 3,
    aten._batch_norm_with_update_functional.default: 4,
}

_PARAMS = ("weight", "bias", "running_mean", "running_var")


def _arg(func, args, kwargs, name):
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return args[i] if i < len(args) else kwargs.get(name)
    return None


def as_eager(func, args, kwargs, out):
    """The result ``out`` of ``func`` (meta tensors, or the decomposition's
    lazy ones) with eager CPU's saved statistics: in the parameters' element
    type where they are float32 beside a float16/bfloat16 input (eager's mixed
    type), else in the input's; empty outside training. A functional op's new
    running statistics keep the running statistics' element type."""
    x = _arg(func, args, kwargs, "input")
    params = [p for p in (_arg(func, args, kwargs, n) for n in _PARAMS) if p is not None]
    dtype = params[0].dtype if params and params[0].dtype != x.dtype else x.dtype
    training = TRAINING[func]
    if training is None:
        training = bool(_arg(func, args, kwargs, "training"))
    if training:
        items = [out[0], out[1].to(dtype), out[2].to(dtype)]
    else:
        items = [out[0], x.new_empty((0,), dtype=dtype), x.new_empty((0,), dtype=dtype)]
    items += out[3:]
    at = _NEW_RUNNING.get(func)
    if at is not None:
        rm, rv = _arg(func, args, kwargs, "running_mean"), _arg(func, args, kwargs, "running_var")
        items[at:at + 2] = [out[at].to(rm.dtype), out[at + 1].to(rv.dtype)]
    return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)  # (torch's return types are named)


def decomposition(func, decomp):
    """``func``'s decomposition ``decomp`` returning eager CPU's saved statistics."""

    def run(*args, **kwargs):
        out = decomp(*args, **kwargs)
        return out if out is NotImplemented else as_eager(func, args, kwargs, out)

    return run
