"""A barrier's graph at bucket sizes: padded dimensions, and masks where padding would show.

:mod:`lazycore.runtime.buckets` decides which input dimensions are padded and
to what size; this module rebuilds the walked graph with those dimensions at
their bucket size, so graphs that differ only in those sizes become one
program. Each dimension of size ``n`` padded to ``b`` is a *symbol* ``n``:
the padded graph keeps, for every value, which of its dimensions are padded
and for which symbol, and the number ``n`` enters the program as a scalar
parameter (its *valid size*), never as structure.

Positions past the valid size hold garbage (zeros in the inputs, anything
after an op: ``log(0)``). An op that only combines equal positions
(elementwise ops, broadcasts, permutes, reshapes that keep the padded
dimension whole) computes the same values at valid positions as the
unpadded op; an op that mixes positions along a padded dimension sees masked
operands: a reduction the reduction's identity past the valid size, a
contraction zeros in both operands (``0 * inf`` would be NaN), ``argmax``
and ``argmin`` the far end of the type. A masked sum divided by its element
count baked as a number (torch's ``mean``) is divided by the count computed
from the valid sizes instead; a count passed as a scalar parameter (a mean's
gradient) needs nothing. Values made
without an input (``broadcast_in_dim`` of a scalar, ``iota``, a splat
constant) that have a dimension of size ``n`` are constant along it and are
widened too: autograd's ``expand`` of a mean's gradient to the batch shape is
one; so is the first ``n`` of a longer dimension (``causal[:t, :t]``), whose
first ``b`` keep those ``n`` in front (where such a value meets one unpadded
at that size, the size was another dimension's, and the value is made again
without widening it there). A random draw of a symbol's size (dropout's bits
over a padded batch) is widened too and reads, at each valid position, the
bit the draw at the valid sizes gives there (:func:`_random_bits`): a padded
step draws the unpadded step's numbers. Lookups at padded indices (``gather``:
an embedding of padded tokens) are kept; lookups into a padded dimension
(a padding mask read at every key position) have their indices clamped to
the valid size, as XLA clamps them to the unpadded one; updates at padded
indices (``scatter``: its gradient, ``out[idx] = rows``) point past the
operand, where XLA drops them, and a scatter into a padded dimension keeps
it padded (valid indices stay below the valid size). An
integer constant equal to a padded size, or its negation (an index's bounds
check and wrap), becomes that size's parameter, and a value check's message
leaves such sizes out (a failed check's message is read from the unpadded
graph), so neither makes a program per size.

A padded dimension is a list of *factors*, ``(size, symbol or None)``
outermost first: a reshape that merges it with others (``linear`` on a
``(batch, seq, d)`` input flattens to ``(batch * seq, d)``) gives a dimension
of several factors, whose masks take each padded factor's index out of the
flat one, and a later reshape may split the factors again. Values whose
padded dimensions disagree on their factors never meet in one op.

A slice that ends before a padded dimension's valid size (``x[:k]``, a
split's first part) reads the same positions of the padded value and is
unpadded; a symbol's part may start at 0, at a symbol's size or at a plain
size. Any other op on a padded value (another slice of part of the dimension, a
reshape that splits a padded factor, a gather of windows along it, a cumulative op,
``reverse``) raises :class:`Refused`, and the barrier compiles
the graph as it is: never a wrong value. Where the refused op is one that no
marked input reaches (a value made without inputs at a size that was a
symbol's by chance), that op alone is kept as it is (:attr:`Padded.marked`).
A symbol is a marked dimension's count, not a number: where a refused op's
padding comes from values made without inputs that were widened only for
having a symbol's size (Faster R-CNN's 270 anchors where 270 boxes were
sampled; its 8 x 8 feature maps where 8 boxes were positive), the graph is
walked again with those dimensions of those values made as they are
(:func:`_by_chance`), and a rule that refuses an operand widened along two
dimensions is tried with one of them made again unwidened (:func:`_refit`).
Where nothing refuses, such a coincidence would still make a program of its
own (the values widened, their sums masked): a value made without inputs,
a constant or a check's numbers are read as the last walk at other sizes
read them at the same place (:data:`READINGS`, :meth:`Padded.as_read`).

Which rule an op gets is its row's ``padding`` trait in the op table
(:data:`lazycore.dialect.spec.PADDING_KINDS`): the elementwise rule, the
reduction rule with the row's ``identity``, a rule of its own here
(:data:`OWN_RULES`), or refused. No op is named here for being elementwise or
a reduction.
"""

from __future__ import annotations

import itertools
import re
from operator import attrgetter

import numpy as np

from lazycore.dialect.folds import identity_value
from lazycore.dialect.spec import OPS, spec_of
from lazycore.dialect.types import ShapeError, TensorType, to_numpy_dtype
from lazycore.ir.graph import Data, Node, Scalar, Value, make_node, map_operands, operand_values
from lazycore.ir.memo import Memo
from lazycore.ir.regions import RegionNode
from lazycore.ir.sourceloc import resolve

_TYPE = attrgetter("type")

WIDENED = frozenset({"broadcast_in_dim", "iota", "constant", "slice", "rng_bit_generator"})
"""Ops that make values of their own whose dimensions of a symbol's size are
widened (a random draw's bits: its last result)."""


LITERALS = Memo("runtime.size_literals", 1024)
"""``(user's instruction, n)`` -> True: a padded walk met the integer ``n``
(a constant, or a number in a check's message) recorded at that instruction
while ``n`` was no symbol's size, so ``n`` is a number there, not a count's
size (:meth:`Padded.size_constant`)."""


READINGS = Memo("runtime.size_readings", 8192)
"""``((user's instruction, ordinal), kind)`` -> how the last padded walk read
the value made without inputs, constant or check there (:meth:`Padded.as_read`)."""


class Refused(Exception):
    """The graph cannot be padded; the message says which op and where."""


def fill_value(kind: str, dtype: str) -> np.ndarray:
    """The rank-0 value masked positions take: ``zero``, ``one``, ``low`` (the
    identity of max) or ``high`` (of min)."""
    try:
        return identity_value(kind, dtype)
    except ValueError as e:
        raise Refused(str(e)) from None


def _where(node: Node) -> str:
    if node.loc is None:
        return f"lazy.{node.op}"
    file, line = resolve(node.loc)
    return f"lazy.{node.op} at {file}:{line}"


Factors = tuple  # ((size, symbol or None), ...), outermost first; sizes unpadded


