"""The lazy graph: nodes recorded op by op, each hashed as it is built.

A node is one ``lazy`` op applied to values; a value is ``(node, result
index)``, so multi-result ops (``lazy.rng_bit_generator``) need nothing
special. Leaves are device data (a PJRT buffer) and scalar parameters.

Every node carries a 128-bit structural digest, computed once when the node is
made from its op name, attributes, result types and its operands' digests, so
no barrier ever re-hashes the graph. Leaves hash their type only: which buffer
or which number sits in a leaf is a program *input*, not program structure
(two buffers of one type, or learning rates 2.0 and 3.0, give one digest). How
leaves are shared is recorded by the barrier's walk (see :mod:`lazycore.cache`).

Nothing here touches MLIR: this is the per-op path.
"""

from __future__ import annotations

import hashlib
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import TensorType, from_numpy_dtype
from lazycore.ir.memo import Memo

DIGEST_SIZE = 16


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


class StepLog:
    """Every node made since the last barrier, numbered in order, and the
    step's key, written as the nodes are made.

    The barrier's walk is the same for every step of a training loop, yet
    cost about as much as the rest of the barrier. This log lets a barrier
    recall it instead (:mod:`lazycore.stepplans`): making a node numbers it,
    appends it here and writes its operands, as log positions, to
    :attr:`edges`. Two steps with equal keys (:meth:`encode`: the outputs as
    log positions, every node's digest, the edges) made isomorphic graphs,
    and the barrier makes no pass over the step's nodes to know it
    (docs/dev/replay.md). A node made before this step that a logged node
    uses (a parameter; a leaf is logged when used, not when made) is logged
    *old*: numbered ``start - 1 - k``, the ``k``-th found (referred to as
    ``-1 - k``), and moved after the step's own nodes by :meth:`encode`.
    Logging stops for a step that makes more than :data:`STEP_LOG_LIMIT`
    nodes (its barrier walks).
    """

    __slots__ = ("start", "nodes", "on", "edges", "put", "olds", "moves")

    def __init__(self):
        self.start = _GAP
        """The number the first node of this step gets; older nodes have lower
        ones, this step's old nodes the :data:`_GAP` numbers just below it."""
        self.nodes: list[Node] = []
        self.on = True
        self.edges: list[int] = []
        """Each logged node's operands, then :data:`END`: an operand as a
        reference (its node's log position, or ``-1 - k`` for the ``k``-th
        old node) and its result index; a variadic group as ``GROUP - size``
        and its members."""
        self.put = self.edges.append  # (bound once: a node made binds none)
        self.olds: list[Node] = []
        """The old nodes found since :meth:`encode` last moved them, in order."""
        self.moves: list[tuple[int, int]] = []
        """``(step nodes, edges)`` when :meth:`encode` moved old nodes into
        the log (part of the key: it says which position a ``-1 - k`` written
        before it is)."""

    def reset(self) -> None:
        """Start a new step (after a barrier): everything made so far is old.
        The gap leaves the numbers below the new start to its old nodes."""
        self.start += len(self.nodes) + _GAP
        self.nodes = []
        self.edges = []
        self.put = self.edges.append
        self.olds = []
        self.moves = []
        self.on = True

    def stop(self) -> None:
        self.reset()
        self.on = False

    def old(self, node: "Node") -> int:
        """Log ``node``, made before this step (or unlogged), as old; its
        reference. (Its number below :attr:`start` tells it is old, as any
        older number does, and that it is logged.)"""
        olds = self.olds
        k = len(olds)
        if k >= _GAP - 1:  # out of numbers: the step has no key and walks
            self.stop()
            return 0
        olds.append(node)
        node.seq = self.start - 1 - k
        return -1 - k

    def put_instead(self, node: "Node", other: "Node") -> None:
        """``other``, of equal digest, takes the place of ``node``, just made
        and logged and used by nothing yet (:func:`lazycore.trace.recipes.shared`),
        as if made there; where ``other`` already has a number in this step
        it keeps it, the number the references written so far hold."""
        i = node.seq - self.start
        nodes = self.nodes
        if 0 <= i < len(nodes) and nodes[i] is node:
            nodes[i] = other
            if other.seq < self.start - len(self.olds):
                other.seq = node.seq

    def encode(self, outputs) -> tuple | None:
        """The step's key, with ``outputs`` (values) as its outputs:
        ``(moves and the outputs' log positions, digests in log order,
        edges)``; None when the log stopped. The old nodes found so far join
        the log, after the step's own nodes: those an output is, and those
        an old node uses (an old node with operands was made while logging
        was off), whose operands are written as a made node's are."""
        start = self.start
        for v in outputs:
            if v[0].seq < start - len(self.olds):
                self.old(v[0])
        olds = self.olds
        if olds:
            put = self.put
            i = 0
            while i < len(olds):  # grows while old nodes are found
                for o in olds[i].operands:
                    if type(o) is Value:
                        s = o[0].seq - start
                        if s < 0 and -s > len(olds):
                            s = self.old(o[0])
                        put(s)
                        put(o[1])
                    else:
                        put(GROUP - len(o))
                        for v in o:
                            s = v[0].seq - start
                            if s < 0 and -s > len(olds):
                                s = self.old(v[0])
                            put(s)
                            put(v[1])
                put(END)
                i += 1
            if not self.on:
                return None
            nodes = self.nodes
            base = start + len(nodes)
            for k, n in enumerate(olds):
                n.seq = base + k
            self.moves.append((len(nodes), len(self.edges)))
            nodes.extend(olds)
            self.olds = []
        outs = [tuple(self.moves)]
        for v in outputs:
            outs.append(v[0].seq - start)
            outs.append(v[1])
        return tuple(outs), tuple(map(_DIGEST, self.nodes)), tuple(self.edges)


