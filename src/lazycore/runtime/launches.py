"""A barrier's last stages: launching its program, and settling it.

The program runs asynchronously: the pending handles hold its result leaves
at once, and at most one program runs while Python traces the next step
(the one before must be done before a barrier returns). A failure found only
when the program is waited for is settled then, in the result leaves the
handles already hold; until that wait the :class:`Launch` keeps the graph it
ran, and with it that graph's inputs that were not donated. So are value
checks (:mod:`lazycore.runtime.checks`): the program returns their flags
after its outputs, and the outputs a true flag fails are marked when the
program is waited for.
"""

from __future__ import annotations

from lazycore.ir import events, heap
from lazycore.ir.context import LOCK
from lazycore.ir.failure import Failure
from lazycore.ir.graph import LOG
from lazycore.runtime import checks, failures, stacks
from lazycore.runtime.containment import laid_out, on_failure
from lazycore.runtime.failures import ProgramError
from lazycore.runtime.standalone import arguments


class Launch:
    """A program a barrier started without waiting for it (``device.running``):
    if it turns out to have failed, its results are computed again (or marked
    failed) in the leaves the handles already hold, and so are the outputs
    its value checks fail."""

    __slots__ = ("done", "device", "values", "leaves", "flags", "padded", "runner")

    def __init__(self, done, device, values: list, leaves: list, flags: list, padded, runner):
        self.done = done
        self.device = device
        self.values = values
        """What the program computes: each output's value before the barrier."""
        self.leaves = leaves
        self.flags = flags
        """The flags of its value checks (:mod:`lazycore.runtime.checks`): while
        any are unread, nothing may read or use its results before it is waited for."""
        self.padded = padded
        """The :class:`~lazycore.runtime.buckets.Bucketed` program it runs (its
        results are padded), or None."""
        self.runner = runner
        """Runs a failure's retries (:func:`lazycore.runtime.standalone.run_alone`)."""

    def block_until_ready(self) -> None:
        """Wait for the program; a failure is settled, not raised (reads raise it)."""
        with LOCK:  # (a failure settles in leaves other threads' handles hold)
            self._wait()

    def _wait(self) -> None:
        try:
            self.done.block_until_ready()
        except Exception as e:
            values, leaves = self.values, self.leaves
            if values is None:  # settled already
                return
            results = failures.settle(self.device, values, ProgramError("run", e), self.runner, whole=True)
            for k, (leaf, r) in enumerate(zip(leaves, results)):
                if type(r) is Failure:
                    failures.mark(leaf, r)
                else:
                    if self.padded is not None:  # computed again unpadded: laid out as the padded result
                        r = self.padded.refill(k, r, self.device)
                    leaf.buffer = laid_out(r, leaf.sharding, self.device)
            on_failure(self.device, results)
        else:
            if self.flags and self.values is not None:
                found = checks.failed(self.values, self.flags)
                if found is not None:
                    for leaf, f in zip(self.leaves, found):
                        if f is not None:
                            failures.mark(leaf, f)
                    on_failure(self.device, found)
        finally:
            self.values = self.leaves = self.flags = self.padded = None  # the graph it ran may go now


def checked_first(device) -> None:
    """Wait for the program running on ``device`` when it has value checks:
    the values they fail must not feed the next program."""
    running = device.running
    if running is not None and running.flags:
        device.wait()


def launch(step, transforms) -> None:
    """Start the step's program; the pending handles hold its results at once
    (a failure found while waiting is settled in these leaves: :class:`Launch`).
    Waits for the program before it, and for this one when ``step.wait``.
    Raises :class:`~lazycore.runtime.failures.ProgramError` when it cannot start."""
    device, exe = step.device, step.exe
    args = arguments(step.data, step.packs, device, step.stacked)
    with events.timed("execute"):
        try:
            results, done = exe.launch(args)
        except Exception as e:
            raise ProgramError("run", e) from e
        transforms.results(step, results)
        leaves = stacks.leaves(results, step.out_types, exe.rows, exe.output_types, exe.output_shardings, device)
        value = transforms.value(step)
        values = [None] * len(leaves)
        for t, k in zip(step.pending, step.slots):
            values[k] = t._value
            t._value = value(k, leaves[k])
            t._held = id(leaves[k])
        # At most one program runs while Python traces the next step: the
        # one before this must be done before the barrier returns (so a loop
        # that never looks at a value cannot queue up work and memory).
        previous = device.running
        device.running = Launch(done, device, values, leaves, step.flags, step.padded, step.runner)
        if previous is not None:
            previous.block_until_ready()
        if step.wait:
            device.wait()


def settle(step) -> int:
    """The step is done: counted and announced, and the next one starts.
    Returns the number of handles updated."""
    events.bump("executions")
    events.bump("donated_buffers", len(step.donate))
    events.emit("barrier", step.walk, step.device, step.hit, step.donate, step.pipeline, step.loaded)
    LOG.reset()  # the next step starts: everything before it is old
    heap.freeze_at_barrier(ran_program=True)
    return len(step.pending)