class Padded:
    """The walk's graph rebuilt at bucket sizes (:func:`pad_graph`)."""

    def __init__(self, symbols: dict[int, int], bucket_of=None):
        self.symbols = symbols
        """Symbol (unpadded size) -> bucket size."""
        self.bucket_of = bucket_of
        """Size -> its bucket (None: none holds it): the bucket of a symbol an
        append makes (:func:`_append`); None refuses appends."""
        self.derived: set[int] = set()
        """Symbols made by appends, not by marks."""
        self.widen = True
        """Whether values made without inputs are widened along a symbol's
        size (off for the retry after a size that is also another
        dimension's, a head dimension of 16 at sequence length 16, refused)."""
        self.as_made: dict[int, frozenset[int]] = {}
        """id(original node) -> the dimensions of that value made without
        inputs that are not widened: their size was a symbol's by chance, as
        a refused op showed (:func:`pad_graph`, :func:`_by_chance`)."""
        self.at: Node | None = None
        """The original node the walk is at."""
        self.place: tuple | None = None
        """Where the node the walk is at was made, for a value made without
        inputs or a check: (its instruction, how many such nodes the walk
        met there before) (:meth:`as_read`)."""
        self.places: dict = {}
        """Instruction -> how many values made without inputs and checks the walk met there."""
        self.readings: dict = {}
        """(place, kind) -> this walk's reading there (:meth:`as_read`)."""
        self.recalled: list | None = []
        """The places where a reading recalled from another walk changed this
        walk's (None: none recalled, the readings the sizes give)."""
        self.valid: dict[int, Scalar] = {n: Scalar(np.asarray(n, np.int32), "i32") for n in symbols}
        """Symbol -> the scalar parameter holding it (the valid size)."""
        self.new: dict[int, tuple[Node, list[dict[int, Factors]]]] = {}
        """id(original node) -> (its padded node, per result: padded dim -> its factors)."""
        self.inputs: list[tuple[Data, Data]] = []
        """(marked leaf, its padded leaf)."""
        self._masks: dict[tuple, Value] = {}
        self.fresh: dict[int, Node] = {}
        """id(padded node) -> the original node, for values made without a
        padded input and widened along a size that is a symbol's: where such
        a value meets one unpadded along that dimension, the size was
        another dimension's (a head dimension of 16 at sequence length 16)
        and the value is taken unwidened (:func:`_unwidened`)."""
        self.stretched: dict[tuple, Value] = {}
        """(id(node), its wanted padded dims) -> the unpadded value made again
        widened (:func:`_stretched_through`)."""
        self.again: dict[tuple, Value] = {}
        """(id(fresh node), its dims kept) -> the node made again (:func:`_made_again`)."""
        self.marked: set[int] = set()
        """id(original node) of the nodes that a marked input or region reaches:
        any other node's own value holds nothing padded, so where padding
        refuses it (a reshape that splits a value widened along a size that
        was a symbol's by chance: Faster R-CNN's 270 anchors at 270 sampled
        boxes), the node as it is is exact."""
        self.counts: dict[int, tuple[int, tuple[int, ...]]] = {}
        """id(padded node) -> how many elements the masked sum it holds added
        (a number and the symbols whose valid sizes multiply it)."""
        self.numbers: set[tuple] = set()
        """``(instruction, n)`` of the integers met while ``n`` was no
        symbol's size (constants, check messages' numbers): numbers at their
        instruction (:data:`LITERALS`) once the walk is kept, also where an
        append later in the walk makes ``n`` a symbol's (the walk took it as
        a number all the same)."""
        self.dependent: dict[int, tuple[int, ...]] = {}
        """id(original node) -> the symbols whose values it was read as,
        besides its padded dimensions: an integer constant equal to a size
        (:meth:`size_constant`), a mean's count (:func:`_mean_count`). A plan
        recalled for other sizes (:meth:`lazycore.runtime.buckets.Template.match`)
        needs those constants unchanged and their symbols at the same values."""

    # --- building ----------------------------------------------------------------

    def moved(self, v: Value) -> Value:
        """The operand ``v`` in the padded graph (``v`` itself where its node is kept)."""
        new = self.new[id(v[0])][0]
        return v if new is v[0] else Value(new, v[1])

    def make(self, op: str, operands: tuple, attrs: dict, loc=None) -> Node:
        spec = spec_of(op)
        types = map_operands(operands, _TYPE, list)
        try:
            result = spec.infer(*types, **attrs)
        except ShapeError as e:
            where = _where(self.at) if self.at is not None else f"lazy.{op}"
            raise Refused(f"{where} does not fit the bucket sizes (lazy.{op}: {e})") from None
        return make_node(spec, tuple(operands), attrs, result, loc)

    def value(self, op: str, operands: tuple, attrs: dict) -> Value:
        return Value(self.make(op, operands, attrs), 0)

    def size(self, factors: Factors) -> int:
        """A padded dimension's size at bucket sizes."""
        out = 1
        for n, sym in factors:
            out *= n if sym is None else self.symbols[sym]
        return out

    def index_scalar(self, value: int, dtype: str = "i32") -> Value:
        return self.value("constant", (), {"value": np.asarray(value, to_numpy_dtype(dtype))})

    def splat(self, v: Value, shape: tuple) -> Value:
        return self.value("broadcast_in_dim", (v,), {"dims": (), "shape": shape})

    def inside(self, shape: tuple, d: int, factors: Factors) -> Value | None:
        """i1 of ``shape``: true where every padded factor of dimension ``d``
        is below its valid size."""
        pred = None
        flat = self.value("iota", (), {"dim": d, "shape": shape, "dtype": "i32"})
        sizes = [n if sym is None else self.symbols[sym] for n, sym in factors]
        for k, (_, sym) in enumerate(factors):
            if sym is None:
                continue
            valid = self.splat(Value(self.valid[sym], 0), shape)
            below = self.value("compare", (self.factor_index(flat, sizes, k), valid), {"direction": "LT"})
            pred = below if pred is None else self.value("and", (pred, below), {})
        return pred

    def factor_index(self, flat: Value, sizes: list[int], k: int, dtype: str = "i32") -> Value:
        """Per element of ``flat`` (indices along a dimension whose padded
        factors have ``sizes``, outermost first), the index of factor ``k``."""
        shape, index = flat.type.shape, flat
        inner = int(np.prod(sizes[k + 1:], dtype=np.int64))
        if inner > 1:
            index = self.value("div", (index, self.splat(self.index_scalar(inner, dtype), shape)), {})
        if k > 0:
            index = self.value("rem", (index, self.splat(self.index_scalar(sizes[k], dtype), shape)), {})
        return index

    def mask(self, v: Value, dims: dict[int, Factors], kind: str) -> Value:
        """``v`` with the positions past the valid sizes of ``dims`` replaced by the ``kind`` fill."""
        t = v.type
        key = (t.shape, tuple(sorted(dims.items())))
        pred = self._masks.get(key)
        if pred is None:
            for d, factors in sorted(dims.items()):
                below = self.inside(t.shape, d, factors)
                pred = below if pred is None else self.value("and", (pred, below), {})
            self._masks[key] = pred
        fill = self.splat(self.value("constant", (), {"value": fill_value(kind, t.dtype)}), t.shape)
        return self.value("select", (pred, v, fill), {})

    def widened(self, shape: tuple, dims: dict[int, Factors]) -> tuple:
        return tuple(self.size(dims[j]) if j in dims else s for j, s in enumerate(shape))

    def fresh_dims(self, shape: tuple) -> dict[int, Factors]:
        """The dimensions of a value made without inputs that become padded:
        those of a symbol's size (also where the bucket is that size: every
        size of a bucket makes one graph)."""
        if not self.widen:
            return {}
        kept = self.as_made.get(id(self.at), ()) if self.at is not None else ()
        return self.as_read("dims", {j: ((s, s),) for j, s in enumerate(shape) if s in self.symbols and j not in kept},
                            shape)

    def as_read(self, kind, reading, sizes):
        """``reading`` of the node the walk is at (a value made without
        inputs: its widened dimensions; a constant or a check's message:
        whether a number is a size) where one of its ``sizes`` is a symbol's,
        as the last walk read it at other sizes. A size equal to a symbol's
        may be the count's or another dimension's by chance (FLAVA's 8 text
        positions beside 8 masked patches; 5 columns beside 5 patches), and
        reading it as the count's makes that coincidence a program of its
        own; read as at other sizes, the step is their program. Exact either
        way: a number kept is the step's, and a count's value made at its own
        size beside padded ones refuses the op that meets them (at its
        bucket's size the two are one value). Kept by place: the user's
        instruction and how many such nodes the walk met there before."""
        place = self.place
        if place is None:
            return reading
        symbols = self.symbols
        if self.recalled is not None and any(n in symbols for n in sizes):
            before = READINGS.get((place, kind))
            if before is not None:
                recalled = {j: f for j, f in reading.items() if j in before} if kind == "dims" else before
                if recalled != reading:
                    self.recalled.append(place)
                    reading = recalled
        buckets = self.bucket_of
        if any(n in symbols or (buckets is not None and buckets(n) in symbols.values()) for n in sizes):
            self.readings[(place, kind)] = frozenset(reading) if kind == "dims" else reading
        return reading

    # --- the walk ------------------------------------------------------------------

    def node(self, node: Node, marks: dict[int, Factors] | None) -> None:
        self.at = node
        self.place = None
        if (node.op in WIDENED or node.op == "check") and node.loc is not None:
            k = self.places.get(node.loc, 0)
            self.places[node.loc] = k + 1
            self.place = (node.loc, k)
        if marks or (not node.is_leaf and any(id(v[0]) in self.marked for v in operand_values(node))):
            self.marked.add(id(node))
        if marks and not node.is_leaf:  # a padded result's valid region: that result, padded
            leaf = node
            while not leaf.is_leaf:  # the region's slice and reshapes, down to the result
                leaf = leaf.operands[0][0]
            self.new[id(node)] = (leaf, [dict(marks)])
            return
        if node.is_leaf:
            if marks:
                t = node.types[0]
                dims = dict(marks)
                shape = self.widened(t.shape, dims)
                if shape == t.shape:  # a size that is its bucket: the input itself (donated as it would be)
                    self.new[id(node)] = (node, [dims])
                    return
                leaf = Data(None, TensorType(shape, t.dtype), owned=False)
                self.inputs.append((node, leaf))
                self.new[id(node)] = (leaf, [dims])
            else:
                self.new[id(node)] = (node, [{}])
            return
        if node.op == "constant" and self.symbols:
            sized = self.size_constant(node)
            if sized is not None:
                self.new[id(node)] = sized
                return
        values = operand_values(node)
        operands, pads, same = [], [], True
        for v in values:
            new, padded = self.new[id(v[0])]
            pads.append(padded[v[1]])
            if new is v[0]:
                operands.append(v)
            else:
                operands.append(Value(new, v[1]))
                same = False
        if values is not node.operands:  # variadic groups: each in its place
            operands = list(map_operands(node.operands, self.moved))
        op = node.op
        if not any(pads) and (op not in WIDENED or not self.fresh_dims(node.types[-1].shape)) \
                and (op != "check" or _message(self, node) == node.attrs["message"]):
            # (a check of unpadded values still leaves sizes out of its message: its rule)
            if same:
                self.new[id(node)] = (node, [{} for _ in node.types])
                return
            if op == "div":
                operands = _mean_count(self, node, operands)
            if type(node) is RegionNode:  # a loop or branch over unpadded values: its bodies as they are
                made = RegionNode(op, tuple(operands), node.bodies, node.types, node.loc)
            else:
                made = self.make(op, tuple(operands), node.attrs, node.loc)
            self.new[id(node)] = (made, [{} for _ in node.types])
            if op in ("reshape", "convert", "broadcast_in_dim") and id(operands[0][0]) in self.counts:
                self.counts[id(made)] = self.counts[id(operands[0][0])]
            return
        rule = rule_for(op)
        if rule is None:
            raise Refused(f"{_where(node)} mixes positions along a padded dimension (no padding rule)")
        try:
            attrs, ruled, padded, *replaced = rule(self, node, operands, pads)
            made = self.make(replaced[0] if replaced else op, tuple(ruled), attrs, node.loc)
        except Refused:
            if id(node) not in self.marked:  # nothing marked reaches it: the node as it is
                self.new[id(node)] = (node, [{} for _ in node.types])
                return
            refit = _refit(self, node, rule, operands, pads)
            if refit is not None:
                made, padded, ruled = refit
                self.new[id(node)] = (made, padded if type(padded) is list else [padded])
                if op in ("reshape", "convert", "broadcast_in_dim") and id(ruled[0][0]) in self.counts:
                    self.counts[id(made)] = self.counts[id(ruled[0][0])]
                return
            # a value widened as made without a padded input, where the size
            # was another dimension's (the first 64 of GPT-2's fused q, k, v
            # at sequence length 64, split into heads): this op as it is
            narrowed = [o if type(o) is not Value or id(o[0]) not in self.fresh else _as_made(self, o[0])
                        for o in operands]
            if narrowed == operands or any(type(o) is not Value for o in operands) \
                    or any(p for o, p in zip(operands, pads) if id(o[0]) not in self.fresh):
                raise
            self.new[id(node)] = (self.make(op, tuple(narrowed), node.attrs, node.loc), [{} for _ in node.types])
            return
        self.new[id(node)] = (made, padded if type(padded) is list else [padded])  # (a list: one a result)
        if padded and not any(pads) and op in WIDENED and type(padded) is not list:
            self.fresh[id(made)] = node  # (a draw, of two results, is made again unwidened by another walk)
        if op in ("reduce_sum", "vector_sum", "column_sum"):
            count = self.count_of(node, pads[0])
            if count[1]:
                self.counts[id(made)] = count
        elif op in ("reshape", "convert", "broadcast_in_dim") and id(ruled[0][0]) in self.counts:
            self.counts[id(made)] = self.counts[id(operands[0][0])]

    def size_constant(self, node: Node):
        """An integer constant equal to a symbol's size or its negation (an
        index's bound check and wrap, ``index < n``, ``index + n``): that
        size's valid-size parameter instead, so every size of the bucket
        has the same program. Exact whatever the constant means: the
        parameter holds the same number."""
        value = node.attrs["value"]
        if value.dtype.kind not in "iu" or value.size == 0:
            return None
        v = int(value.flat[0])
        if not (value == v).all():
            return None
        sym = abs(v)
        if not self.as_read("size", self.sized(node.loc, sym), (sym,)):
            return None
        self.dependent[id(node)] = (sym,)
        n = self.value("convert", (Value(self.valid[sym], 0),), {"dtype": node.types[0].dtype})
        if v < 0:
            n = self.value("neg", (n,), {})
        if value.shape == ():
            return n[0], [{}]
        out = self.fresh_dims(value.shape)
        return self.splat(n, self.widened(value.shape, out))[0], [out]

    def sized(self, loc, n: int) -> bool:
        """Whether the integer ``n`` met at instruction ``loc`` is read as
        the symbol ``n``'s size: ``n`` is a symbol's, and no padded walk has
        met ``n`` there while it was no symbol's. A symbol is a number, so a
        fixed size equal to a count by chance (Faster R-CNN's bound of its
        270 anchors where 270 were sampled, of its 2 boxes where 2 were
        positive) would make the steps of that coincidence a program of
        their own, and of each combination of such coincidences another;
        as a number it is the other steps' program. Exact either way: the
        number is the step's. Learned as met, not by the symbols at the
        walk's end: an append after it may make ``n`` a symbol's (Mistral's
        window of 8 at its cache's ``index_copy_`` bound, met while the ids
        were 7 long, before the token's ``cat`` made them 8), and the next
        step, ``n`` long from the start, would read it as the size."""
        if n == 0:
            return False  # (every start and index is 0: a count of none has no constant of its own)
        if n < 2 or loc is None:
            return n in self.symbols
        if n not in self.symbols:
            self.numbers.add((loc, n))
            return False
        return (loc, n) not in LITERALS

    def learned(self) -> None:
        """Record the numbers met while no symbol's size (:meth:`sized`) and the readings (:meth:`as_read`)."""
        for key in self.numbers:
            if key not in LITERALS:
                LITERALS.put(key, True)
        for key, reading in self.readings.items():
            READINGS.put(key, reading)

    def count_of(self, node: Node, pads: dict) -> tuple[int, tuple[int, ...]]:
        source = node.operands[0][0].types[node.operands[0][1]].shape
        k, syms = 1, []
        for d in _summed(node):
            for n, sym in pads.get(d, ((source[d], None),)):
                if sym is None:
                    k *= n
                else:
                    syms.append(sym)
        return k, tuple(syms)

    def counted(self, count: tuple[int, tuple[int, ...]], dtype: str, shape: tuple) -> Value:
        """The element count of a masked sum, from the valid sizes, as ``dtype`` of ``shape``."""
        k, syms = count
        total = self.index_scalar(k) if k != 1 else None
        for sym in syms:
            v = Value(self.valid[sym], 0)
            total = v if total is None else self.value("mul", (total, v), {})
        return self.splat(self.value("convert", (total,), {"dtype": dtype}), shape)


