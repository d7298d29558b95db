"""Values kept stacked between programs: the layers of a rolled loop.

A program whose identical layers were rolled into one loop
(:mod:`lazycore.runtime.rolling`) holds each layer's new weights, optimizer
moments and gradients as rows of one stacked array. Handing every row back
as a buffer of its own cost a copy kernel per row (about 600 of the 881
fusions XLA:CPU compiled for the 12-layer GPT step's first program, a third
of its compile time), and the next step stacked the rows again. So a
barrier's program returns the stack itself (:class:`Stack`), and each row's
handle holds a :class:`~lazycore.ir.graph.Data` leaf naming its row
(``leaf.row``). The next program takes the stack as one argument
(:func:`arguments`), and a loop over the same rows reads it in place and
writes it back, donated, with no copy on either side.

A row becomes a buffer of its own only when something outside a program
reads it (a transfer to the host, a resharding): :meth:`Stack.row` runs a
``dynamic_slice`` program, one per stack type, whatever the row; the rows
a program takes as arguments of their own are sliced by one program together
(:func:`_rows`). Rows that
are not one whole stack, in order, are stacked by a program of their own
first (:func:`_stacked`). Both kinds of program count in the
``stack_compiles`` and ``stack_executions`` counters, not in ``compiles``
and ``executions``, and are not among the barriers' graphs
(``metrics.graph_sizes()``): they are rolling's bookkeeping, not the
user's graphs. A stack that live handles
hold rows of keeps its values: the step runs the variant of its program
that donates no stack (``stacked="keep"``, :func:`keeps`).
"""

from __future__ import annotations

from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import TensorType
from lazycore.ir.config import override, settings
from lazycore.ir.graph import LOG, Data, Scalar, Value, make_node
from lazycore.runtime.standalone import run_alone


class Stack:
    """A stacked device buffer whose rows are the values of some leaves."""

    __slots__ = ("buffer", "type", "device")

    def __init__(self, buffer, t: TensorType, device):
        self.buffer = buffer
        self.type = t
        self.device = device
        """The lazycore device that made it (the one that runs :meth:`row`)."""

    def row(self, index: int):
        """Row ``index`` as a buffer of its own (a program that slices it)."""
        on, LOG.on = LOG.on, False  # not part of the user's step (lazycore.stepplans)
        try:
            value = _row_value(Value(Data(self.buffer, self.type, owned=False), 0), index)
        finally:
            LOG.on = on
        (buffer,) = _run(self.device, [value])
        return buffer

    def __repr__(self) -> str:
        return f"Stack({self.type})"


def arguments(plan: tuple, data: list[Data], held: set[int], device, may_keep: bool = True) -> tuple[list, bool]:
    """The device-data arguments of a program that takes stacks
    (:attr:`~lazycore.runtime.pjrt.Executable.arguments`: per argument a
    parameter's index, or the indices of the parameters stacked into it),
    and whether the program must leave its stacks alone (its ``"keep"``
    variant: :func:`lazycore.runtime.programs.program`).

    A group that is exactly the rows of one stack, in order, passes that
    stack: as a training step hands the next one its weights, donated; when
    live handles hold rows of it (``held``), kept. Any other group (the first
    step's uploaded parameters, rows of several stacks) is stacked by a
    program of its own first; when live handles hold some of its members
    (weights a forward pass reads again and again), they become rows of the
    new stack, kept, so the next call passes it as it is. ``may_keep``
    False: no stack is kept (a held one is stacked again)."""
    args: list = []
    slow: list[tuple[int, tuple]] = []
    keep = False
    # rows passed on their own (read outside the loops of this program, not
    # of the one that stacked them: a first step's, whose optimizer had no
    # state yet): sliced by one program, not one a row
    unsliced = [data[e] for e in plan if type(e) is int and data[e].row is not None and data[e]._buffer is None]
    if len(unsliced) > 1:
        for leaf, buffer in zip(unsliced, _rows(unsliced, device)):
            leaf._buffer = buffer  # as Data.buffer keeps a row's, the leaf still naming its row
    for entry in plan:
        if type(entry) is int:
            args.append(data[entry].buffer)
            continue
        stack = _whole(entry, data)
        if stack is not None and (id(stack) not in held or may_keep):
            keep |= id(stack) in held
            args.append(stack.buffer)
            continue
        slow.append((len(args), entry))
        args.append(None)
    if slow:
        groups = [[data[i] for i in group] for _, group in slow]
        for (at, _), group, buffer in zip(slow, groups, _stacked(groups, device)):
            args[at] = buffer
            if may_keep and any(id(leaf) in held for leaf in group):
                keep = True
                stack = Stack(buffer, TensorType((len(group),) + tuple(group[0].types[0].shape),
                                                 group[0].types[0].dtype), device)
                for r, leaf in enumerate(group):
                    leaf.row = (stack, r)  # its own buffer, if it has one, stays
                    device.arena.restacked(leaf)  # (its holders hold the stack: the next barrier keeps it)
    return args, keep