STEP_LOG_LIMIT = 100_000
_GAP = 1 << 17
"""Numbers left below a step's start for its old nodes (more than
:data:`STEP_LOG_LIMIT`, which a test may lower)."""
END = -_GAP - 1
"""In :attr:`StepLog.edges`: a node's operands end (below any reference)."""
GROUP = -_GAP - 2
"""In :attr:`StepLog.edges`: ``GROUP - size`` begins a variadic group."""
_DIGEST = attrgetter("digest")
LOG = StepLog()


class Node:
    """One op application (or a leaf, see the subclasses)."""

    __slots__ = ("op", "operands", "attrs", "types", "digest", "loc", "seq", "mark", "at")

    def __init__(
        self, op: str, operands: tuple, attrs: dict, types: tuple[TensorType, ...], digest: bytes, loc=None
    ):
        self.op = op
        """Dialect op name without the prefix (``"add"``), as ``dialect.create`` takes it."""
        self.operands = operands
        """Values, and a tuple of values for a variadic group."""
        self.attrs = attrs
        """Attributes and result parameters as Python values (``dialect.spec.ATTR_KINDS``)."""
        self.types = types
        self.digest = digest
        self.loc = loc
        """The user's ``(file, line)`` that recorded the op (None: unknown, and
        for leaves). Not part of the digest: one program recorded from two
        places is one compile."""
        self.mark = None
        """The last walk that placed this node (:func:`lazycore.ir.walk.encode`),
        which keeps its position in :attr:`at`."""
        log = LOG
        if log.on and self.log_when_made:
            # numbered, logged, and its operands written as the step's key
            # (StepLog.edges) while they are at hand: no pass at the barrier
            nodes = log.nodes
            n = len(nodes)
            start = log.start
            self.seq = start + n
            nodes.append(self)
            if n >= STEP_LOG_LIMIT:
                log.stop()
                return
            k = len(operands)
            # one and two operands (most ops), unrolled and written with one
            # extend: the loop and an append per number cost ~2% of a replayed
            # op (benchmark 1); the numbers written are the loop's
            if k == 2:
                a, b = operands
                if type(a) is Value and type(b) is Value:
                    sa = a[0].seq - start
                    if sa < 0 and -sa > len(log.olds):  # made before this step: logged old
                        sa = log.old(a[0])
                    sb = b[0].seq - start
                    if sb < 0 and -sb > len(log.olds):
                        sb = log.old(b[0])
                    log.edges += (sa, a[1], sb, b[1], END)
                    return
            elif k == 1:
                a = operands[0]
                if type(a) is Value:
                    sa = a[0].seq - start
                    if sa < 0 and -sa > len(log.olds):
                        sa = log.old(a[0])
                    log.edges += (sa, a[1], END)
                    return
            put = log.put
            for o in operands:
                if type(o) is Value:
                    s = o[0].seq - start
                    if s < 0 and -s > len(log.olds):  # made before this step: logged old
                        s = log.old(o[0])
                    put(s)
                    put(o[1])
                else:  # a variadic group: its size, then its members
                    # (the common single operand stays inline: a shared
                    # inner loop made the log's pass 20% slower)
                    put(GROUP - len(o))
                    for v in o:
                        s = v[0].seq - start
                        if s < 0 and -s > len(log.olds):
                            s = log.old(v[0])
                        put(s)
                        put(v[1])
            put(END)
        else:
            self.seq = -1  # in no step's log (logged when a logged node uses it)

    is_leaf = False
    log_when_made = True

    def __repr__(self) -> str:
        types = ", ".join(map(str, self.types))
        return f"<{type(self).__name__} lazy.{self.op} -> {types} #{self.digest.hex()[:8]}>"


