"""Reads: a lazy value's device data or host copy, after the barrier that computes it.

:class:`~lazycore.runtime.device.Device` reads through here
(:meth:`lazycore.ir.tensor.LazyTensor.numpy`), so nothing here knows devices
beyond the handle's own; :mod:`lazycore.runtime.transfer` hands these on
with the uploads.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect.types import is_bool, is_int, to_numpy_dtype
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.context import TRACE, locked
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Node, Scalar, Value, operand_values
from lazycore.ir.memo import Memo
from lazycore.ir.tensor import LazyTensor
from lazycore.ir.walk import Walk
from lazycore.runtime import barrier, buckets, hostcopy, hostreads, pjrt
from lazycore.runtime.failures import ProgramError

# a read's barrier and copy are one step that no other thread's barrier
# splits (it could donate the buffer being read): docs/threads.md
_locked = locked

_CONSTANTS_LOOKED_AT = 256
"""Nodes :func:`_constants_behind` looks at, at most: a value made of
constants alone is a few ops; a read of a step's loss meets a parameter
within a few levels."""

_KEPT_BYTES = 64 * 1024
"""The largest value :data:`_CONSTANT_READS` keeps: the masks and sizes
libraries read are a few bytes a position; a kept buffer stays on the
device until the memo is emptied."""

_CONSTANT_READS = Memo("runtime.constant_reads", 64)
"""``(device, pipeline, graph encoding, scalar parameters' bytes)`` -> the
buffer a read of a value made of constants alone computed
(:func:`_read_alone`): transformers reads the same all-ones mask at every
step, and such a value is the same every time (the encoding holds every
constant's value, the bytes every Python number's), so only its first read
runs a program."""


def _constants_behind(value: Value, data: list | None = None) -> set[int] | None:
    """The ids of the nodes behind ``value`` when it is made of constants
    alone (plain ops down to ops without operands, such as constants and
    iotas, and Python numbers: ``fast_all``'s ``tensor.numel()`` is a scalar
    parameter), else None: device data, a region, a body's placeholder, or
    more than :data:`_CONSTANTS_LOOKED_AT` nodes. Breadth first, so a value
    of the step meets device data early. ``data``: a list that takes the
    plain device data leaves met (of one device, whole, not failed) instead
    of refusing them."""
    seen, todo, i = {id(value[0])}, [value[0]], 0
    while i < len(todo):
        node = todo[i]
        i += 1
        if i > _CONSTANTS_LOOKED_AT:
            return None
        if type(node) is not Node:
            if type(node) is Scalar:
                continue
            if (data is not None and type(node) is Data and node.row is None and node.valid is None
                    and node.sharding is None and not node.dynamic and type(node.storage) is not Failure):
                data.append(node)
                continue
            return None
        for v in operand_values(node):
            n = v[0]
            if id(n) not in seen:
                seen.add(id(n))
                todo.append(n)
    return seen


def _cuts(t: LazyTensor, behind: set[int]) -> bool:
    """Whether a barrier for ``t`` would run other pending work too: a live
    handle whose value is a computation outside ``behind`` (``t``'s graph)."""
    for h in reversed(t.device.arena.pending()):  # the newest first: a step's pending work is recent
        node = h._value[0]
        if id(node) not in behind and buckets.padded_leaf(node) is None:
            return True
    return False


_SHARED_LOOKED_AT = 100_000
"""Nodes of the other live values' pending work :func:`_shares` looks at, at
most (past them it answers that the work is shared: the barrier's way)."""


def _float_work(node, memo: dict) -> bool:
    """Whether ``node`` computes floats from floats: a float device data
    leaf, or a float result of an op with such an operand (not an index
    check's sum of converted booleans, a broadcast constant, an order)."""
    got = memo.get(id(node))
    if got is None:
        floats = any(not (is_int(x.dtype) or is_bool(x.dtype)) for x in node.types)
        if type(node) is Data:
            got = floats
        elif type(node) is not Node:
            got = False
        else:
            operands = [_float_work(v[0], memo) for v in operand_values(node)]  # (each one's answer is kept)
            got = floats and any(operands)
        memo[id(node)] = got
    return got


def _shares(t: LazyTensor, behind: set[int]) -> bool:
    """Whether the pending work of another live handle computes float work
    of ``t``'s graph (``behind``, made of device data and constants:
    :func:`_float_work`), which a program of ``t``'s own would compute a
    second time: ``pred = out.argmax(1)`` read while the loss made from
    ``out`` is pending. Integer and boolean work (an index order, a mask, an
    index check) is cheap to compute twice: pad_packed_sequence reads the
    order its ``index_select`` uses. A walk over the pending graph, for a
    read that would otherwise cut it in two."""
    memo: dict = {}
    _float_work(t._value[0], memo)
    mine = {i for i, work in memo.items() if work}  # (its device data leaves too: the walk skips those)
    if not mine:
        return False
    seen: set[int] = set()
    todo = [h._value[0] for h in t.device.arena.pending() if h is not t]
    while todo:
        node = todo.pop()
        if id(node) in seen or type(node) is Data or type(node) is Scalar:
            continue
        if id(node) in mine or len(seen) >= _SHARED_LOOKED_AT:
            return True
        seen.add(id(node))
        todo.extend(v[0] for v in operand_values(node))
    return False


def _apart(t: LazyTensor) -> bool:
    """Whether a read of pending ``t`` may be answered without the barrier
    that computes all the pending work: not on a mesh (its results carry
    shardings; such reads stay barriers there), nor in a loop whose every
    step pads to one ceiling (generate()), whose reads (the stop check) end
    its steps: read apart, a token's work joins the next one's graph (the
    first token's stop check is of constants and the length parameter: 2
    programs more for every new call shape)."""
    if isinstance(t.device.pjrt, pjrt.MeshTarget):
        return False
    ceiling = buckets.fix(None)
    buckets.fix(ceiling)
    return ceiling is None


def _read_on_host(t: LazyTensor) -> bool:
    """Compute ``t`` on the host when it is an exact function of small
    uploads' host copies and constants (:func:`lazycore.runtime.hostreads.evaluate`):
    labels' ``max() >= vocab_size``, a mask and the lengths made of uploaded
    labels, the inverse of an uploaded order, the degenerate-box check of
    uploaded target boxes. No program runs and nothing is read from the
    device; the value becomes device data uploaded from that answer, which
    keeps it too (a later read, a mask's nonzero indices, take it from
    there). Where the only inputs missing are small device data leaves
    (a program's results: a pooler's box levels, read once per level), their
    values are copied from the device and kept on them instead of a program
    for ``t`` (:func:`_copied`). Returns whether ``t`` now holds its data.

    In a loop that pads to one ceiling (generate(), :func:`_apart`), only a
    value the host copies alone give is answered so (transformers' ``(ids <
    0).any()`` of the uploaded prompt, every call): no device read and no
    program, where the read was a barrier with the call's setup work."""
    if isinstance(t.device.pjrt, pjrt.MeshTarget):
        return False
    floats = _mid_step(t)
    got = hostreads.evaluate(t._value, floats=floats)
    if got is None and floats and (is_int(t.type.dtype) or is_bool(t.type.dtype)) and _apart(t):
        # an integer or boolean value of constants alone read mid-step (transformers'
        # fast_all of a torch.ones mask, BioGPT's first training step): computed here,
        # where _read_alone ran a program of its own for it. As that program's result,
        # it is the runtime's own device value: no upload announced, no host copy kept
        # but a bare integer parameter's number (a captured step that reads it still
        # replays: the value is its recording's constant)
        got = hostreads.evaluate(t._value, floats=floats, alone=True)
        if got is not None:
            _answer(t, got, constant=True)
            return True
    if got is None:
        if not _apart(t):
            return False
        plan = hostreads.inputs(t._value, {})
        if plan is None or plan[1] or not plan[0] or not _copied(t.device, plan[0]):
            return False
        got = hostreads.evaluate(t._value, floats=floats)
        if got is None:
            return False
    _answer(t, got)
    return True


def _mid_step(t: LazyTensor) -> bool:
    """Whether a barrier for ``t`` would cut other pending work in two (the
    step's): only then is float work computed on the host (a degenerate-box
    check in the middle of a detection model's step). With nothing else
    pending, a float value's program is the whole barrier, and its graph
    stays the device's to compile (the IR a user inspects)."""
    behind = _constants_behind(t._value, [])
    return behind is not None and _cuts(t, behind)


def _answer(t: LazyTensor, got: tuple, constant: bool = False) -> None:
    """``t`` becomes device data uploaded from its value computed on the host
    (:func:`lazycore.runtime.hostreads.evaluate`'s answer), which keeps it;
    ``constant``: a value of constants alone, kept on the device only (but a
    bare integer parameter's number: :func:`~lazycore.runtime.hostreads.keep_number`)."""
    host, nodes = got
    events.emit("read_on_host", t.type, nodes)
    kept = np.array(host, copy=True, order="C")  # (at most hostreads.KEPT_BYTES)
    kept.flags.writeable = False
    if not constant:
        events.emit("transfer", "host-to-device", t.type, kept.nbytes)
    with events.timed("transfer"):
        buffer = pjrt.to_device(kept, t.device.pjrt)
    events.bump("transfers_to_device")
    events.bump("bytes_to_device", kept.nbytes)
    leaf = Data(buffer, t.type, owned=True)
    if not constant:
        leaf.host = kept
    else:
        hostreads.keep_number(leaf, t._value)
    t._value = Value(leaf, 0)


def _host_copy(leaf: Data) -> np.ndarray:
    """A read-only copy of a device data leaf's value, read from the device."""
    host = hostcopy.to_host(leaf.buffer, leaf.types[0])
    host.flags.writeable = False
    return host


def _copied(device, leaves: list) -> bool:
    """Copy the values of small device data leaves (program results) to the
    host and keep them there (``Data.host``), so that reads of exact
    functions of them are computed on the host; False where one failed (its
    read raises, as before)."""
    _await_checks(device)
    for leaf in leaves:
        if leaf.host is not None:
            continue
        if not hostreads.plain_leaf(leaf):
            return False
        try:
            host = _host_copy(leaf)
        except Exception:  # noqa: BLE001  (a program still running failed: the read's own path says how)
            device.wait()
            return False
        leaf.host = host
    return True


def _read_bases(t: LazyTensor, behind: set[int]) -> bool:
    """Compute ``t``, read apart mid-step, from small pending values of live
    handles it is an exact function of (:func:`lazycore.runtime.hostreads.inputs`):
    those values by a program of their own, copied to the host and kept
    there (their handles now hold that data), and ``t`` on the host. A
    second read of another function of them costs no program: a sampler's
    ``torch.where(labels >= 1)`` and ``torch.where(labels == 0)`` of the
    same pending labels, one program and one copy for both (two programs
    before). Returns whether ``t`` now holds its data; where not, nothing
    was run or the bases hold their data now and ``t`` is read as before."""
    device = t.device
    handles: dict[int, list] = {}
    bases: dict[int, Node] = {}
    for h in device.arena.pending():
        node = h._value[0]
        if h is not t and type(node) is Node and h._value[1] == 0 and id(node) in behind:
            handles.setdefault(id(node), []).append(h)
            bases[id(node)] = node
    if not bases:
        return False
    plan = hostreads.inputs(t._value, bases)
    if plan is None or not plan[1]:
        return False
    fetch, compute = plan
    events.emit("read_apart", t.type, len(behind))
    try:
        buffers = barrier.run_alone(device, [Value(n, 0) for n in compute])
    except ProgramError:
        return False
    known: dict[int, np.ndarray] = {}
    for node, buffer in zip(compute, buffers):
        leaf = Data(buffer, node.types[0], owned=True)
        for h in handles[id(node)]:
            h._value = Value(leaf, 0)
        if type(buffer) is Failure:
            return False  # t's own program raises its error
        leaf.host = known[id(node)] = _host_copy(leaf)
    if fetch and not _copied(device, fetch):
        return False
    got = hostreads.evaluate(t._value, known)
    if got is None:
        return False
    _answer(t, got)
    return True


def _read_alone(t: LazyTensor) -> bool:
    """Compute ``t`` without a barrier when it is made of constants alone and
    a barrier would cut pending work in two: from :data:`_CONSTANT_READS`, or
    by a small program of its own (kept there). transformers reads such values
    in the middle of a step (BART's all-ones mask; with ``use_cache=False`` or
    gradient checkpointing, a packed-sequence check on an ``arange``), and a
    barrier there made every step two programs and a captured step that never
    replays. An integer or boolean value made of device data too (issue 39:
    a mask computed from an uploaded tensor, pack_padded_sequence's inverse
    order) is computed so when no other live value's pending work computes
    float work of its graph (:func:`_shares`), and not kept; a float value
    read mid-step is the step's own work, left to the barrier.
    A read with nothing else pending stays a barrier, with its plans,
    buckets and persistent cache (generate()'s setup reads). Returns whether
    ``t`` now holds its data (a failed value check raises, as a barrier's)."""
    device = t.device
    if not _apart(t):
        return False
    # device data only behind an index or a mask (an integer or boolean value):
    # a float value read mid-step is the step's own work (a print, an
    # activation), which the barrier computes once for every live value that
    # shares it, where a program of its own would compute the shared part twice
    data = [] if is_int(t.type.dtype) or is_bool(t.type.dtype) else None
    behind = _constants_behind(t._value, data)
    if behind is None:
        return False
    values = [t._value]
    if data:
        # made of device data too (a mask computed from an uploaded tensor, the
        # inverse of pack_padded_sequence's uploaded order): computed apart
        # when no other live value's pending work is in it (else the barrier
        # runs that work once, for both); not kept in _CONSTANT_READS (its key
        # holds no device data's values)
        if _shares(t, behind) or not _cuts(t, behind):
            return False
        if _read_bases(t, behind):
            return True
        events.emit("read_apart", t.type, len(behind))
        try:
            buffer = barrier.run_alone(device, values)[0]
        except ProgramError:
            return False
        t._value = Value(Data(buffer, t.type, owned=True), 0)
        if type(buffer) is Failure:
            raise buffer.error()
        return True
    walk = Walk(values)
    scalars = tuple((dtype, np.array([leaf.value for leaf in group], dtype=to_numpy_dtype(dtype)).tobytes())
                    for dtype, group in walk.packs.items())  # bytes: -0.0 is not 0.0
    key = (device, settings.pipeline, walk.encoding, scalars)
    buffer = _CONSTANT_READS.get(key)
    if buffer is None:
        if not _cuts(t, behind):
            return False
        try:
            buffer = barrier.run_alone(device, values, walk=walk)[0]
        except ProgramError:
            return False  # the barrier's containment says which value failed, and how
        kept = type(buffer) is not Failure and t.type.size * to_numpy_dtype(t.type.dtype).itemsize <= _KEPT_BYTES
        if kept:
            _CONSTANT_READS.put(key, buffer)
    else:
        kept = True
    t._value = Value(Data(buffer, t.type, owned=not kept), 0)  # a kept buffer is never donated: later reads share it
    if type(buffer) is Failure:
        raise buffer.error()
    return True


@_locked
def _materialize(t: LazyTensor) -> Data:
    """The device data behind ``t`` after a barrier (a padded result's
    valid region computed by a program of its own)."""
    return _settled(t)[0]


def _await_checks(device) -> None:
    """Wait for the running program when it checks values: its checks may fail the value read."""
    running = device.running
    if running is not None and running.flags:
        device.wait()  # (lazycore.runtime.checks)


def _settled(t: LazyTensor, cut: bool = False) -> tuple[Data, object]:
    """The device data behind ``t`` after a barrier, and None; ``cut``: for
    a padded result's valid region (:func:`lazycore.runtime.buckets.padded_leaf`)
    the padded result and its region instead (the caller cuts it on the
    host), else that region's own barrier computes it."""
    if not isinstance(t, LazyTensor):
        raise TypeError(f"expected a LazyTensor, got {type(t).__name__}")
    TRACE.taint()  # a lowering that observes values cannot be replayed
    if t.pending and buckets.padded_leaf(t._value.node) is None:
        if _read_on_host(t) or _read_alone(t):
            return t._value.node, None
        events.emit("implicit_barrier", t.type)
        barrier.sync(t.device)
    _await_checks(t.device)
    leaf = t._value.node
    padded = None if type(leaf) is Data else buckets.padded_leaf(leaf)
    if padded is not None:
        leaf = padded
    if type(leaf.buffer) is Failure:  # its computation failed (lazycore.runtime.failures)
        raise leaf.buffer.error()
    if padded is None:
        return leaf, None
    if cut:
        return leaf, leaf.valid
    t.device.wait()  # the slice, as a program of its own
    leaf = Data(barrier.run_alone(t.device, [t._value])[0], t.type, True)
    t._value = Value(leaf, 0)
    return leaf, None


_MOVES = frozenset(("reshape", "permute", "slice", "reverse"))
"""Ops that only move a value's elements: the bits of their operand, rearranged."""


def _moved(t: LazyTensor) -> np.ndarray | None:
    """``t``'s value when it only moves the elements of one program result
    (:data:`_MOVES` over a device data leaf with no host copy): the leaf's
    copy, moved by NumPy, with no program; None otherwise. A gradient is
    often such a value after a barrier (linear's weight gradient, the
    transpose of the product that made it), and every read of it (logging
    it, copying it to the host) was a program of its own. A view of an
    upload keeps :func:`_read_on_host`'s rules (with nothing else pending,
    a float one is the device's program: the IR a user inspects)."""
    node, chain = t._value.node, []
    while type(node) is not Data:
        if node.op not in _MOVES or len(node.operands) != 1:
            return None
        chain.append(node)
        node = node.operands[0].node
    # (a row of a rolled loop's stack too: its buffer is sliced out once, lazycore.runtime.stacks)
    if not chain or node.host is not None or node.sharding is not None or node.dynamic or node.valid is not None:
        return None
    if type(node.storage) is Failure:
        return None
    if isinstance(t.device.pjrt, pjrt.MeshTarget):
        return None
    TRACE.taint()  # a lowering that observes values cannot be replayed
    events.bump("host_reads")  # (a captured step that reads one is not replayed)
    _await_checks(t.device)
    if type(node.buffer) is Failure:
        raise node.buffer.error()
    host = _host_copy(node)
    for n in reversed(chain):
        host = hostreads.move(n, host)
    events.emit("read_on_host", t.type, len(chain))
    return np.array(host)


@_locked
def to_numpy(t: LazyTensor) -> np.ndarray:
    """The value on the host: an implicit barrier for ``t``'s device.

    Raises :class:`~lazycore.ir.failure.BarrierError` when computing it failed."""
    if t.pending:
        moved = _moved(t)
        if moved is not None:
            return moved
    leaf, region = _settled(t, cut=True)  # a padded result: its valid region is cut here
    if leaf.host is not None:  # a small upload's copy: nothing read from the device
        events.bump("host_reads")
        return np.array(leaf.host if region is None else region.host(leaf.host))  # (a padded one's: cut)

    def again():
        # the program still running failed: waiting settles its results in
        # their leaves (lazycore.runtime.launches.Launch), which raise it
        # naming the user's line; read again (a region: its padded result)
        if t.device.running is None:
            return None
        t.device.wait()
        return _settled(t, cut=True)[0].buffer

    return hostcopy.to_host(leaf.buffer, leaf.types[0], again, cut=None if region is None else region.host)


@_locked
def to_buffer(t: LazyTensor):
    """The device buffer behind ``t`` (a barrier); it is never donated afterwards.

    Raises :class:`~lazycore.ir.failure.BarrierError` when computing it failed."""
    leaf = _materialize(t)
    leaf.owned = False
    leaf.host = None  # the caller may hand the buffer on and donate it: reads go to the device
    buffer = leaf.buffer
    if _CONSTANT_READS:
        # the caller may hand it on (a jax program that donates it): later
        # reads of those constants compute their own
        for key in [k for k, b in _CONSTANT_READS.items() if b is buffer]:
            del _CONSTANT_READS[key]
    return buffer