def keeps(walk, held: set[int], device) -> bool:
    """Whether a new program of ``walk`` should leave its stacks alone: live
    handles hold parameters its loops read stacked (or rows of theirs)."""
    if not settings.roll_loops or not held:
        return False
    from lazycore.runtime import rolling  # (the loop matcher: only with roll_loops on)

    data = walk.data
    for group in rolling.stack_groups(walk, device):
        for i in group:
            leaf = data[i]
            if id(leaf) in held or (leaf.row is not None and id(leaf.row[0]) in held):
                return True
    return False


def _whole(group: tuple, data: list[Data]) -> Stack | None:
    """The stack whose rows the group's leaves are, in order, or None."""
    first = data[group[0]].row
    if first is None:
        return None
    stack = first[0]
    if stack.type.shape[0] != len(group):
        return None
    for r, i in enumerate(group):
        row = data[i].row
        if row is None or row[0] is not stack or row[1] != r:
            return None
    return stack


def _stacked(groups: list[list[Data]], device) -> list:
    """Each group's values stacked into a new buffer, by one program. A
    member that is a row of a stack is sliced out of it there (a loop that
    wrote the rows another one reads, in other runs or another order)."""
    on, LOG.on = LOG.on, False  # not part of the user's step (lazycore.stepplans)
    try:
        concatenate, reshape, slice_ = spec_of("concatenate"), spec_of("reshape"), spec_of("slice")
        whole_of: dict[int, Value] = {}  # id(stack) -> its value, one parameter per stack

        def row_of(leaf: Data, one: TensorType) -> Value:
            if leaf.row is None:
                return Value(make_node(reshape, (Value(leaf, 0),), {"shape": one.shape}, (one,)), 0)
            stack, r = leaf.row
            whole = whole_of.get(id(stack))
            if whole is None:
                whole = whole_of[id(stack)] = Value(Data(stack.buffer, stack.type, owned=False), 0)
            start = (r,) + (0,) * (one.rank - 1)
            attrs = {"start": start, "limit": (r + 1,) + tuple(one.shape[1:]), "strides": (1,) * one.rank}
            return Value(make_node(slice_, (whole,), attrs, (one,)), 0)

        values = []
        for group in groups:
            t = group[0].types[0]
            one = TensorType((1,) + tuple(t.shape), t.dtype)
            rows = [row_of(leaf, one) for leaf in group]
            whole = rows[0]
            for n, row in enumerate(rows[1:], 2):  # lazy.concatenate is binary
                wt = TensorType((n,) + tuple(t.shape), t.dtype)
                whole = Value(make_node(concatenate, (whole, row), {"dim": 0}, (wt,)), 0)
            values.append(whole)
    finally:
        LOG.on = on
    return _run(device, values)


def _row_value(whole: Value, index: int) -> Value:
    """Row ``index`` of the stack ``whole`` (the row a runtime scalar: one
    program per stack type, whatever the row)."""
    t = whole.type
    starts = tuple(Value(Scalar(i, "i64"), 0) for i in (index,) + (0,) * (t.rank - 1))
    one = TensorType((1,) + tuple(t.shape[1:]), t.dtype)
    sliced = make_node(spec_of("dynamic_slice"), (whole, starts), {"sizes": one.shape}, (one,))
    row_t = TensorType(tuple(t.shape[1:]), t.dtype)
    return Value(make_node(spec_of("reshape"), (Value(sliced, 0),), {"shape": row_t.shape}, (row_t,)), 0)


def _rows(leaves: list[Data], device) -> list:
    """Each leaf's row (``leaf.row``) as a buffer of its own, by one program."""
    on, LOG.on = LOG.on, False  # not part of the user's step (lazycore.stepplans)
    try:
        whole_of: dict[int, Value] = {}  # id(stack) -> its value, one parameter per stack
        values = []
        for leaf in leaves:
            stack, index = leaf.row
            whole = whole_of.get(id(stack))
            if whole is None:
                whole = whole_of[id(stack)] = Value(Data(stack.buffer, stack.type, owned=False), 0)
            values.append(_row_value(whole, index))
    finally:
        LOG.on = on
    return _run(device, values)


def _run(device, values: list[Value]) -> list:
    """``values`` computed by a program of their own, counted as a stacks'
    program; never rolled (its rows are copies, not layers)."""
    with override(roll_loops=False):
        return run_alone(device, values, stacks=True)


def leaves(results: list, out_types: list, rows, result_types, shardings, device) -> list[Data]:
    """One leaf per output of a program's ``results``: ``rows`` (the
    executable's, None: one result per output) says which outputs are rows
    of a returned stack."""
    if rows is None:
        return [Data(buf, t, True, layout) for buf, t, layout in zip(results, out_types, shardings)]
    made: dict[int, Stack] = {}
    out = []
    for t, (j, r) in zip(out_types, rows):
        if r < 0:
            out.append(Data(results[j], t, True, shardings[j]))
            continue
        stack = made.get(j)
        if stack is None:
            stack = made[j] = Stack(results[j], result_types[j], device)
        out.append(Data(None, t, True, row=(stack, r)))
    return out


def held_stack(node, held: set[int]) -> None:
    """Adds the stack of ``node`` (a leaf a live handle holds) to ``held``, if it is a row."""
    row = node.row
    if row is not None:
        held.add(id(row[0]))