class Value(NamedTuple):
    node: Node
    index: int

    @property
    def type(self) -> TensorType:
        return self.node.types[self.index]


# Keyed by types, which drift in a long run (new shapes): bounded like every memo.
_leaf_digests = Memo("ir.leaf_digests", 16_384)
"""``(kind, type, sharding)`` -> a leaf's digest."""
# A bound ``get`` (emptying a memo keeps its identity): looked up on a dict
# subclass, ``get`` costs more than on a dict, and these run per node.
_leaf_digest_of = _leaf_digests.get


def _leaf_digest(kind: str, t: TensorType, sharding=None) -> bytes:
    key = (kind, t, sharding)
    d = _leaf_digest_of(key)
    if d is None:
        parts = ("leaf", kind, tuple(t.shape), t.dtype) + (() if sharding is None else (str(sharding),))
        d = _leaf_digests.put(key, digest(repr(parts).encode()))
    return d


class Data(Node):
    """A leaf holding a device buffer, or naming a row of a stacked one."""

    __slots__ = ("_buffer", "owned", "sharding", "made", "dynamic", "row", "valid", "host")
    is_leaf = True
    log_when_made = False  # when used: an upload nothing uses is not kept until the barrier

    def __init__(self, buffer, t: TensorType, owned: bool, sharding=None, row=None):
        super().__init__("data", (), {}, (t,), _leaf_digest("data", t, sharding))
        self.made = LOG.start + len(LOG.nodes)
        """The step-log number the next node would get when this leaf was made
        (:mod:`lazycore.runtime.autostep` tells a new batch from a parameter so)."""
        self._buffer = buffer
        self.row = row
        """None, or ``(stack, index)``: the value is row ``index`` of a stacked
        buffer (a :class:`lazycore.runtime.stacks.Stack`) that a program
        returned whole. A program whose loop reads the rows takes the stack
        (chosen as it is called, :func:`lazycore.runtime.stacks.arguments`):
        neither the digest nor the compile key depends on it."""
        self.owned = owned
        """Made by lazycore (from host data or as a result), so it may be donated
        once nothing refers to it; False for buffers the user handed in."""
        self.sharding = sharding
        """How the buffer is laid out over its mesh (its ``str`` is XLA's text,
        part of the digest: a program is compiled for its inputs' layouts);
        None on a single device."""
        self.dynamic: frozenset[int] = frozenset()
        """Dimensions whose size varies from step to step (``dynamic(t, dim)``):
        a barrier pads them to a bucket (:mod:`lazycore.runtime.buckets`). Not
        part of the digest: the bucketed program has a key of its own."""
        self.valid = None
        """None, or for a padded result the region of the buffer that holds
        its value (:class:`lazycore.runtime.buckets.Region`): handles hold
        that region's slice, which barriers and reads tell by it."""
        self.host = None
        """None, or the value on the host (a read-only NumPy array): a small
        upload's copy, which reads answer from (:mod:`lazycore.runtime.hostreads`)."""

    @property
    def buffer(self):
        """The device buffer (a :class:`~lazycore.ir.failure.Failure` for a failed
        value); a row's is sliced out of its stack the first time it is asked for."""
        buffer = self._buffer
        if buffer is None and self.row is not None:
            stack, index = self.row
            buffer = self._buffer = stack.row(index)
        return buffer

    @buffer.setter
    def buffer(self, buffer) -> None:
        """A buffer (or failure) of its own: the leaf is no row any more."""
        self._buffer = buffer
        self.row = None
        self.host = None

    @property
    def storage(self):
        """The buffer the value lives in, without slicing a row out: its
        stack's for a row (a failure or a deleted buffer shows here)."""
        return self.row[0].buffer if self.row is not None else self._buffer