def pad_graph(walk, marks: dict[int, dict[int, Factors]], symbols: dict[int, int],
              bucket_of=None, widen: bool = True) -> tuple[Padded, list[Value], list]:
    """``walk``'s graph with the ``marks`` (id(leaf or valid region) -> {dim: factors}) padded
    to ``symbols``' buckets: the :class:`Padded` state, the new output values,
    and per output its padded dims. Raises :class:`Refused`. ``symbols`` gains
    the symbols appends make (``bucket_of`` gives their buckets)."""
    recalled: list = []
    try:
        state = _walked(walk, marks, symbols, bucket_of, widen, recalled)
    except Refused:
        if not recalled:
            raise
        # a reading recalled from other sizes refused an op (a count's value
        # and another size's are one node at equal sizes: Faster R-CNN's
        # arange of its 12 anchors and of 12 sampled boxes): read as the sizes say
        state = _walked(walk, marks, symbols, bucket_of, widen, None)
    symbols.update(state.symbols)
    state.learned()
    outputs, out_pads = [], []
    for v in walk.outputs:
        new, padded = state.new[id(v[0])]
        outputs.append(Value(new, v[1]))
        out_pads.append(padded[v[1]])
    return state, outputs, out_pads


def _walked(walk, marks, symbols, bucket_of, widen, recalled) -> Padded:
    """The walks of :func:`pad_graph`: the last one's state."""
    as_made: dict[int, frozenset[int]] = {}
    first = None  # the first walk's first refusal
    for _ in range(_ROUNDS):
        state = Padded(dict(symbols), bucket_of)
        state.widen, state.as_made, state.recalled = widen, dict(as_made), recalled
        more: dict[int, frozenset[int]] = {}
        for node in walk.order:
            try:
                state.node(node, marks.get(id(node)))
            except Refused as e:
                first = str(e) if first is None else first
                found = {k: dims for k, dims in _by_chance(state, node).items()
                         if not dims <= as_made.get(k, frozenset())}
                if not found and not more:
                    if as_made and str(e) != first:  # (the values made as they are may have caused this one)
                        raise Refused(f"{first} (then, with values made at a symbol's size as they are: {e})") \
                            from None
                    raise
                # walked on with the node as it is, to find every such value in
                # one walk (this walk's graph is not the one kept; a refusal
                # after the first found may be of that node's making, and the
                # next walk tells)
                for k, dims in found.items():
                    more[k] = more.get(k, frozenset()) | dims
                state.new[id(node)] = (node, [{} for _ in node.types])
        if not more:
            break
        for k, dims in more.items():
            as_made[k] = as_made.get(k, frozenset()) | dims
    else:
        raise Refused(f"values made at a symbol's size by chance still refused after {_ROUNDS} walks")
    return state


def _refit(state, node, rule, operands, pads):
    """``node``'s rule where it refused, with one operand made without inputs
    (:attr:`Padded.fresh`) made again without one of its widened dimensions
    (Faster R-CNN's zeros of 102 boxes' 3 classes' 4 coordinates, widened
    along the 102 boxes and along the 4 coordinates where 4 positives were
    a symbol, scattered at the positives: the 4 is the coordinates', the
    102 the boxes'): (the node made, its result's pads, its operands);
    None where no such change fits."""
    if len(node.types) != 1 or any(type(o) is not Value for o in operands) or len(operands) != len(node.operands):
        return None
    for i, (o, p) in enumerate(zip(operands, pads)):
        if id(o[0]) not in state.fresh or len(p) < 2:
            continue
        shape = node.operands[i][0].types[node.operands[i][1]].shape
        for d in p:
            keep = {k: f for k, f in p.items() if k != d}
            tried = list(operands)
            tried[i] = _made_again(state, o[0], shape, keep)
            tried_pads = list(pads)
            tried_pads[i] = keep
            try:
                attrs, ruled, padded, *replaced = rule(state, node, tried, tried_pads)
                made = state.make(replaced[0] if replaced else node.op, tuple(ruled), attrs, node.loc)
            except Refused:
                continue
            return made, padded, ruled
    return None


_ROUNDS = 4
"""How many times :func:`pad_graph` walks the graph, each with more values kept as made."""


def _by_chance(state: Padded, refused: Node) -> dict[int, frozenset[int]]:
    """The values made without inputs that were widened along a symbol the
    refused node's padded operands hold, and reach it through padded values:
    id(original node) -> those dimensions. A symbol is a marked dimension's count, not a
    number: a value made at that size without anything marked reaching it
    (Faster R-CNN's gradient of 270 anchors' deltas where 270 boxes were
    sampled; roi_align's channel index beside 103 boxes of one level where
    the images' 103 proposals are a symbol) was widened by its size alone,
    and where that refuses an op, it is made at its own size instead."""
    if refused.is_leaf:
        return {}
    values = operand_values(refused)
    held = [(v[0].types[v[1]].shape, state.new[id(v[0])][1][v[1]]) for v in values if id(v[0]) in state.new]
    syms = {sym for _, p in held for f in p.values() for _, sym in f if sym is not None}
    # where operands of one rank disagree along a dimension (one padded, one
    # not, at one size), the symbols there are the suspects; else all of them
    split = {sym for shape, p in held for d, f in p.items() for _, sym in f if sym is not None
             and any(len(other) == len(shape) and q.get(d) != f and other[d] == shape[d] for other, q in held)}
    syms = split or syms
    found, stack, seen = {}, [v[0] for v in values], set()
    while stack:
        node = stack.pop()
        if id(node) in seen or id(node) not in state.new:
            continue
        seen.add(id(node))
        along = {d for p in state.new[id(node)][1] for d, f in p.items() if any(sym in syms for _, sym in f)}
        if not along:
            continue
        if id(node) not in state.marked or node.op in WIDENED:  # (a broadcast of a marked value widens too)
            found[id(node)] = frozenset(along)  # (only those: a legitimately widened dimension stays)
        if not node.is_leaf:
            stack.extend(v[0] for v in operand_values(node))
    return found


# --- the rules: (state, node, new operands, operand pads) -> (attrs, operands, result pads) ---


def _union(node, pads) -> dict[int, Factors]:
    out: dict[int, Factors] = {}
    for p in pads:
        for d, factors in p.items():
            if out.setdefault(d, factors) != factors:
                raise Refused(f"{_where(node)} combines values padded along dim {d} in different layouts")
    return out


def _elementwise(state, node, operands, pads):
    if node.op == "div":
        operands = _mean_count(state, node, operands)
    if state.fresh:
        operands, pads = _unwidened(state, node, operands, pads)
    out = _union(node, pads)
    operands = [v if p == out else _stretched(state, v, p, out) for v, p in zip(operands, pads)]
    return node.attrs, operands, out


def _unwidened(state, node, operands, pads):
    """Operands widened as made without a padded input (:attr:`Padded.fresh`)
    made again without the widened dimensions where another operand is
    unpadded at the same size: that size was not the symbol's there (the
    value is then the one a size that is no dimension's makes)."""
    shapes = [o[0].types[o[1]].shape for o in node.operands]
    operands, pads = list(operands), list(pads)
    for i, p in enumerate(pads):
        if id(operands[i][0]) not in state.fresh:
            continue
        wrong = {d for d in p for j, q in enumerate(pads)
                 if j != i and d not in q and len(shapes[j]) == len(shapes[i]) and shapes[j][d] == shapes[i][d]}
        if wrong:
            keep = {d: f for d, f in p.items() if d not in wrong}
            operands[i], pads[i] = _made_again(state, operands[i][0], shapes[i], keep), keep
    return operands, pads


