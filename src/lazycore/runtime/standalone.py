"""Values computed by a program of their own, outside any barrier.

A failed barrier's retries (:func:`lazycore.runtime.failures.settle`), the
stacking and row programs of :mod:`lazycore.runtime.stacks`, a padded
result's slice and the NaN finder each run some values as one program that
donates nothing and is waited for, so its errors surface at once. The
barrier's entry arguments are built the same way (:func:`arguments`).
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.context import LOCK
from lazycore.ir.graph import Data, Value
from lazycore.ir.walk import Walk
from lazycore.runtime import checks, programs
from lazycore.runtime.cache import CACHE, PACKS
from lazycore.runtime.failures import ProgramError


def run_alone(device, values: list[Value], stacks: bool = False, walk: Walk | None = None) -> list:
    """The buffers of ``values`` computed by a program of their own that
    donates nothing, once it has finished (the retries of
    :func:`lazycore.runtime.failures.settle`, and the programs of
    :mod:`lazycore.runtime.stacks`: with ``stacks``, its compiles and runs
    count in ``stack_compiles`` and ``stack_executions``, and its graph is
    not one of the barriers'); ``walk``: the walk of ``values``, when the
    caller has made it already. A value whose check failed is a
    :class:`~lazycore.ir.failure.Failure` in the list; raises
    :class:`~lazycore.runtime.failures.ProgramError`."""
    with LOCK:
        return _run_alone(device, values, stacks, walk)


def _run_alone(device, values: list[Value], stacks: bool, walk: Walk | None = None) -> list:
    if walk is None:
        walk = Walk(values)
    pipeline = settings.pipeline
    key = programs.make_key(walk.encoding, device, {}, pipeline, stacked=False)
    if not stacks:
        events.record_graph(len(walk.order), len(values), len(walk.params))
    exe = CACHE.get(key)
    if exe is None:
        counter = "stack_compiles" if stacks else "compiles"
        exe = programs.program(walk, device, {}, pipeline, stacked=False, counter=counter)[0]
        CACHE.put(key, exe)
    args = arguments(walk.data, list(walk.packs.items()), device)
    with events.timed("execute"):
        try:
            results, done = exe.launch(args)
            done.block_until_ready()
        except Exception as e:
            raise ProgramError("run", e) from e
    events.bump("stack_executions" if stacks else "executions")
    results, flags = results[:len(values)], results[len(values):]
    found = checks.failed(values, flags, run=lambda vs: _run_alone(device, vs, stacks)) if flags else None
    if found is not None:
        results = [r if f is None else f for r, f in zip(results, found)]
    return results


def arguments(data: list[Data], packs, device, args=None) -> list:
    """Entry arguments: the device-data leaves (or ``args``, their buffers
    as a program that takes stacks takes them:
    :func:`lazycore.runtime.stacks.arguments`), then one vector per scalar
    dtype (``packs``: ``(dtype, scalar leaves)`` pairs)."""
    if args is None:
        args = [leaf.buffer for leaf in data]
    for dtype, group in packs:
        host = np.array([leaf.value for leaf in group], dtype=to_numpy_dtype(dtype))
        args.append(PACKS.get(host, device))
    return args