class Scalar(Node):
    """A Python scalar passed as a rank-0 program parameter."""

    __slots__ = ("value",)
    is_leaf = True

    def __init__(self, value, dtype: str):
        t = TensorType((), dtype)
        super().__init__("scalar", (), {}, (t,), _leaf_digest("scalar", t))
        self.value = value


# --- op nodes --------------------------------------------------------------------


def normalize_attr(kind: str, value):
    """The attribute as stored on the node: the Python form MLIR building takes."""
    if kind == "i64":
        return int(value)
    if kind == "i64[]":
        return tuple(int(v) for v in value)
    if kind == "f64":
        return float(value)
    if kind == "bool":
        return bool(value)
    if kind == "str":
        return str(value)
    if kind == "dense":
        array = np.array(value)  # a copy: the user may mutate theirs later
        from_numpy_dtype(array.dtype)  # refuse dtypes the dialect has no name for
        return array
    raise ValueError(f"unknown attribute kind '{kind}'")


def attr_key(value):
    """An attribute as a node's digest reads it (the repr of these keys is
    hashed): an array (a ``dense`` attribute, the only kind stored as one)
    by its dtype, shape and bits; anything else as itself."""
    if type(value) is np.ndarray:
        return ("dense", value.dtype.str, value.shape, digest(np.ascontiguousarray(value).tobytes()))
    return value


def attrs_key(attrs: dict) -> str:
    """A node's attributes and result parameters, all of them, compared as
    its digest compares attributes: equal keys, equal attributes (a float
    by its repr, so NaN is NaN and -0.0 is not 0.0; an array by its dtype,
    shape and bits; a value of another type is another value)."""
    return repr(sorted([(name, attr_key(v)) for name, v in attrs.items()]))


def attrs_equal(a: dict, b: dict) -> bool:
    """Whether ``attrs_key(a) == attrs_key(b)``, without building the keys
    (the step cutter compares every node of a period so): NaN equals NaN and
    -0.0 is not 0.0, as for the digest, which gives nodes so equal one
    program; arrays are equal by dtype, shape and bits."""
    if a is b:
        return True
    if len(a) != len(b):
        return False
    for name, v in a.items():
        if name not in b:
            return False
        w = b[name]
        if v is w:
            continue
        t = type(v)
        if t is not type(w):
            if repr(attr_key(v)) != repr(attr_key(w)):
                return False
        elif t is int or t is str or t is bool:
            if v != w:
                return False
        elif t is np.ndarray:
            if v.dtype.str != w.dtype.str or v.shape != w.shape or v.tobytes() != w.tobytes():
                return False
        elif repr(v) != repr(w):
            return False
    return True