def _as_made(state, made: Node) -> Value:
    """``made`` (:attr:`Padded.fresh`) unwidened: its original node where
    its operands are the original's (shared with the node's other users, as
    in a graph of sizes no dimension has), else that node over ``made``'s
    operands (never the unpadded graph's values: they would be computed
    twice)."""
    original = state.fresh[id(made)]
    if all(type(a) is Value and type(b) is Value and a[0] is b[0] and a[1] == b[1]
           for a, b in zip(made.operands, original.operands)):
        return Value(original, 0)
    key = (id(made), ())
    if key not in state.again:
        state.again[key] = Value(state.make(original.op, made.operands, original.attrs, original.loc), 0)
    return state.again[key]


def _made_again(state, made: Node, shape: tuple, dims: dict) -> Value:
    """``made`` (a broadcast, iota or constant made without a padded input)
    at its unpadded ``shape`` widened along ``dims`` only."""
    if not dims:
        return _as_made(state, made)
    key = (id(made), tuple(sorted(dims)))
    if key in state.again:
        return state.again[key]
    widened = state.widened(shape, dims)
    if made.op == "constant":
        value = made.attrs["value"]
        again = state.make("constant", (), {"value": np.full(widened, value.flat[0], value.dtype)})
    elif made.op == "slice":
        limit = tuple(state.size(dims[d]) if d in dims else n for d, n in enumerate(shape))
        again = state.make("slice", made.operands, {**made.attrs, "limit": limit})
    else:
        again = state.make(made.op, made.operands, {**made.attrs, "shape": widened})
    state.fresh[id(again)] = state.fresh[id(made)]
    state.again[key] = Value(again, 0)
    return state.again[key]


def _mean_count(state, node, operands):
    """A masked sum divided by its element count baked as a number (torch's
    ``mean``, ``var_mean``): the count from the valid sizes instead, so that
    every size of the bucket has the same program. Exact: only a number equal
    to this size's count is replaced."""
    count = state.counts.get(id(operands[0][0]))
    if count is None:
        return operands
    c = node.operands[1][0]
    if c.op == "broadcast_in_dim":
        c = c.operands[0][0]
    if c.op != "constant" or c.attrs["value"].size != 1:
        return operands
    k, syms = count
    if float(c.attrs["value"].flat[0]) != float(k * int(np.prod(syms, dtype=np.int64))):
        return operands
    rhs = operands[1]
    state.dependent[id(node)] = syms
    return [operands[0], state.counted(count, rhs.type.dtype, rhs.type.shape)]


def _stretched(state, v: Value, have: dict, want: dict) -> Value:
    """``v`` padded as ``want`` where it is constant along the dimensions it
    lacks (a bias broadcast to ``(batch * seq, d)``, an iota along another
    dimension, a splat: sizes no symbol has); else ``v`` (the op's rule then
    refuses the sizes)."""
    node = v[0]
    t = v.type
    op = node.op
    operands = node.operands
    if not have and op not in ("broadcast_in_dim", "iota", "constant"):
        return _stretched_through(state, v, want)
    if op == "broadcast_in_dim":
        source = node.operands[0][0].types[node.operands[0][1]].shape
        stretched = {d: i for i, d in enumerate(node.attrs["dims"])}
        fixed = {d for d in stretched if source[stretched[d]] != 1}
    elif op == "iota":
        d = node.attrs["dim"]
        # along its own dimension an iota widens only where the valid positions come first
        fixed = {d} if len(want.get(d, ())) != 1 else set()
    elif op == "constant" and node.attrs["value"].size and (node.attrs["value"] == node.attrs["value"].flat[0]).all():
        fixed = set()
    else:
        return v
    out = dict(have)
    for d, f in want.items():
        if d not in have:
            if d in fixed:
                return v
            out[d] = f
    widened = tuple(state.size(out[j]) if j in out else n for j, n in enumerate(t.shape))
    if op == "constant":
        value = node.attrs["value"]
        return state.value("constant", (), {"value": np.full(widened, value.flat[0], value.dtype)})
    return state.value(op, operands, {**node.attrs, "shape": widened})


def _stretched_through(state, v: Value, want: dict) -> Value:
    """An unpadded value computed elementwise from values that
    :func:`_stretched` widens (``log_softmax``'s SLEEF log: its constants
    converted to float64 and multiplied before they meet the padded sums),
    made again from the widened ones: constant along the dimensions it
    lacks, as they are. ``v`` itself where any operand does not widen."""
    node = v[0]
    spec = None if node.is_leaf else OPS.get(f"lazy.{node.op}")
    if spec is None or spec.padding != "elementwise" or not spec.pure or len(node.types) != 1:
        return v
    key = (id(node), tuple(sorted(want.items())))
    if key in state.stretched:
        return state.stretched[key]
    state.stretched[key] = v  # (until made: a value reached twice is widened once)
    rank = v.type.rank
    operands = []
    for o in node.operands:
        if type(o) is not Value or o.type.rank != rank:
            return v
        wide = _stretched(state, o, {}, want)
        if wide is o:
            return v
        operands.append(wide)
    state.stretched[key] = state.value(node.op, tuple(operands), node.attrs)
    return state.stretched[key]


def _check(state, node, operands, pads):
    """A value check of a padded value; its message's sizes that are a
    symbol's (``index 40 is out of bounds for dimension 1 with size 33``)
    are left out of the program, so every size of the bucket has one: a
    failed check's message is read from the unpadded graph's check."""
    return {**node.attrs, "message": _message(state, node)}, operands, dict(pads[0])


def _message(state, node) -> str:
    """A check's message with the sizes that are a symbol's left out."""
    numbers = itertools.count()  # (each number's reading kept apart: "size", k)

    def read(m):
        n = int(m.group())
        return "{size}" if state.as_read(("size", next(numbers)), state.sized(node.loc, n), (n,)) else m.group()

    return _SIZE.sub(read, node.attrs["message"])


_SIZE = re.compile(r"(?<![\w.{])(?<!dimension )\d+(?![\w.}])")
"""A number in a check's message that may be a size (a dimension's index is none: torch's
``... for dimension 2 with size 7`` keeps its 2 whatever sizes are symbols)."""


def _broadcast(state, node, operands, pads):
    dims, shape = node.attrs["dims"], node.attrs["shape"]
    source = node.operands[0][0].types[node.operands[0][1]].shape
    out = {dims[i]: f for i, f in pads[0].items()}
    stretched = {d: i for i, d in enumerate(dims)}
    for j, f in state.fresh_dims(shape).items():
        if j not in out and (j not in stretched or source[stretched[j]] == 1):
            out[j] = f  # constant along j: widening keeps the valid positions
    return {**node.attrs, "shape": state.widened(shape, out)}, operands, out


def _made(state, node, operands, pads):
    out = state.fresh_dims(node.types[0].shape)
    if node.op == "iota":
        return {**node.attrs, "shape": state.widened(node.attrs["shape"], out)}, operands, out
    value = node.attrs["value"]
    if value.size == 0 or not (value == value.flat[0]).all():
        return node.attrs, operands, {}  # not constant along its dims: kept as it is
    return {"value": np.full(state.widened(value.shape, out), value.flat[0], value.dtype)}, operands, out


def _random_bits(state, node, operands, pads):
    """Random bits widened along a symbol's size (dropout's over a padded
    batch or sequence) as the draw at the valid sizes gives them, and the
    state after that draw: a padded step draws the unpadded step's numbers.
    A counter-based (``three_fry``) draw of ``n`` elements is the first ``n``
    of any longer draw from its state and moves its counter, the state's
    second word, by ``n`` (64-bit bits) or ``n / 2`` rounded up (tests/torch/
    test_random_under_buckets.py holds XLA to it): so the bits are drawn flat at
    the padded count and each valid position reads its unpadded flat index
    (the padded value itself where that is the same: the first dimension's
    padding), and the counter moves by the valid count. The padded
    positions read bits of the draw too, which nothing valid reads."""
    shape, dtype = tuple(node.attrs["shape"]), node.attrs["dtype"]
    if node.attrs["algorithm"] != "three_fry":
        raise Refused(f"{_where(node)} draws {node.attrs['algorithm']} bits along a padded dimension")
    out = state.fresh_dims(shape)
    wide = state.widened(shape, out)
    total = int(np.prod(wide, dtype=np.int64))
    drawn = state.make(node.op, tuple(operands), {**node.attrs, "shape": (total,)}, node.loc)
    bits = Value(drawn, 1)
    dims = [out.get(j, ((n, None),)) for j, n in enumerate(shape)]
    factors = [f for fs in dims for f in fs]
    first = next(k for k, (_, sym) in enumerate(factors) if sym is not None)
    if all(state.size((f,)) == 1 for f in factors[:first]) and all(sym is None for _, sym in factors[first + 1:]):
        bits = state.value("reshape", (bits,), {"shape": wide})  # the valid positions come first
    else:
        bits = state.value("gather", (bits, _unpadded_index(state, wide, dims, total)), dict(
            offset_dims=(), collapsed_slice_dims=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
            start_index_map=(0,), index_vector_dim=len(wide), slice_sizes=(1,), indices_are_sorted=False))
    count = None
    for n, sym in factors:
        size = state.index_scalar(n) if sym is None else Value(state.valid[sym], 0)
        size = state.value("convert", (size,), {"dtype": "ui64"})
        count = size if count is None else state.value("mul", (count, size), {})
    if to_numpy_dtype(dtype).itemsize < 8:  # two 32-bit words per counter
        one, two = (state.value("constant", (), {"value": np.asarray(k, np.uint64)}) for k in (1, 2))
        count = state.value("div", (state.value("add", (count, one), {}), two), {})
    zero = state.value("constant", (), {"value": np.zeros(1, np.uint64)})
    moved = state.value("concatenate", (zero, state.value("reshape", (count,), {"shape": (1,)})), {"dim": 0})
    after = state.value("add", (operands[0], moved), {})
    return {}, ((after, bits),), [{}, out], "optimization_barrier"


