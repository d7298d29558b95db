"""Ops with no lowering: run the eager CPU kernel on materialized inputs.

The inputs are brought to the host (a barrier if they are pending), the
CPU kernel runs, and its results come back as new device data, so the
program continues lazily after it. Mutated arguments are written back.
Every fallback is counted in ``lazycore.metrics`` with the op's name and the
line of user code that reached it.
"""

from __future__ import annotations

import sys

import torch

from lazycore.observe import metrics

from lazycore.ir import sourceloc
from lazycore.ir.sourceloc import user_location

from .tensor import Tensor, from_host, to_host, write

sourceloc.skip(torch)
sourceloc.skip(sys.modules["lazycore.frontends"])


def _to_cpu(x, state):
    if isinstance(x, Tensor):
        state.setdefault("device", x.device)
        return to_host(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(v, state) for v in x)
    if isinstance(x, torch.device) and x.type == "lazy":
        state.setdefault("device", x)
        return torch.device("cpu")
    return x


def run(func, args, kwargs):
    metrics.fallback(str(func), user_location())
    state: dict = {}
    cargs = tuple(_to_cpu(a, state) for a in args)
    ckwargs = {k: _to_cpu(v, state) for k, v in kwargs.items()}
    out = func(*cargs, **ckwargs)
    tdev = state.get("device")
    # Mutated arguments: their CPU copies changed, so write those back.
    schema = func._schema
    written = {}
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        lazy = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        cpu = cargs[i] if i < len(args) and not arg.kwarg_only else ckwargs.get(arg.name)
        if isinstance(lazy, Tensor):
            from .tensor import read

            write(lazy, read(from_host(cpu, lazy.device)))
            written[id(cpu)] = lazy

    def back(o):
        if isinstance(o, torch.Tensor):
            if id(o) in written:
                return written[id(o)]
            return from_host(o, tdev) if tdev is not None else o
        if isinstance(o, (list, tuple)):
            return type(o)(back(v) for v in o)
        return o

    return back(out)
