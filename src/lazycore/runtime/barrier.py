"""Barriers: turn the pending live tensors of a device into device data.

At a barrier (:func:`mark_step`, or a value being observed) every live handle
of the device whose value is still a computation becomes an output of ONE
program. The graph is walked once (post-order, shared nodes visited once);
device-data and scalar leaves become the parameters, in first-visit order.
The walk also yields the compile-cache key, so on a hit nothing here touches
MLIR. On a miss the program comes from the persistent compile cache
(:mod:`lazycore.runtime.diskcache`), or the walk is replayed as a
``func.func @main`` of ``lazy`` ops and compiled with the default pipeline. A step whose graph repeats an earlier
step's (its step log encodes the same) recalls that walk's results instead of
walking (:mod:`lazycore.stepplans`).

Donation: because every live tensor with pending work is an output and every
output is evaluated in full (the LazyTensor paper's two conditions), an input
buffer that lazycore made and that no live handle holds any more (it was
overwritten in place, or its handle died) is dead after this program, so it
may become the storage of an output of the same type. Buffers handed in by
the user are never donated.

A program that fails to lower, compile or run does not make the barrier
raise: :mod:`lazycore.runtime.failures` settles which outputs hold the error and
computes the others. A failure found only when the program is waited for
(it runs asynchronously) is settled then, in the result leaves the handles
already hold; until that wait the barrier keeps the graph it ran (a
:class:`_Launch`), and with it that graph's inputs that were not donated.
So are value checks (:mod:`lazycore.runtime.checks`): the program returns
their flags after its outputs, and the outputs a true flag fails are marked
when the program is waited for.
"""

from __future__ import annotations

from array import array

import numpy as np

from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.graph import LOG, Data, Node, Value
from lazycore.ir.regions import Arg
from lazycore.ir import heap
from lazycore.ir.context import LOCK
from lazycore.runtime import device as _device
from lazycore.runtime import buckets, checks, closures, failures, programs, stacks, stepplans
from lazycore.runtime.cache import CACHE, PACKS
from lazycore.runtime.failures import Failure, ProgramError


class Walk:
    """The graph behind some outputs, in post-order, and its structural encoding."""

    def __init__(self, outputs: list[Value]):
        self.outputs = outputs
        self.order: list[Node] = []
        self.params: list[Node] = []
        order, params = self.order, self.params
        pos: dict[Node, int] = {}  # nodes hash by identity
        digests: list[bytes] = []
        edges: list[int] = []
        put = edges.append
        for out in outputs:
            if out[0] in pos:
                continue
            stack = [out[0]]
            while stack:
                node = stack[-1]
                if node in pos:  # pushed twice before it was placed
                    stack.pop()
                    continue
                operands = node.operands
                # push the operands not placed yet (first operand on top), and
                # place the node once none is left
                n = len(stack)
                for o in reversed(operands):
                    if type(o) is Value:
                        if o[0] not in pos:
                            stack.append(o[0])
                    else:
                        for v in reversed(o):
                            if v[0] not in pos:
                                stack.append(v[0])
                if len(stack) != n:
                    continue
                stack.pop()
                pos[node] = len(order)
                order.append(node)
                digests.append(node.digest)
                # per node: -1 for a leaf, else the operand count and each
                # operand's (walk position, result index); a variadic group
                # is -2, its size, then its members' pairs
                if node.is_leaf:
                    params.append(node)
                    put(-1)
                    continue
                put(len(operands))
                for o in operands:
                    if type(o) is Value:
                        put(pos[o[0]])
                        put(o[1])
                    else:
                        put(-2)
                        put(len(o))
                        for v in o:
                            put(pos[v[0]])
                            put(v[1])
        put(-3)
        for out in outputs:
            put(pos[out[0]])
            put(out[1])
        # the node count, the fixed-width digests, then the self-delimiting
        # edge list: unambiguous
        self.encoding = len(order).to_bytes(8, "little") + b"".join(digests) + array("q", edges).tobytes()
        # Scalar leaves travel packed, one vector per dtype (one transfer each
        # instead of one per number); entry arguments are the device-data
        # leaves first, then the packs. Both orders follow the walk, which the
        # encoding pins, so equal keys mean equal layouts.
        self.data: list[Node] = []
        self.packs: dict[str, list[Node]] = {}
        for leaf in self.params:
            if type(leaf) is Data:
                self.data.append(leaf)
            elif type(leaf) is Arg:
                raise TypeError(
                    "a value computed from the carried values or operands of a loop or branch body was read while "
                    "the body is traced (lazycore.while_loop, fori_loop, scan, cond): it has no value until the "
                    "program runs; use lazycore.cond or a select instead of Python control flow on it")
            else:
                self.packs.setdefault(leaf.types[0].dtype, []).append(leaf)