def _unpadded_index(state, wide: tuple, dims: list, total: int) -> Value:
    """Per position of ``wide`` (and a trailing index vector of one), its
    flat index in the value at the valid sizes. ``dims``: each dimension's
    factors, outermost first; the padded positions' indices stay below
    ``total``, the padded count."""
    itype = "i32" if total < 2**31 else "i64"
    shape = wide + (1,)
    index, stride = None, None
    for j in range(len(dims) - 1, -1, -1):
        sizes = [state.size((f,)) for f in dims[j]]
        flat = state.value("iota", (), {"dim": j, "shape": shape, "dtype": itype})
        for at in range(len(dims[j]) - 1, -1, -1):
            n, sym = dims[j][at]
            one = state.factor_index(flat, sizes, at, itype)
            if stride is not None:
                one = state.value("mul", (one, state.splat(stride, shape)), {})
            index = one if index is None else state.value("add", (index, one), {})
            size = state.index_scalar(n, itype) if sym is None else _converted(state, state.valid[sym], itype)
            stride = size if stride is None else state.value("mul", (stride, size), {})
    return index


def _converted(state, valid, itype: str) -> Value:
    v = Value(valid, 0)
    return v if itype == "i32" else state.value("convert", (v,), {"dtype": itype})


def _barrier(state, node, operands, pads):
    """An optimization barrier's results are its operands, each padded as its operand is."""
    return node.attrs, operands, [dict(p) for p in pads]