_types_bytes = Memo("ir.result_types_bytes", 16_384)
"""Result types -> their part of a node's digest input (looked up per node)."""
_op_bytes = Memo("ir.op_name_bytes", 4096)
"""Op name -> the head of its nodes' digest input: one per op of the table."""
_types_bytes_of, _op_bytes_of = _types_bytes.get, _op_bytes.get  # per node: see _leaf_digest_of
_INDEX = [i.to_bytes(2, "little") for i in range(256)]


def index_bytes(i: int) -> bytes:
    """A result index (or a group size) as it enters a digest."""
    return _INDEX[i] if i < 256 else i.to_bytes(4, "little")


def make_node(spec, operands: tuple, kwargs: dict, types: tuple[TensorType, ...], loc=None) -> Node:
    """A node for ``spec`` applied to values; ``kwargs`` already checked by its rule.

    The digest input is unambiguous: the op name, then the repr of its
    attributes (their set is fixed by the op), the repr of the result types,
    then fixed-width operand entries, with a marker and a count for a
    variadic group.
    """
    attrs, prefix = node_prefix(spec, kwargs, types)
    return Node(spec.name, operands, attrs, types, digest(prefix + operand_bytes(operands)), loc)


def node_prefix(spec, kwargs: dict, types: tuple[TensorType, ...]) -> tuple[dict, bytes]:
    """The stored attributes and the digest input before the operands: what a
    node of ``spec`` with these attributes and result types always starts with
    (:mod:`lazycore.recipes` keeps it to make the same node again)."""
    head = _op_bytes_of(spec.name)
    if head is None:
        head = _op_bytes.put(spec.name, spec.name.encode() + b"|")
    if kwargs:
        attrs = dict(kwargs)
        for name, kind in spec.attrs.items():
            attrs[name] = normalize_attr(kind, attrs[name])
        if "shape" in attrs:
            attrs["shape"] = tuple(attrs["shape"])
        if spec.attrs:
            head += repr(tuple(attr_key(attrs[n]) for n in spec.attrs)).encode()
    else:
        attrs = kwargs
    tb = _types_bytes_of(types)
    if tb is None:
        tb = _types_bytes.put(types, repr(tuple((tuple(t.shape), t.dtype) for t in types)).encode())
    return attrs, head + b"|" + tb


def operand_values(node: Node) -> tuple:
    """A node's operands as one sequence of values, each variadic group's in
    its place (the node's own tuple when it has no group)."""
    operands = node.operands
    for o in operands:
        if type(o) is not Value:
            return tuple([v for o in operands for v in ((o,) if type(o) is Value else o)])
    return operands


def map_operands(operands, f, group=tuple) -> tuple:
    """A node's ``operands`` with each value replaced by ``f(value)`` and each
    variadic group by ``group`` of its values' images, in place: the
    structure kept, to make a node again, emit it or key it
    (:func:`operand_values` where the groups do not matter)."""
    return tuple([f(o) if type(o) is Value else group(map(f, o)) for o in operands])


def operand_bytes(operands) -> bytes:
    """The operands' part of a node's digest input."""
    parts = []
    for o in operands:
        if type(o) is Value:
            parts += (o[0].digest, _INDEX[o[1]] if o[1] < 256 else index_bytes(o[1]))
        else:
            parts += (b"G", index_bytes(len(o)))
            for v in o:
                parts += (v.node.digest, index_bytes(v.index))
    return b"".join(parts)


def constant_only(node: Node, memo: dict) -> bool:
    """Made of constants and scalar parameters alone, so sharable as it is
    (``memo``: ``id(node)`` -> the answer, for the nodes asked about so far)."""
    got = memo.get(id(node))
    if got is None:
        if type(node) is Data:
            got = False
        elif not node.operands:
            got = True
        else:
            got = all(constant_only(v[0], memo) for v in operand_values(node))
        memo[id(node)] = got
    return got


def constant(array: np.ndarray) -> Node:
    """A ``lazy.constant`` node (the scalar policy bakes 0 and 1 in this way)."""
    spec = spec_of("constant")
    value = normalize_attr("dense", array)
    return make_node(spec, (), {"value": value}, spec.infer(value=value))