def plan_donation(data: list[Data], out_types: list, held: set[int], successors: dict | None = None
                  ) -> dict[int, int]:
    """Parameter index -> output index for dead, lazycore-made input buffers
    (``data``: the device-data parameters in argument order).

    ``successors`` (id of a leaf -> output index, :func:`successors`): a
    buffer goes to the new value of the handle that held it first. XLA
    computes an update in place only when the buffer goes to its own
    successor; paired with another output of the same type, the buffer is
    still read after that output is written, and XLA copies it (a training
    step of 116 buffers made 75 copies of parameters that way)."""
    plan: dict[int, int] = {}
    taken: set[int] = set()
    free = []
    for i, leaf in enumerate(data):
        if not leaf.owned or id(leaf) in held:
            continue
        j = successors.get(id(leaf)) if successors else None
        if j is not None and j not in taken and out_types[j] == leaf.types[0]:
            plan[i] = j
            taken.add(j)
        else:
            free.append(i)
    for i in free:
        t = data[i].types[0]
        for j, out_type in enumerate(out_types):
            if j not in taken and out_type == t:
                plan[i] = j
                taken.add(j)
                break
    return dict(sorted(plan.items()))


def successors(pending: list, slots: list) -> dict[int, int]:
    """id of the device data each pending handle held after the last barrier
    or its upload -> the output index of the handle's new value."""
    out: dict[int, int] = {}
    for t, k in zip(pending, slots):
        held = getattr(t, "_held", None)
        if held is not None:
            out.setdefault(held, k)
    return out


def run_alone(device, values: list[Value], stacks: bool = False) -> list:
    """The buffers of ``values`` computed by a program of their own that
    donates nothing, once it has finished (the retries of
    :func:`lazycore.runtime.failures.settle`, and the programs of
    :mod:`lazycore.runtime.stacks`: with ``stacks``, its compiles and runs
    count in ``stack_compiles`` and ``stack_executions``, and its graph is
    not one of the barriers'); raises
    :class:`~lazycore.runtime.failures.ProgramError`."""
    with LOCK:
        return _run_alone(device, values, stacks)


def _run_alone(device, values: list[Value], stacks: bool) -> list:
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
    args = _arguments(walk.data, list(walk.packs.items()), device)
    with events.timed("execute"):
        try:
            results, done = exe.launch(args)
            done.block_until_ready()
        except Exception as e:
            raise ProgramError("run", e) from e
    events.bump("stack_executions" if stacks else "executions")
    results, flags = results[:len(values)], results[len(values):]
    found = checks.failed(values, flags) if flags else None
    if found is not None:
        results = [r if f is None else f for r, f in zip(results, found)]
    return results


class _Launch:
    """A program a barrier started without waiting for it (``device.running``):
    if it turns out to have failed, its results are computed again (or marked
    failed) in the leaves the handles already hold, and so are the outputs
    its value checks fail."""

    __slots__ = ("done", "device", "values", "leaves", "flags", "padded")

    def __init__(self, done, device, values: list[Value], leaves: list[Data], flags: list, padded=None):
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
            results = failures.settle(self.device, values, ProgramError("run", e), whole=True)
            for k, (leaf, r) in enumerate(zip(leaves, results)):
                if type(r) is Failure:
                    failures.mark(leaf, r)
                else:
                    if self.padded is not None:  # computed again unpadded: laid out as the padded result
                        r = self.padded.refill(k, r, self.device)
                    leaf.buffer = _laid_out(r, leaf.sharding, self.device)
            _on_failure(self.device, results)
        else:
            if self.flags and self.values is not None:
                found = checks.failed(self.values, self.flags)
                if found is not None:
                    for leaf, f in zip(self.leaves, found):
                        if f is not None:
                            failures.mark(leaf, f)
                    _on_failure(self.device, found)
        finally:
            self.values = self.leaves = self.flags = self.padded = None  # the graph it ran may go now


def _arguments(data: list[Data], packs, device, args=None) -> list:
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