def _reshape(state, node, operands, pads):
    source = node.operands[0][0].types[node.operands[0][1]].shape
    shape = node.attrs["shape"]
    factors = []  # the operand's elements as factors, outermost first
    for d, n in enumerate(source):
        factors.extend(pads[0].get(d, ((n, None),)))
    factors = [f for f in factors if f[0] != 1 or f[1] is not None]
    factors.reverse()  # popped from the end
    out = {}
    for j, r in enumerate(shape):
        group, size = [], 1
        if r == 0 and factors and factors[-1][0] == 0:  # (a count of none: its factor is the dimension)
            group.append(factors.pop())
            size = r
        while size < r:
            if not factors:
                raise Refused(f"{_where(node)}: reshape {source} -> {shape} does not split evenly")
            n, sym = factors.pop()
            if r % (size * n) == 0:
                group.append((n, sym))
                size *= n
            elif sym is None and n % (r // size) == 0:  # an unpadded factor splits freely
                k = r // size
                group.append((k, None))
                factors.append((n // k, None))
                size = r
            else:
                raise Refused(f"{_where(node)} splits a padded dimension ({source} -> {shape})")
        if any(sym is not None for _, sym in group):
            out[j] = tuple(group)
    return {**node.attrs, "shape": state.widened(shape, out)}, operands, out


def _permute(state, node, operands, pads):
    dims = node.attrs["dims"]
    return node.attrs, operands, {i: pads[0][d] for i, d in enumerate(dims) if d in pads[0]}


def _kept(pads: dict[int, Factors], removed) -> dict[int, Factors]:
    removed = sorted(removed)
    return {d - sum(r < d for r in removed): f for d, f in pads.items() if d not in removed}


def _reduce(state, node, operands, pads):
    """Reduced over ``dims`` (or the one ``dim`` of an arg-reduction): their
    padded positions masked with the op's identity, the kept dims padded still."""
    dims = node.attrs["dims"] if "dims" in node.attrs else (node.attrs["dim"],)
    masked = {d: pads[0][d] for d in dims if d in pads[0]}
    if masked:
        operands = [state.mask(operands[0], masked, spec_of(node.op).identity)]
    return node.attrs, operands, _kept(pads[0], dims)


def _summed(node: Node) -> tuple[int, ...]:
    """The dims a sum reduces: its ``dims``, or ``vector_sum``'s and ``norm_squares``' rows (the last)
    and ``column_sum``'s (the second-to-last)."""
    if "dims" in node.attrs:
        return tuple(node.attrs["dims"])
    rank = len(node.operands[0][0].types[node.operands[0][1]].shape)
    return (rank - 1,) if node.op in ("vector_sum", "norm_squares") else (rank - 2,)


def _eager_sum(state, node, operands, pads):
    """``vector_sum``, ``column_sum``, ``norm_squares``: what is not summed is independent, padded
    still. A padded summed dimension is masked with zeros and summed at the
    bucket's length (its sum, in the sequence of that length, not the valid one's)."""
    (summed,) = _summed(node)
    if summed in pads[0]:
        operands = [state.mask(operands[0], {summed: pads[0][summed]}, "zero")]
    return node.attrs, operands, _kept(pads[0], (summed,))


def _pair(node, pa, pb, lhs_dims, rhs_dims) -> dict[int, Factors]:
    """Position in the pairs -> the factors of the padded ones (both sides agree)."""
    out = {}
    for i, (l, r) in enumerate(zip(lhs_dims, rhs_dims)):
        fa, fb = pa.get(l), pb.get(r)
        if fa is not None and fb is not None and fa != fb:
            raise Refused(f"{_where(node)} pairs dimensions padded in different layouts")
        if fa or fb:
            out[i] = fa or fb
    return out


def _dot(state, node, operands, pads):
    a = node.attrs
    pa, pb = pads
    lhs, rhs = operands
    contracted = _pair(node, pa, pb, a["lhs_contract"], a["rhs_contract"])
    if contracted:
        lhs = state.mask(lhs, {a["lhs_contract"][i]: f for i, f in contracted.items()}, "zero")
        rhs = state.mask(rhs, {a["rhs_contract"][i]: f for i, f in contracted.items()}, "zero")
    out = _pair(node, pa, pb, a["lhs_batch"], a["rhs_batch"])
    k = len(a["lhs_batch"])
    for side, p, used in ((0, pa, a["lhs_batch"] + a["lhs_contract"]), (1, pb, a["rhs_batch"] + a["rhs_contract"])):
        for d in range(operands[side].type.rank):
            if d not in used:
                if d in p:
                    out[k] = p[d]
                k += 1
    return a, [lhs, rhs], out


def _slice(state, node, operands, pads):
    shifted = _shifted(state, node)
    if shifted is not None:
        return shifted
    a = node.attrs
    source = node.operands[0][0].types[node.operands[0][1]].shape
    parts = _parts(state, a, pads[0], source, operands[0].type.shape)
    if parts:
        return _slice_parts(state, node, operands, pads, parts)
    tails = [d for d, f in pads[0].items() if _tail(a, d, f, source)]
    if tails:
        return _slice_tail(state, node, operands, pads, tails)
    limit = list(a["limit"])
    out = dict(pads[0])
    for d, f in pads[0].items():
        if a["limit"][d] < source[d] and len(f) == 1 and f[0][1] is not None:
            # inside the valid part (a split's first part, ``x[:k]``): the
            # padded value holds the unpadded one's positions there, so the
            # slice reads the same values; its result is unpadded
            del out[d]
            continue
        if a["start"][d] != 0 or a["strides"][d] != 1 or a["limit"][d] != source[d]:
            raise Refused(f"{_where(node)} takes part of a padded dimension")
        limit[d] = state.size(f)
    for d, f in state.fresh_dims(node.types[0].shape).items():
        b = state.size(f)
        if d not in out and a["start"][d] == 0 and a["strides"][d] == 1 and source[d] >= b:
            # the first n of a longer dimension (a causal mask buffer's [:t, :t]): its first b
            out[d] = f
            limit[d] = b
    return {**a, "limit": tuple(limit)}, operands, out


def _shifted(state, node):
    """A slice that takes a value padded at the end of a padded dimension
    by ``k`` from a start ``s <= k`` on, as long as the value (transformers'
    causal-LM labels: ``pad(labels, (0, 1), value=-100)[..., 1:]``, the
    labels shifted left): the padded value shifted left by ``s``, with the
    padding value from ``valid - s`` on; padded as the value is. None where
    the slice is another (``_pad`` then made the padded value at its own
    size, a fixed length's)."""
    source = node.operands[0][0]
    if source.is_leaf or source.op != "pad" or type(node.operands[0]) is not Value:
        return None
    x, value = source.operands
    xpads = state.new[id(x[0])][1][x[1]]
    xshape = x[0].types[x[1]].shape
    a, p = node.attrs, source.attrs
    shifts = {}
    for d, n in enumerate(source.types[0].shape):
        s, limit = a["start"][d], a["limit"][d]
        if a["strides"][d] != 1 or p["interior"][d]:
            return None
        f = xpads.get(d)
        if f is not None and len(f) == 1 and f[0][1] is not None and not p["low"][d] \
                and 0 < s <= p["high"][d] and limit - s == xshape[d]:
            shifts[d] = s
        elif s or limit != n or p["low"][d] or p["high"][d]:
            return None
    if not shifts:
        return None
    x, value = state.moved(x), state.moved(value)
    wide = x.type.shape
    zeros = (0,) * len(wide)
    at = tuple(shifts.get(d, 0) for d in range(len(wide)))
    moved = state.value("pad", (x, value), {"low": zeros, "high": at, "interior": zeros})
    moved = state.value("slice", (moved,), {"start": at, "limit": tuple(s + n for s, n in zip(at, wide)),
                                            "strides": (1,) * len(wide)})
    pred = None
    for d, s in shifts.items():
        index = state.value("iota", (), {"dim": d, "shape": wide, "dtype": "i32"})
        index = state.value("add", (index, state.splat(state.index_scalar(s), wide)), {})
        valid = state.splat(Value(state.valid[xpads[d][0][1]], 0), wide)
        below = state.value("compare", (index, valid), {"direction": "LT"})
        pred = below if pred is None else state.value("and", (pred, below), {})
    return {}, [pred, moved, state.splat(value, wide)], dict(xpads), "select"


def _tail(a, d: int, factors: Factors, source: tuple) -> bool:
    """Whether the slice takes the last positions of padded dimension ``d``
    (``x[:, -1:]``: the newest token of a growing sequence)."""
    return (len(factors) == 1 and factors[0][1] is not None and a["strides"][d] == 1
            and a["limit"][d] == source[d] and a["start"][d] > 0)


def _slice_tail(state, node, operands, pads, tails):
    """The last ``k`` positions of padded dimensions: a ``dynamic_slice`` that
    starts ``k`` before the valid size, so every size of the bucket slices
    the same way. The other dimensions are sliced as they are first."""
    a = node.attrs
    x = operands[0]
    source = node.operands[0][0].types[node.operands[0][1]].shape
    start, limit, strides = list(a["start"]), list(a["limit"]), list(a["strides"])
    for d, f in pads[0].items():
        if d in tails:
            start[d], limit[d] = 0, state.size(f)
        elif a["start"][d] != 0 or a["strides"][d] != 1 or a["limit"][d] != source[d]:
            raise Refused(f"{_where(node)} takes part of a padded dimension")
        else:
            limit[d] = state.size(f)
    if tuple(start) != (0,) * len(start) or tuple(limit) != x.type.shape or set(strides) != {1}:
        x = state.value("slice", (x,), {"start": tuple(start), "limit": tuple(limit), "strides": tuple(strides)})
    starts, sizes = [], list(x.type.shape)
    for d in range(x.type.rank):
        if d in tails:
            k = source[d] - a["start"][d]
            sym = pads[0][d][0][1]
            starts.append(state.value("sub", (Value(state.valid[sym], 0), state.index_scalar(k)), {}))
            sizes[d] = k
        else:
            starts.append(state.index_scalar(0))
    out = {d: f for d, f in pads[0].items() if d not in tails}
    return {"sizes": tuple(sizes)}, [x, tuple(starts)], out, "dynamic_slice"


def _parts(state, a, pads: dict, source: tuple, shape: tuple) -> dict[int, tuple[int, int]]:
    """The padded dimensions of which the slice takes a symbol's part
    starting at 0, at another symbol's size (``targets.split(counts)`` of
    values joined per image, :func:`_joined`), or at a plain size (the part
    after an unpadded image's rows): dim -> (start, size)."""
    out = {}
    for d, f in pads.items():
        s, n = a["start"][d], a["limit"][d] - a["start"][d]
        if (len(f) != 1 or f[0][1] is None or a["strides"][d] != 1 or n == source[d] or n < 2
                or n not in state.symbols):
            continue
        if state.symbols[n] + state.symbols.get(s, s) <= shape[d]:  # (it never leaves the value)
            out[d] = (s, n)
    return out


def _slice_parts(state, node, operands, pads, parts):
    """A symbol's part of padded dimensions (:func:`_parts`): a
    ``dynamic_slice`` at the start's valid size (0), as wide as the part's
    bucket; the part is that symbol's, padded. The other dimensions are
    sliced as they are first; other padded ones must be taken whole."""
    a = node.attrs
    x = operands[0]
    source = node.operands[0][0].types[node.operands[0][1]].shape
    start, limit = list(a["start"]), list(a["limit"])
    for d, f in pads[0].items():
        if d in parts:
            start[d], limit[d] = 0, x.type.shape[d]
        elif a["start"][d] != 0 or a["strides"][d] != 1 or a["limit"][d] != source[d]:
            raise Refused(f"{_where(node)} takes part of a padded dimension")
        else:
            limit[d] = state.size(f)
    if tuple(start) != (0,) * len(start) or tuple(limit) != x.type.shape or set(a["strides"]) != {1}:
        x = state.value("slice", (x,), {"start": tuple(start), "limit": tuple(limit), "strides": a["strides"]})
    starts, sizes = [], list(x.type.shape)
    for d in range(x.type.rank):
        if d in parts:
            s, n = parts[d]
            starts.append(Value(state.valid[s], 0) if s in state.valid else state.index_scalar(s))
            sizes[d] = state.symbols[n]
        else:
            starts.append(state.index_scalar(0))
    out = {d: f for d, f in pads[0].items() if d not in parts}
    out.update({d: ((n, n),) for d, (_, n) in parts.items()})
    return {"sizes": tuple(sizes)}, [x, tuple(starts)], out, "dynamic_slice"


def _concatenate(state, node, operands, pads):
    d = node.attrs["dim"]
    if not any(d in p for p in pads):
        return node.attrs, operands, _union(node, pads)
    if any(d in p for p in pads[1:]):
        return _joined(state, node, operands, pads)
    return _append(state, node, operands, pads)


def _joined(state, node, operands, pads):
    """Values joined along a dimension padded in more than the first of them
    (a detection model's per-image boxes, ``torch.cat(proposals)``): each is
    written at the sum of the valid sizes before it (``dynamic_update_slice``
    into zeros as wide as all of them at bucket sizes: a write never leaves
    it, so never moves), so the valid positions come first, in order, and
    each one's padding lands past them or under the next one's values. The
    result's valid size is a symbol of its own, padded to that width."""
    d = node.attrs["dim"]
    others = [{j: f for j, f in p.items() if j != d} for p in pads]
    if any(o != others[0] for o in others[1:]):
        raise Refused(f"{_where(node)} joins values padded in different layouts")
    sources = [o[0].types[o[1]].shape[d] for o in operand_values(node)]
    offsets, width, at = [], 0, None
    for o, p, n in zip(operands, pads, sources):
        f = p.get(d)
        if f is not None and (len(f) != 1 or f[0][1] is None):
            raise Refused(f"{_where(node)} joins along a dimension padded as several factors")
        offsets.append(at if at is not None else state.index_scalar(0))
        valid = state.index_scalar(n) if f is None else Value(state.valid[f[0][1]], 0)
        at = valid if at is None else state.value("add", (at, valid), {})
        width += o.type.shape[d]
    total = node.types[0].shape[d]
    if state.symbols.setdefault(total, width) != width:
        raise Refused(f"{_where(node)} joins into a size another dimension pads otherwise")
    if total not in state.valid:
        state.valid[total] = Scalar(np.asarray(total, np.int32), "i32")
        state.derived.add(total)
    shape = list(operands[0].type.shape)
    shape[d] = width
    dtype = operands[0].type.dtype
    x = state.splat(state.value("constant", (), {"value": fill_value("zero", dtype)}), tuple(shape))
    rank = len(shape)
    for k, (o, start) in enumerate(zip(operands, offsets)):
        starts = tuple(start if j == d else state.index_scalar(0) for j in range(rank))
        if k == len(operands) - 1:
            out = dict(others[0])
            out[d] = ((total, total),)
            return {}, [x, o, starts], out, "dynamic_update_slice"
        x = state.value("dynamic_update_slice", (x, o, starts), {})


def _append(state, node, operands, pads):
    """Values appended along a padded dimension (a key-value cache or the
    generated tokens growing by one): the first operand padded there, the
    others not. The result's valid size ``n + m`` is a symbol of its own; the
    appended values are written at the first operand's valid size with
    ``dynamic_update_slice`` into the first operand widened to that symbol's
    bucket, so every ``n`` of the bucket makes the same program (``n`` and
    ``n + m`` in the same bucket; crossing into the next bucket is another)."""
    d = node.attrs["dim"]
    first = pads[0].get(d)
    if first is None or len(first) != 1 or any(d in p for p in pads[1:]):
        raise Refused(f"{_where(node)} joins along a padded dimension")
    others = [{j: f for j, f in p.items() if j != d} for p in pads]
    if any(o != others[0] for o in others[1:]):
        raise Refused(f"{_where(node)} joins values padded in different layouts")
    n, sym = first[0]
    m = operands[1].type.shape[d]
    total = n + m
    if state.bucket_of is None:
        raise Refused(f"{_where(node)} joins along a padded dimension")
    x = operands[0]
    have = x.type.shape[d]
    if total not in state.symbols:
        b = state.bucket_of(total)
        if b is None:
            raise Refused(f"{_where(node)} grows a padded dimension past the largest bucket")
        # (a count padded wider than its bucket, frontends/torch/counts.py's
        # width: Faster R-CNN's proposals, then its gt boxes appended, stay that wide)
        state.symbols[total] = max(b, have)
        state.valid[total] = Scalar(np.asarray(total, np.int32), "i32")
        state.derived.add(total)
    width = state.symbols[total]
    if width < have:
        raise Refused(f"{_where(node)} joins into a smaller bucket")
    if width > have:  # widened to the result's bucket with zeros
        shape = list(x.type.shape)
        shape[d] = width - have
        zero = state.splat(state.value("constant", (), {"value": fill_value("zero", x.type.dtype)}), tuple(shape))
        x = state.value("concatenate", (x, zero), {"dim": d})
    out = dict(others[0])
    out[d] = ((total, total),)
    rows = _rows(state, operands[1], d, width) if len(operands) == 2 else None
    if rows is not None:
        # rows all alike (a sequence padded to a fixed length with copies of a
        # filler, UDOP's ``pad_sequence``): the filler past the valid size, at
        # any length, so every split of the fixed length is one program
        return {}, [state.inside(x.type.shape, d, first), x, rows], out, "select"
    update = operands[1]
    starts = tuple(Value(state.valid[sym], 0) if j == d else state.index_scalar(0) for j in range(x.type.rank))
    return {}, [x, update, starts], out, "dynamic_update_slice"


def _rows(state, v: Value, d: int, width: int) -> Value | None:
    """``v`` made again ``width`` long along ``d`` where its rows along ``d``
    are all one value (a broadcast along ``d``, seen through converts and
    reshapes that come back to its shape); None where they may differ."""
    shape = v.type.shape
    node, converts = v[0], []
    while not (node.op == "broadcast_in_dim" and node.types[0].shape == shape) \
            and node.op in ("convert", "reshape") and not node.is_leaf:
        if node.op == "convert":
            converts.append(node.attrs["dtype"])
        node = node.operands[0][0]
    if node.is_leaf or node.op != "broadcast_in_dim" or node.types[0].shape != shape or d in node.attrs["dims"]:
        return None
    wide = list(shape)
    wide[d] = width
    out = state.value("broadcast_in_dim", (node.operands[0],), {"dims": node.attrs["dims"], "shape": tuple(wide)})
    for dtype in reversed(converts):
        out = state.value("convert", (out,), {"dtype": dtype})
    return out


def _pad(state, node, operands, pads):
    a = node.attrs
    ends = [d for d, f in pads[0].items() if not a["low"][d] and not a["interior"][d] and a["high"][d]
            and len(f) == 1 and f[0][1] is not None]
    for d in pads[0]:
        if d not in ends and (a["low"][d] or a["high"][d] or a["interior"][d]):
            raise Refused(f"{_where(node)} pads a padded dimension")
    if not ends:
        return a, operands, dict(pads[0])
    # padded at its end to a size of its own (transformers' attention mask
    # padded to a static cache's length): the result has that size, unpadded;
    # its positions past the valid size take the padding value
    source = node.operands[0][0].types[node.operands[0][1]].shape
    x, value = operands
    high = list(a["high"])
    for d in ends:
        high[d] = source[d] + a["high"][d] - x.type.shape[d]
    padded = state.value("pad", (x, value), {**a, "high": tuple(high)})
    shape = padded.type.shape
    pred = None
    for d in ends:
        below = state.inside(shape, d, pads[0][d])
        pred = below if pred is None else state.value("and", (pred, below), {})
    fill = state.splat(value, shape)
    out = {d: f for d, f in pads[0].items() if d not in ends}
    return {}, [pred, padded, fill], out, "select"


def _reverse(state, node, operands, pads):
    if any(d in pads[0] for d in node.attrs["dims"]):
        raise Refused(f"{_where(node)} reverses a padded dimension")
    return node.attrs, operands, dict(pads[0])


def _index_batch(rank: int, index_vector_dim: int) -> list[int]:
    """The dimensions of an index array that enumerate lookups (all but the index vector's)."""
    return [d for d in range(rank) if d != index_vector_dim]


def _gather(state, node, operands, pads):
    """Lookups at padded indices (an embedding of padded tokens): the padded
    positions look up something (indices are clamped) and stay garbage. A
    padded dimension of the operand that every lookup takes whole (``x[:, idx]``
    of a batch) stays padded in the result. A padded dimension that the
    lookups index (transformers' padding mask read at every key position,
    ``mask[batch, kv_idx]``) keeps its values below the valid size, so a
    lookup there reads what the unpadded one reads once its index is clamped
    to the valid size as XLA clamps it to the unpadded one
    (:func:`_clamped_indices`)."""
    a = node.attrs
    pa, pi = pads
    source = node.operands[0][0].types[node.operands[0][1]].shape
    indexed = set(a["start_index_map"]) | set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])
    looked_up = {d: f for d, f in pa.items() if d in a["start_index_map"] and d not in a["operand_batching_dims"]
                 and len(f) == 1 and f[0][1] is not None and a["slice_sizes"][d] <= f[0][0]}
    if any(d not in looked_up and (d in indexed or a["slice_sizes"][d] != source[d]) for d in pa) \
            or any(d in pi for d in a["start_indices_batching_dims"]) or a["index_vector_dim"] in pi:
        raise Refused(f"{_where(node)} gathers along a padded dimension")
    if looked_up:
        operands = [operands[0], _clamped_indices(state, operands[1], a, looked_up)]
    batch = _index_batch(operands[1].type.rank, a["index_vector_dim"])
    rank = len(a["offset_dims"]) + len(batch)
    positions = [j for j in range(rank) if j not in a["offset_dims"]]
    out = {positions[k]: pi[d] for k, d in enumerate(batch) if d in pi}
    windows = [d for d in range(len(source)) if d not in set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])]
    sizes = list(a["slice_sizes"])
    for d, f in pa.items():
        if d not in looked_up:
            out[a["offset_dims"][windows.index(d)]] = f
            sizes[d] = state.size(f)
    return {**a, "slice_sizes": tuple(sizes)}, operands, out


