"""Barriers: turn the pending live tensors of a device into device data.

At a barrier (:func:`lazycore.runtime.transfer.mark_step`, or a value being
observed) every live handle of the device whose value is still a computation
becomes an output of ONE program. :func:`sync` is a fixed sequence of stages
over one step record (:class:`lazycore.runtime.step.Step`):

1. **collect** the pending handles (:mod:`lazycore.runtime.step`);
2. **plan**: recall the plan of an earlier step like it (with its program
   at bucket sizes, when the buckets padded it), or walk the graph once
   (:mod:`lazycore.runtime.planning`): parameters, outputs, donation,
   compile key;
3. **transforms**: the registered features that rewrite a walked step
   (:data:`TRANSFORMS`, :mod:`lazycore.runtime.transforms`: shape buckets,
   rolled layers' stacks, value checks);
4. **program**: from memory, disk or the compiler
   (:func:`lazycore.runtime.programs.obtain`), with the arguments the
   transforms bring;
5. **launch** it, and **settle** (:mod:`lazycore.runtime.launches`).

A program that fails to lower, compile or launch, or whose inputs are failed
values, does not make the barrier raise: **containment**
(:mod:`lazycore.runtime.containment`) settles which outputs hold the error
and computes the others. A failure found only when the program is waited for
(it runs asynchronously) is settled then (:class:`lazycore.runtime.launches.Launch`).

The stages import nothing from here: what they need of the barrier (its
walk, its runner for a failure's retries) travels in the step record.
"""

from __future__ import annotations

from lazycore.ir import events, heap
from lazycore.ir.context import LOCK
from lazycore.ir.graph import LOG
from lazycore.ir.walk import Walk
from lazycore.runtime import checks, containment, launches, planning, programs, transforms
from lazycore.runtime.failures import ProgramError
from lazycore.runtime.donation import plan_donation, successors  # noqa: F401  (the barrier's donation plan)
from lazycore.runtime.standalone import run_alone
from lazycore.runtime.step import collect

TRANSFORMS = transforms.Pipeline([transforms.BucketSizes(), transforms.RolledStacks(), transforms.ValueChecks()])
"""The features that rewrite a step, in the order they run."""


def sync(device, wait: bool = True) -> int:
    """Run the pending computation of every live handle on ``device``.

    ``wait``: return once the program has finished; else once it has started
    and the program started by the barrier before it has finished (the next
    step's tracing then overlaps this one's execution). Returns the number of
    handles updated (0: nothing was pending).

    It holds :data:`lazycore.ir.context.LOCK` throughout: it takes what every
    thread recorded so far, and no thread records, reads or compiles while it
    runs (docs/threads.md).
    """
    with LOCK:
        return _sync(device, wait)


def _sync(device, wait: bool) -> int:
    gated = checks.gate_step(device)  # step checks: state kept as it was where one fails
    if gated is None:
        return _run(device, wait)
    try:
        n = _run(device, True)
    finally:
        checks.settle_step(gated)  # raises the failing one's error
    return n


def _run(device, wait: bool) -> int:
    events.emit("barrier_start", device)
    heap.freeze_at_barrier(ran_program=False)
    # (Walk and run_alone as this module names them: a test or tool may count them)
    step = collect(device, wait, Walk, run_alone)
    if not step.pending:
        LOG.reset()
        if wait:
            device.wait()
        return 0
    if device.pjrt is None:
        raise RuntimeError(f"device {device.name} cannot run programs (no PJRT device behind it)")
    with events.timed("trace"):
        if not planning.recall(step):
            planning.walk(step)
            TRANSFORMS.rewrite(step)
            planning.remember_padded(step)
    events.record_graph(*step.counts)
    if containment.failed_inputs(step):
        return containment.contain(step, None)
    try:
        programs.obtain(step, TRANSFORMS)
        launches.launch(step, TRANSFORMS)
    except ProgramError as e:
        return containment.contain(step, e)
    return launches.settle(step)