def _recalled(plan, held: set[int], pipeline: str, device, pending):
    """The step's parameters, compile key and donation plan from a recalled
    plan; None when its program is no longer cached (the walk then compiles)."""
    nodes = LOG.nodes
    data = [nodes[i] for i in plan.data]
    if settings.donation:
        can = tuple([leaf.owned and id(leaf) not in held for leaf in data])
    else:
        can = None
    # everything else make_key covers besides the graph
    context = (can, pipeline, device.name, programs.environment())
    known = plan.keys.get(context)
    if known is None:
        donate = plan_donation(data, plan.out_types, held, successors(pending, plan.slots)) if settings.donation else {}
        known = plan.keys[context] = (programs.make_key(plan.encoding, device, donate, pipeline), donate)
    key, donate = known
    if key not in CACHE:
        return None
    packs = [(dtype, [nodes[i] for i in group]) for dtype, group in plan.packs]
    return data, packs, key, donate


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
    events.emit("barrier_start", device)
    heap.freeze_at_barrier(ran_program=False)
    running = device.running
    if running is not None and running.flags:
        device.wait()  # its checks may fail values this step's program would read
    pending, held = [], set()
    for t in device.arena.live():
        node = t._value.node
        if type(node) is Data:
            held.add(id(node))
            stacks.held_stack(node, held)
        elif type(node) is buckets.Cut:  # a padded result's value: no work (lazycore.runtime.buckets)
            held.add(id(node.source))
            stacks.held_stack(node.source, held)
        else:
            pending.append(t)
    if not pending:
        LOG.reset()
        if wait:
            device.wait()
        return 0
    if device.pjrt is None:
        raise RuntimeError(f"device {device.name} cannot run programs (no PJRT device behind it)")
    walk = bucketed = None
    with events.timed("trace"):
        pipeline = settings.pipeline  # None: the default one
        # a step like one before it recalls that step's walk (lazycore.stepplans);
        # LAZYCORE_DEBUG reports need the walk itself
        fp = stepplans.fingerprint(pending) if not settings.debug else None
        plan = stepplans.get(fp) if fp is not None else None
        recalled = _recalled(plan, held, pipeline, device, pending) if plan is not None else None
        if recalled is not None:
            data, packs, key, donate = recalled
            slots, out_types, counts = plan.slots, plan.out_types, plan.counts
            encoding = plan.encoding
        else:
            index: dict[tuple[int, int], int] = {}
            outputs: list[Value] = []
            slots = []
            for t in pending:
                v = t._value
                k = (id(v.node), v.index)
                if k not in index:
                    index[k] = len(outputs)
                    outputs.append(v)
                slots.append(index[k])
            walk = Walk(outputs)
            encoding = walk.encoding
            data, packs = walk.data, list(walk.packs.items())
            out_types = [out.type for out in outputs]
            counts = (len(walk.order), len(outputs), len(walk.params))
            donate = plan_donation(data, out_types, held, successors(pending, slots)) if settings.donation else {}
            key = programs.make_key(walk.encoding, device, donate, pipeline)
            if fp is not None:
                stepplans.remember(fp, walk, slots, out_types, counts)

            def keyed(data, out_types, encoding):
                donate = plan_donation(data, out_types, held) if settings.donation else {}
                return donate, programs.make_key(encoding, device, donate, pipeline)

            bucketed = buckets.prepare(walk, device, keyed)
            if bucketed is not None:  # marked inputs padded: the program of their buckets
                walk = bucketed.walk or walk  # None: its program is cached
                data, packs, out_types = bucketed.data, bucketed.packs, bucketed.out_types
                donate, key = bucketed.donate, bucketed.key
    events.record_graph(*counts)
    if failures.seen[0] and any(type(leaf.storage) is Failure for leaf in data):
        return _contain(device, pending, slots, len(out_types), None, wait)
    exe = CACHE.get(key)
    hit = exe is not None
    loaded = False
    if exe is None:
        # parameters live handles hold that its loops would read stacked
        # (a forward pass over weights it does not change): its variant
        # that leaves its stacks alone, under this key too (always right)
        mode = "keep" if not settings.donation or (bucketed is None and stacks.keeps(walk, held, device)) else True
        try:
            exe, loaded = _new_program(key, walk, device, donate, pipeline, mode)
        except ProgramError as e:
            return _contain(device, pending, slots, len(out_types), e, wait)
    stacked = None
    if exe.arguments is not None:  # it takes stacks (lazycore.runtime.stacks)
        stacked, keep = stacks.arguments(exe.arguments, data, held, device, bucketed is None)
        if (keep or not settings.donation) and not exe.keeps:  # the variant that leaves its stacks alone
            kept = programs.make_key(encoding, device, donate, pipeline, stacked="keep")
            exe = CACHE.get(kept)
            if exe is None:
                if walk is None:
                    walk = Walk(_outputs(pending, slots, len(out_types)))
                try:
                    exe, loaded = _new_program(kept, walk, device, donate, pipeline, "keep")
                except ProgramError as e:
                    return _contain(device, pending, slots, len(out_types), e, wait)
    args = _arguments(data, packs, device, stacked)
    with events.timed("execute"):
        try:
            results, done = exe.launch(args)
        except Exception as e:
            return _contain(device, pending, slots, len(out_types), ProgramError("run", e), wait)
        # the handles hold the results at once: a failure found while waiting
        # is settled in these leaves (_Launch)
        n = exe.value_count(len(out_types))
        leaves = stacks.leaves(results, out_types, exe.rows, exe.output_types, exe.output_shardings, device)
        values = [None] * len(leaves)
        for t, k in zip(pending, slots):
            values[k] = t._value
            t._value = Value(leaves[k], 0) if bucketed is None else bucketed.value(k, leaves[k])
            t._held = id(leaves[k])
        # At most one program runs while Python traces the next step: the
        # one before this must be done before the barrier returns (so a loop
        # that never looks at a value cannot queue up work and memory).
        flags = results[n:]  # the value checks' (lazycore.runtime.checks)
        previous, device.running = device.running, _Launch(done, device, values, leaves, flags, bucketed)
        if previous is not None:
            previous.block_until_ready()
        if wait:
            device.wait()
    events.bump("executions")
    events.bump("donated_buffers", len(donate))
    events.emit("barrier", walk, device, hit, donate, pipeline, loaded)
    LOG.reset()  # the next step starts: everything before it is old
    heap.freeze_at_barrier(ran_program=True)
    return len(pending)