def _clamped_indices(state, indices: Value, a: dict, looked_up: dict) -> Value:
    """``indices`` with each component that indexes a padded operand
    dimension at most ``valid size - slice size`` (the last start XLA
    allows in the unpadded operand); the others as they are."""
    t = indices.type
    vector = a["index_vector_dim"]
    for k, d in enumerate(a["start_index_map"]):
        if d not in looked_up:
            continue
        (_, sym), = looked_up[d]
        top = Value(state.valid[sym], 0)
        if a["slice_sizes"][d] != 1:
            top = state.value("sub", (top, state.index_scalar(a["slice_sizes"][d] - 1)), {})
        last = state.value("sub", (top, state.index_scalar(1)), {})
        last = state.splat(state.value("convert", (last,), {"dtype": t.dtype}), t.shape)
        clamped = state.value("minimum", (indices, last), {})
        if vector < t.rank and t.shape[vector] > 1:  # only component k of the index vectors
            component = state.value("iota", (), {"dim": vector, "shape": t.shape, "dtype": "i32"})
            is_k = state.value("compare", (component, state.splat(state.index_scalar(k), t.shape)),
                               {"direction": "EQ"})
            clamped = state.value("select", (is_k, clamped, indices), {})
        indices = clamped
    return indices


def _scatter(state, node, operands, pads):
    """Updates at padded index positions (an embedding's gradient; ``mask[idx]
    = 1`` or ``out[idx] = rows`` with ``idx`` the indices of a padded count)
    are dropped: their index vectors are moved to the operand's end, where
    XLA's scatter skips an update whose window leaves the operand
    (:func:`_dropped`), so neither their garbage indices nor their garbage
    values change anything, in every mode (``replace`` too); the valid ones
    write what the unpadded scatter writes. An operand padded along a
    dimension the indices select in (a pooler's ``result[idx_in_level] =
    ...``) stays padded there: a valid index is below the valid size (eager's
    bounds check holds it there; a negative one wraps by the valid size), so
    only the padding's garbage is past it. A padded window dimension, taken
    whole by every update, is padded alike in the operand, the updates and
    the result."""
    a = node.attrs
    po, pi, pu = pads
    if a["index_vector_dim"] in pi or any(d in pi for d in a["scatter_indices_batching_dims"]) \
            or any(d in po for d in a["input_batching_dims"]):
        raise Refused(f"{_where(node)} scatters along a padded batching or index vector dimension")
    source = node.operands[0][0].types[node.operands[0][1]].shape
    updates = node.operands[2][0].types[node.operands[2][1]].shape
    window = a["update_window_dims"]
    windows = [d for d in range(len(source)) if d not in a["inserted_window_dims"] and d not in a["input_batching_dims"]]
    for u, d in zip(window, windows):
        if (po.get(d) or pu.get(u)) and (po.get(d) != pu.get(u) or updates[u] != source[d]
                                         or d in a["scatter_dims_to_operand_dims"]):
            raise Refused(f"{_where(node)} scatters part of a padded dimension")
    scattered = [d for d in range(operands[2].type.rank) if d not in window]
    batch = _index_batch(operands[1].type.rank, a["index_vector_dim"])
    dropped = {}
    for u, i in zip(scattered, batch):
        if pu.get(u) != pi.get(i):  # (padded updates at unpadded indices, or the other way: sizes that differ)
            raise Refused(f"{_where(node)} pairs dimensions padded in different layouts")
        if i in pi:
            dropped[i] = pi[i]
    indices = _dropped(state, node, operands[1], dropped, operands[0].type.shape) if dropped else operands[1]
    return a, [operands[0], indices, operands[2]], dict(po)


def _dropped(state, node, indices: Value, dims: dict[int, Factors], shape: tuple) -> Value:
    """``indices`` with each index vector at a padded position of ``dims``
    (index dimension -> factors) set to the operand's ``shape`` (at bucket
    sizes) in every component: an update there starts at the operand's end,
    outside it, and XLA's scatter skips it."""
    a = node.attrs
    t = indices.type
    dtype = to_numpy_dtype(t.dtype)
    ends = np.asarray([shape[d] for d in a["scatter_dims_to_operand_dims"]], np.int64)
    if ends.max(initial=0) > np.iinfo(dtype).max:
        raise Refused(f"{_where(node)} has indices too narrow to point past a padded operand")
    vector = a["index_vector_dim"]
    if vector < t.rank:  # component k of every index vector: the end of the operand dimension it indexes
        end = state.value("constant", (), {"value": ends.astype(dtype)})
        end = state.value("broadcast_in_dim", (end,), {"dims": (vector,), "shape": t.shape})
    else:
        end = state.splat(state.value("constant", (), {"value": np.asarray(ends[0], dtype)}), t.shape)
    pred = None
    for d, factors in sorted(dims.items()):
        below = state.inside(t.shape, d, factors)
        pred = below if pred is None else state.value("and", (pred, below), {})
    return state.value("select", (pred, indices, end), {})


def _convolution(state, node, operands, pads):
    """N,C,spatial: a padded batch (input dim 0) or output feature (kernel
    dim 0) dimension stays padded in the result; a padded input feature
    dimension is contracted (both operands masked with zeros, as in
    ``dot_general``: a weight gradient contracts the batch this way); a
    window never slides over padding."""
    a = node.attrs
    pi, pk = pads
    if any(d >= 2 for d in pi) or any(d >= 2 for d in pk):
        raise Refused(f"{_where(node)} slides its window along a padded dimension")
    inp, kernel = operands
    contracted = _pair(node, pi, pk, (1,), (1,))
    if contracted:
        if a["groups"] != 1:
            raise Refused(f"{_where(node)} groups a padded feature dimension")
        inp, kernel = state.mask(inp, {1: contracted[0]}, "zero"), state.mask(kernel, {1: contracted[0]}, "zero")
    out = {}
    if 0 in pi:
        out[0] = pi[0]
    if 0 in pk:
        out[1] = pk[0]
    return a, [inp, kernel], out


def _lanes(state, node, operands, pads):
    """``lane_sum``/``lane_moments`` reduce each row's last dimension in eager's
    vector lanes; a padded leading dimension stays padded in every result,
    rows being independent. A ``lane_sum`` row padded at its end
    (:func:`_lane_sum_row`) keeps eager's sum; ``lane_moments``' Welford
    weights depend on the row's length (refused)."""
    last = len(node.types[0].shape)
    row = next((p[last] for p in pads if last in p), None)
    if row is not None and node.op != "lane_sum":
        raise Refused(f"{_where(node)} takes moments of a padded row in eager's vector lanes")
    out = _union(node, pads)
    # (a multiplier of ones made at the rows' unpadded size: constant along them)
    operands = [v if p == out else _stretched(state, v, p, out) for v, p in zip(operands, pads)]
    kept = {d: f for d, f in out.items() if d != last}
    if row is None:
        return node.attrs, operands, [dict(kept) for _ in node.types]
    return _lane_sum_row(state, node, operands, out, row, kept)


