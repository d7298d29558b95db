"""A barrier's last stages: launching its program, and settling it.

The program runs asynchronously: the pending handles hold its result leaves
at once, and at most one program runs while Python traces the next step
(the one before must be done before a barrier returns). A failure found only
when the program is waited for is settled then, in the result leaves the
handles already hold; until that wait the :class:`Launch` keeps the graph it
ran, and with it that graph's inputs that were not donated. So are value
checks (:mod:`lazycore.runtime.checks`): the program returns their flags
after its outputs, and the outputs a true flag fails are marked when the
program is waited for. The next barrier launches its program without
waiting for those flags: when they fail values that program read, its
outputs computed from them fail too (:meth:`Launch.poison`), as if it had
waited.
"""

from __future__ import annotations

from lazycore.ir import events, heap
from lazycore.ir.context import LOCK
from lazycore.ir.failure import Failure
from lazycore.ir.graph import LOG
from lazycore.ir.walk import Walk
from lazycore.runtime import checks, failures, hostreads, stacks
from lazycore.runtime.containment import laid_out, on_failure
from lazycore.runtime.failures import ProgramError
from lazycore.runtime.standalone import arguments


class Launch:
    """A program a barrier started without waiting for it (``device.running``):
    if it turns out to have failed, its results are computed again (or marked
    failed) in the leaves the handles already hold, and so are the outputs
    its value checks fail."""

    __slots__ = ("done", "device", "values", "leaves", "flags", "padded", "runner", "poisoned")

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
        self.poisoned: dict | None = None
        """Nodes of its graph (by id) computed from inputs the program before
        it failed after it started (:meth:`poison`), with their failure."""

    def block_until_ready(self) -> bool:
        """Wait for the program; a failure is settled, not raised (reads
        raise it). Whether some of its results failed now."""
        with LOCK:  # (a failure settles in leaves other threads' handles hold)
            return self._wait()

    def _wait(self) -> bool:
        try:
            self.done.block_until_ready()
        except Exception as e:
            values, leaves = self.values, self.leaves
            if values is None:  # settled already
                return False
            results = failures.settle(self.device, values, ProgramError("run", e), self.runner, whole=True)
            for k, (leaf, r) in enumerate(zip(leaves, results)):
                if type(r) is Failure:
                    failures.mark(leaf, r)
                else:
                    if self.padded is not None:  # computed again unpadded: laid out as the padded result
                        r = self.padded.refill(k, r, self.device)
                    leaf.buffer = laid_out(r, leaf.sharding, self.device)
            on_failure(self.device, results)
            return any(type(r) is Failure for r in results)
        else:
            if self.flags and self.values is not None:
                found = checks.failed(self.values, self.flags, self.poisoned,
                                       lambda vs: self.runner(self.device, vs))
                if found is not None:
                    for leaf, f in zip(self.leaves, found):
                        if f is not None:
                            failures.mark(leaf, f)
                    on_failure(self.device, found)
                    return True
            return False
        finally:
            self.values = self.leaves = self.flags = self.padded = self.poisoned = None  # the graph it ran may go now

    def poison(self) -> None:
        """The program before this one failed some of its results after this
        one started (its value checks, read once it finished; or its run):
        the outputs computed from them fail as they would have had this
        program started after that wait, with the failure of the input (a
        check's names the line that recorded it), and the checks computed
        from them are not this program's to report."""
        values = self.values
        if values is None:
            return
        walk = Walk(values)
        seeds = {id(leaf): leaf.storage for leaf in walk.data if type(leaf.storage) is Failure}
        if not seeds:
            return
        bad = self.poisoned = failures.spread(walk, seeds)
        results: list = [None] * len(values)
        for k, (leaf, v) in enumerate(zip(self.leaves, values)):
            found = bad.get(id(v[0]))
            if found is None:
                continue
            if found.op is None:  # a failed leaf names no op: the value names its own
                found = failures.node_failure(v[0], found.message, found.stage, found.cause, found.eager)
            failures.mark(leaf, found)
            results[k] = found
        on_failure(self.device, results)


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
            hostreads.keep_number(leaves[k], t._value)
            t.take(value(k, leaves[k]))  # (a padded result's region is no device data: Arena.pending)
            t._held = id(leaves[k])
        # At most one program runs while Python traces the next step: the
        # one before this must be done before the barrier returns (so a loop
        # that never looks at a value cannot queue up work and memory).
        # The one before may fail some of its results only now (its value
        # checks are read once it has finished): this program, started
        # meanwhile, then fails what it computed from them.
        previous = device.running
        current = device.running = Launch(done, device, values, leaves, step.flags, step.padded, step.runner)
        if previous is not None and previous.block_until_ready():
            current.poison()
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
