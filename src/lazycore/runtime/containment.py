"""A barrier whose program failed: every output settled, none raised.

When a step's program fails to lower, compile or launch (or some of its
inputs are failed values), :func:`contain` settles every output
(:func:`lazycore.runtime.failures.settle`) and gives each pending handle its
buffer or its failure; reads raise it (:mod:`lazycore.runtime.failures`).
"""

from __future__ import annotations

from lazycore.ir import events
from lazycore.ir.failure import Failure
from lazycore.ir.graph import LOG, Data, Value
from lazycore.runtime import failures, pjrt


def failed_inputs(step) -> bool:
    """Whether some of the step's parameters are failed values (checked only
    once any value has failed)."""
    return failures.seen[0] and any(type(leaf.storage) is Failure for leaf in step.data)


def contain(step, error) -> int:
    """The step's program failed with ``error`` (None: some inputs are
    failed values): settle every output and give each handle its buffer or
    its failure. Returns the number of handles updated."""
    device = step.device
    values = step.outputs()
    results = failures.settle(device, values, error, step.runner)
    leaves = []
    for r, v in zip(results, values):
        if type(r) is Failure:
            leaf = Data(None, v.type, owned=False)
            failures.mark(leaf, r)
        else:
            leaf = Data(r, v.type, True, layout_of(r, v.type.rank, device))
        leaves.append(leaf)
    for t, k in zip(step.pending, step.slots):
        t._value = Value(leaves[k], 0)
    on_failure(device, results)
    if step.wait:
        device.wait()
    LOG.reset()
    return len(step.pending)


def layout_of(buffer, rank: int, device):
    """The :class:`~lazycore.runtime.pjrt.Sharding` of a result buffer on a mesh (None on one device)."""
    if isinstance(device.pjrt, pjrt.MeshTarget):
        return device.pjrt.from_jax(buffer.sharding, rank)
    return None


def laid_out(buffer, sharding, device):
    """``buffer`` as ``sharding`` says (a retried program's result may come
    laid out otherwise than the leaf it fills, whose digest says how)."""
    if sharding is not None and layout_of(buffer, len(buffer.shape), device) != sharding:
        return device.pjrt.put(buffer, sharding)
    return buffer


def on_failure(device, results: list) -> None:
    """Count and announce the failed ones of a program's ``results``."""
    failed = [r for r in results if type(r) is Failure]
    events.bump("failed_outputs", len(failed))
    if failed:
        events.emit("failure", device, len(failed), len(results), failed[0].message)