def _lane_sum_row(state, node, operands, out, row: Factors, kept):
    """A ``lane_sum`` row of valid length ``n`` padded at its end to ``N``:
    the padding's products made ``-0.0`` (``lhs`` masked with ``-0.0``,
    ``rhs`` with one), which every add leaves as it was (``-0.0`` is the
    exact additive identity, signed zeros included). Summed at ``N``, the
    whole vectors below ``n`` and the lanes' combination are eager's; the
    valid tail (``n % lanes`` elements) lands in a vector that is whole at
    ``N``, where eager fuses its products into the sum (without ``fused``):
    unless they are exact (``rhs`` all ones, a softmax's or cross-entropy's
    sum), the row is summed fused throughout, the products below ``n``'s
    whole vectors rounded first and multiplied by one (:func:`_fused_from_tail`).
    A row under one vector (``n < lanes <= N``),
    which eager adds in order, is the in-order sum of the first ``lanes``
    products, chosen per bucket size by a select; an empty row is ``+0``.
    With one lane the sum is a chain in order, which the masked products
    leave as it was wherever they stand: a row padded inside too (the rows of
    a ``(batch, seq)`` pair, padded in both)."""
    a = node.attrs
    lanes, last = a["lanes"], len(node.types[0].shape)
    if lanes > 1 and any(sym is not None for _, sym in row[1:]):
        raise Refused(f"{_where(node)} sums rows padded inside, not at their end")
    valid = None
    for n, sym in row:
        size = state.index_scalar(n) if sym is None else Value(state.valid[sym], 0)
        valid = size if valid is None else state.value("mul", (valid, size), {})
    if lanes > 1 and not a["fused"] and not _all_ones(node.operands[1]):
        operands, a = _fused_from_tail(state, *operands, valid, lanes), {**a, "fused": True}
    lhs, rhs = _identity_products(state, *operands, last, last, row)
    t = lhs.type
    total = state.value("lane_sum", (lhs, rhs), a)
    shape = total.type.shape
    if t.shape[last] >= lanes > 1:  # a valid row under one vector: eager adds it in order
        start, limit = [0] * t.rank, list(t.shape)
        limit[last] = lanes
        head = [state.value("slice", (v,), {"start": tuple(start), "limit": tuple(limit), "strides": (1,) * t.rank})
                for v in (lhs, rhs)]
        in_order = state.value("lane_sum", tuple(head), {"lanes": 1, "halving": False, "fused": False})
        short = state.value("compare", (valid, state.index_scalar(lanes)), {"direction": "LT"})
        total = state.value("select", (state.splat(short, shape), in_order, total), {})
    empty = state.value("compare", (valid, state.index_scalar(0)), {"direction": "EQ"})
    zero = state.splat(state.value("constant", (), {"value": fill_value("zero", t.dtype)}), shape)
    return {}, [state.splat(empty, shape), zero, total], kept, "select"


def _fused_from_tail(state, lhs: Value, rhs: Value, valid: Value, lanes: int) -> list[Value]:
    """``(lhs, rhs)`` for a ``fused`` sum of rows of ``valid`` elements that
    is eager's unfused one: ``fma(round(x * y), 1, acc)`` is the rounded
    product's rounded add, so below the valid rows' whole vectors the
    products are taken rounded against ones; from there on (the valid tail,
    which eager contracts, then padding) ``x`` and ``y`` as they are."""
    shape = tuple(lhs.type.shape)
    whole = state.value("sub", (valid, state.value("rem", (valid, state.index_scalar(lanes)), {})), {})
    column = state.value("iota", (), {"dim": len(shape) - 1, "shape": shape, "dtype": "i32"})
    rounded = state.value("compare", (column, state.splat(whole, shape)), {"direction": "LT"})
    ones = state.splat(state.value("constant", (), {"value": fill_value("one", rhs.type.dtype)}), shape)
    return [state.value("select", (rounded, state.value("mul", (lhs, rhs), {}), lhs), {}),
            state.value("select", (rounded, ones, rhs), {})]


def _buffer_rows(state, node, operands, pads):
    """``buffer_sum``'s rows (``lhs``'s first dimension, ``rhs``'s second to
    last, ``owner``'s) padded anywhere, a flattened ``(batch, seq)`` pair
    too: the padded rows' products made ``-0 * 1``, which leaves whichever
    buffer takes them as it was (their owners as they come). The columns and
    ``rhs``'s leading dimensions are independent, padded still."""
    pl, pr, po = pads
    lhs, rhs, owner = operands
    r = rhs.type.rank
    rows = _union(node, [{0: f} for f in (pl.get(0), pr.get(r - 2), po.get(0)) if f]).get(0)
    cols = _union(node, [{0: f} for f in (pl.get(1), pr.get(r - 1)) if f]).get(0)
    on = lambda pairs: {d: f for d, f in pairs if f}  # noqa: E731
    want = [on(((0, rows), (1, cols))), {**{d: f for d, f in pr.items() if d < r - 2}, **on(((r - 2, rows), (r - 1, cols)))},
            on(((0, rows),))]
    made = []
    for v, have, wanted in zip(operands, pads, want):
        v = v if have == wanted else _stretched(state, v, have, wanted)
        if v.type.shape != state.widened(_shape_of(node, len(made)), wanted):
            raise Refused(f"{_where(node)} sums rows of values padded in different layouts")
        made.append(v)
    lhs, rhs, owner = made
    if rows:
        lhs, rhs = _identity_products(state, lhs, rhs, 0, r - 2, rows)
    out = {d: f for d, f in want[1].items() if d < r - 2}
    if cols:
        out[r - 2] = cols
    return node.attrs, [lhs, rhs, owner], out


def _identity_products(state, lhs: Value, rhs: Value, ldim: int, rdim: int, factors: Factors):
    """``(lhs, rhs)`` with the padding of ``lhs``'s dimension ``ldim`` and ``rhs``'s
    ``rdim`` (``factors``) made ``-0.0`` and ``1``: their product ``-0.0``, the
    exact additive identity (signed zeros included), which leaves any sum or
    fused chain that takes it as it was."""
    t = lhs.type
    negative_zero = state.splat(state.value("constant", (), {"value": np.asarray(-0.0, to_numpy_dtype(t.dtype))}),
                                t.shape)
    lhs = state.value("select", (state.inside(t.shape, ldim, factors), lhs, negative_zero), {})
    return lhs, state.mask(rhs, {rdim: factors}, "one")


def _shape_of(node, i: int) -> tuple:
    """The unpadded shape of ``node``'s operand ``i``."""
    v = node.operands[i]
    return v[0].types[v[1]].shape


def _all_ones(v: Value) -> bool:
    """Whether the original value ``v`` is ones everywhere: a constant of ones,
    broadcast or reshaped."""
    node = v[0]
    while node.op in ("broadcast_in_dim", "reshape", "convert"):
        node = node.operands[0][0]
    if node.op != "constant":
        return False
    value = node.attrs["value"]
    return bool(value.size) and bool((value == 1).all())


def _cascade(state, node, operands, pads):
    """``cascade_sum`` flushes its levels at element indices, never at the
    row's length, so a row padded at its end sums as the unpadded one once
    its padding is zeros (``x + 0`` is ``x``). A row padded inside (a
    flattened ``(batch, seq)`` with ``seq`` padded) has its valid elements
    moved to the front first (:func:`_packed`). Leading dimensions stay
    padded, rows being independent."""
    last = len(node.types[0].shape)
    row = pads[0].get(last)
    x = operands[0]
    if row is not None:
        if any(sym is not None for _, sym in row[1:]):
            x = _packed(state, node, x, row)
        else:
            x = state.mask(x, {last: row}, "zero")
    return node.attrs, [x], {d: f for d, f in pads[0].items() if d != last}


def _packed(state, node, x: Value, row: Factors) -> Value:
    """The vector ``x``, padded as ``row``'s factors, with its valid elements
    in their order at the front and zeros after: position ``k`` reads the
    element whose index in the valid layout (the factors at their valid
    sizes) is ``k``."""
    t = x.type
    if t.rank != 1:
        raise Refused(f"{_where(node)} sums rows padded inside, not at their end")
    shape = t.shape
    k = state.value("iota", (), {"dim": 0, "shape": shape, "dtype": "i32"})
    rest, source, stride, count = k, None, 1, None
    for n, sym in reversed(row):
        size = state.splat(state.index_scalar(n) if sym is None else Value(state.valid[sym], 0), shape)
        digit = state.value("rem", (rest, size), {})
        rest = state.value("div", (rest, size), {})
        term = digit if stride == 1 else state.value("mul", (digit, state.splat(state.index_scalar(stride), shape)), {})
        source = term if source is None else state.value("add", (source, term), {})
        stride *= n if sym is None else state.symbols[sym]
        count = size if count is None else state.value("mul", (count, size), {})
    indices = state.value("reshape", (source,), {"shape": shape + (1,)})
    picked = state.value("gather", (x, indices), {
        "offset_dims": (), "collapsed_slice_dims": (0,), "operand_batching_dims": (),
        "start_indices_batching_dims": (), "start_index_map": (0,), "index_vector_dim": 1,
        "slice_sizes": (1,), "indices_are_sorted": False})
    inside = state.value("compare", (k, count), {"direction": "LT"})
    zero = state.splat(state.value("constant", (), {"value": fill_value("zero", t.dtype)}), shape)
    return state.value("select", (inside, picked, zero), {})


# The rules of ops whose row says padding="own", by name; elementwise ops
# and reductions share one rule each, chosen by their row.
OWN_RULES = {
    "check": _check,
    "broadcast_in_dim": _broadcast,
    "iota": _made,
    "constant": _made,
    "reshape": _reshape,
    "permute": _permute,
    "dot_general": _dot,
    "slice": _slice,
    "concatenate": _concatenate,
    "pad": _pad,
    "reverse": _reverse,
    "gather": _gather,
    "scatter": _scatter,
    "convolution": _convolution,
    "lane_sum": _lanes,
    "lane_moments": _lanes,
    "cascade_sum": _cascade,
    "optimization_barrier": _barrier,
    "rng_bit_generator": _random_bits,
    "vector_sum": _eager_sum,
    "norm_squares": _eager_sum,
    "column_sum": _eager_sum,
    "buffer_sum": _buffer_rows,
}
_KIND_RULES = {"elementwise": _elementwise, "reduction": _reduce}


def rule_for(op: str):
    """The padding rule of ``lazy.<op>`` as its row in the op table decides;
    None for an op padding refuses, leaves undecided, or does not know (a
    region's ``call``)."""
    spec = OPS.get(f"lazy.{op}")
    if spec is None or spec.padding is None:
        return None
    if spec.padding == "own":
        return OWN_RULES[op]
    return _KIND_RULES.get(spec.padding)