def _new_program(key: bytes, walk: Walk, device, donate: dict[int, int], pipeline, stacked):
    """The walk's program, loaded or compiled (:func:`lazycore.runtime.programs.program`)
    and cached under ``key``, and whether it was loaded; raises
    :class:`~lazycore.runtime.failures.ProgramError`."""
    events.emit("compile", len(walk.order), walk)
    exe, loaded = programs.program(walk, device, donate, pipeline, stacked=stacked)
    CACHE.put(key, exe)
    events.emit("program", exe, device, walk, loaded)
    return exe, loaded


def _outputs(pending, slots: list[int], n_outputs: int) -> list[Value]:
    """The values of a barrier's outputs, in output order."""
    values: list = [None] * n_outputs
    for t, k in zip(pending, slots):
        values[k] = t._value
    return values


def _contain(device, pending, slots: list[int], n_outputs: int, error, wait: bool) -> int:
    """The barrier's program failed with ``error`` (None: some inputs are
    failed values): settle every output (:func:`lazycore.runtime.failures.settle`)
    and give each handle its buffer or its failure."""
    values = _outputs(pending, slots, n_outputs)
    results = failures.settle(device, values, error)
    leaves = []
    for r, v in zip(results, values):
        if type(r) is Failure:
            leaf = Data(None, v.type, owned=False)
            failures.mark(leaf, r)
        else:
            leaf = Data(r, v.type, True, _layout_of(r, v.type.rank, device))
        leaves.append(leaf)
    for t, k in zip(pending, slots):
        t._value = Value(leaves[k], 0)
    _on_failure(device, results)
    if wait:
        device.wait()
    LOG.reset()
    return len(pending)


def _layout_of(buffer, rank: int, device):
    """The :class:`~lazycore.runtime.pjrt.Sharding` of a result buffer on a mesh (None on one device)."""
    if isinstance(device, _device.Mesh):
        return device.pjrt.from_jax(buffer.sharding, rank)
    return None


def _laid_out(buffer, sharding, device):
    """``buffer`` as ``sharding`` says (a retried program's result may come
    laid out otherwise than the leaf it fills, whose digest says how)."""
    if sharding is not None and _layout_of(buffer, len(buffer.shape), device) != sharding:
        return device.pjrt.put(buffer, sharding)
    return buffer


def _on_failure(device, results: list) -> None:
    failed = [r for r in results if type(r) is Failure]
    events.bump("failed_outputs", len(failed))
    if failed:
        events.emit("failure", device, len(failed), len(results), failed[0].message)


def mark_step(wait: bool = False, devices=None) -> None:
    """Barrier on every device (or the given ones): all pending live tensors run.

    By default it returns as soon as the program has started (after the
    previous step's program has finished); reading any value waits for it.
    ``wait=True`` returns once it has finished."""
    with LOCK:  # one step for all the devices: no thread records between their barriers
        _mark_step(wait, devices)
        if closures.PENDING or closures.ERRORS:  # the step's closures, after its programs (lazycore.runtime.closures)
            closures.run(closures.take())


def _mark_step(wait: bool, devices) -> None:
    for d in devices if devices is not None else _device.known_devices():
        sync(_device.get(d), wait)
