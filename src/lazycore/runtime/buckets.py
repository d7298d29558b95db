"""Shape buckets: one program for inputs whose size varies along a dimension.

An input dimension marked dynamic (``lazycore.torch.dynamic(t, dim)``,
``lazycore.numpy.dynamic(a, axis)``, or the learned policy below) is padded
at the barrier to its bucket, the least size of ``settings.buckets``
(``LAZYCORE_BUCKETS``; powers of two by default) that holds it. The walked
graph is rebuilt at bucket sizes with the masks that keep the padding out of
every result (:mod:`lazycore.runtime.padding`), so a last small batch, or
sequences of lengths 40 to 64, reuse one program; an output with a padded
dimension comes back as its padded result, a data leaf that carries its
valid region (:class:`Region`), and the handle holds that region's slice
(:func:`padded_leaf` tells it from any other value). A graph that the
padding rules cannot prove exact compiles at its own sizes, as without
marks, and ``LAZYCORE_DEBUG`` says which op refused. A step like an earlier
one (the same walk, marks and buckets) recalls how its padded program is
called (:data:`PLANS`, kept by the one replayer: :class:`_Plan` is the
recording, its program still cached its guard) instead of rebuilding the
graph.

The learned policy (``settings.learn_buckets``, ``LAZYCORE_LEARN_BUCKETS=1``;
off by default, as it changes which programs a changing shape compiles): at
a barrier whose graph has the same structure as an earlier one (ops, edges
and the user's lines, sizes aside), an input dimension whose size has
changed twice, alone among that input's, is marked dynamic from then on in
every barrier of that structure; the debug log names it.

Padding an input costs a copy through the host (the marked buffer is read,
padded with zeros and uploaded; counted as transfers). When the graph
cannot be padded as marked, it is tried once more with every unmarked input
dimension of a padded size padded as well (labels beside marked inputs).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from array import array

import numpy as np

from lazycore.dialect.spec import OPS, spec_of
from lazycore.dialect.types import TensorType
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Node, Scalar, Value, attrs_key, digest, node_prefix, operand_bytes, operand_values
from lazycore.ir.memo import Memo
from lazycore.ir.replayer import GUARDED, Replayer
from lazycore.ir.sourceloc import resolve
from lazycore.ir.walk import Walk
from lazycore.runtime import checks, hostcopy, pjrt
from lazycore.runtime.cache import CACHE
from lazycore.runtime.padding import Refused, pad_graph


_FIXED = threading.local()


def bucket(n: int) -> int | None:
    """The size ``n`` is padded to; None when no bucket holds it. Inside
    :func:`fixed`, every size up to its ceiling is padded to the ceiling."""
    top = getattr(_FIXED, "size", None)
    if top is not None and n <= top:
        return top
    sizes = settings.buckets
    if sizes is None:
        return 1 << (n - 1).bit_length()
    for b in sizes:
        if b >= n:
            return b
    return None


@contextlib.contextmanager
def fixed(size: int | None):
    """Within it (this thread), marked sizes up to ``size`` pad to ``size``:
    one bucket for a sequence whose longest length is known (transformers'
    ``generate()``: its ``max_length``), so it never crosses a bucket. Sizes
    above it take the usual buckets; ``None`` restores them."""
    before = fix(size)
    try:
        yield
    finally:
        fix(before)


def fix(size: int | None) -> int | None:
    """Set :func:`fixed`'s ceiling on this thread; returns the one before."""
    before = getattr(_FIXED, "size", None)
    _FIXED.size = size
    return before


def mark(leaf: Data, dim: int) -> None:
    """Mark dimension ``dim`` of an input (a device-data leaf) dynamic."""
    leaf.dynamic = leaf.dynamic | {dim}


class Bucketed:
    """A barrier's program at bucket sizes: its arguments, key, and how its
    outputs go back to their own sizes."""

    def __init__(self, walk, data: list, packs: list, plan: "_Plan", keyed):
        self.walk = walk
        """The padded walk; None when recalled from a plan (its program is cached)."""
        self.plan = plan
        """How it is called (kept by the step's recalled plan: :func:`recalled`)."""
        self.data, self.packs = data, packs
        self.out_types = plan.out_types
        self.original = plan.original
        """The outputs' unpadded types."""
        self.out_pads = plan.out_pads
        self.symbols = plan.symbols
        self.donate, self.key = keyed(data, plan.out_types, plan.encoding)

    def value(self, k: int, leaf: Data) -> Value:
        """The value of output ``k`` from its result ``leaf``: the valid
        region of a padded result (:func:`region`)."""
        pads = self.out_pads[k]
        if not pads:  # no padded dimension: most of a decoding token's outputs
            return Value(leaf, 0)
        sizes = {sym: self.symbols[sym] for f in pads.values() for _, sym in f if sym is not None}
        if all(b == n for n, b in sizes.items()):
            # a size that is its bucket: the result itself, still marked
            # (a cache grown to 8 of bucket 8 keeps growing in buckets)
            for d, f in pads.items():
                if len(f) == 1 and f[0][1] is not None:
                    mark(leaf, d)
            return Value(leaf, 0)
        return region(leaf, self.original[k], pads, sizes)


    def refill(self, k: int, buffer, device):
        """``buffer``, output ``k`` computed unpadded (its program failed and
        the outputs were computed again), laid out as the padded result that
        output's :class:`Region` reads."""
        t, padded = self.original[k], self.out_types[k]
        if padded == t:
            return buffer
        sizes = {sym: self.symbols[sym] for f in self.out_pads[k].values() for _, sym in f if sym is not None}
        expanded, limits = _expanded(t, self.out_pads[k], sizes)
        host = hostcopy.to_host(buffer, t, copy=False).reshape(limits)
        out = np.zeros(expanded, host.dtype)
        out[tuple(slice(0, n) for n in limits)] = host
        return pjrt.to_device(out.reshape(padded.shape), device.pjrt)


class Region:
    """The valid region of a padded result, carried by its data leaf
    (``Data.valid``): the unpadded type, the padded dimensions with their
    factors (``layout``: dim -> ``((size, symbol), ...)``), and each
    symbol's bucket (``sizes``: valid size -> bucket).

    Handles hold the region's value, a slice (with a reshape on each side
    where a padded dimension is merged with others) of the leaf, made of
    plain graph nodes: a barrier leaves it pending (it is no work,
    :func:`padded_leaf`); a read copies the padded result and cuts it on
    the host (:meth:`host`); a graph that uses it is padded with the leaf
    as its input (no copy), or, when the padding rules refuse that graph,
    computes the slice. ``digest`` is that value's node's: a node over the
    leaf with this digest is that slice (the same ops on the same leaf),
    so nothing needs to point back from the leaf to its handles' node."""

    __slots__ = ("type", "layout", "sizes", "digest")

    def __init__(self, t, layout: dict, sizes: dict[int, int], digest: bytes):
        self.type, self.layout, self.sizes, self.digest = t, layout, sizes, digest

    def host(self, array: np.ndarray) -> np.ndarray:
        """The value from the padded result's host copy."""
        expanded, limits = _expanded(self.type, self.layout, self.sizes)
        window = tuple(slice(0, n) for n in limits)
        return np.ascontiguousarray(array.reshape(expanded)[window].reshape(self.type.shape))


_made = 0
"""How many regions were made: until the first, nothing looks for them."""

_CUT_OPS = frozenset({"slice", "reshape"})


def region(leaf: Data, t, layout: dict, sizes: dict[int, int]) -> Value:
    """The value of type ``t`` that the padded result ``leaf`` holds in its
    valid region; ``leaf`` carries that region from now on."""
    global _made
    expanded, limits = _expanded(t, layout, sizes)
    v = Value(leaf, 0)
    if len(expanded) != t.rank:
        v = Value(_node("reshape", (v,), {"shape": expanded}, TensorType(expanded, t.dtype)), 0)
    kwargs = {"start": (0,) * len(limits), "limit": limits, "strides": (1,) * len(limits)}
    if len(expanded) == t.rank:
        cut = _node("slice", (v,), kwargs, t)
    else:
        v = Value(_node("slice", (v,), kwargs, TensorType(limits, t.dtype)), 0)
        cut = _node("reshape", (v,), {"shape": t.shape}, t)
    leaf.valid = Region(t, layout, sizes, cut.digest)
    _made += 1
    return Value(cut, 0)


def padded_leaf(node) -> Data | None:
    """The padded result whose valid region ``node`` is (a handle's value
    that is no work: its barrier has run), or None for any other node."""
    if not _made or node.op not in _CUT_OPS:
        return None
    n = node
    for _ in range(3):  # the slice, with a reshape on each side at most
        o = n.operands[0]
        if type(o) is not Value:
            return None
        n = o[0]
        if type(n) is Data:
            r = n.valid
            return n if r is not None and r.digest == node.digest else None
        if n.op not in _CUT_OPS:
            return None
    return None


def padded_along(node, dim: int) -> bool:
    """Whether ``node`` is a padded result's valid region padded along ``dim``
    (a padded upload's value, ``DeviceLoader(dynamic=...)``: marked already)."""
    leaf = padded_leaf(node)
    return leaf is not None and dim in leaf.valid.layout


def _expanded(t, layout: dict, sizes: dict[int, int]) -> tuple[tuple, tuple]:
    """The padded result with each padded dimension split into its factors,
    and the valid sizes of that shape."""
    expanded, limits = [], []
    for d, n in enumerate(t.shape):
        for size, sym in layout.get(d, ((n, None),)):
            expanded.append(size if sym is None else sizes[sym])
            limits.append(size)
    return tuple(expanded), tuple(limits)


def _node(op: str, operands: tuple, kwargs: dict, t) -> Node:
    attrs, prefix = node_prefix(spec_of(op), kwargs, (t,))
    return Node(op, operands, attrs, (t,), digest(prefix + operand_bytes(operands)))


class _Plan:
    """How a padded program is called, by the unpadded walk's parameters
    (:data:`PLANS`): a step like an earlier one skips rebuilding its graph."""

    __slots__ = ("encoding", "data", "packs", "out_types", "original", "out_pads", "symbols", "template")

    def __init__(self, walk, padded, state, out_pads, symbols):
        index = {id(leaf): i for i, leaf in enumerate(walk.params)}
        source = {id(new): index[id(leaf)] for leaf, new in state.inputs}
        self.encoding = padded.encoding
        self.data = [(index[id(leaf)], None) if id(leaf) in index else (source[id(leaf)], leaf.types[0])
                     for leaf in padded.data]
        """Per argument: the walk's parameter, and the type it is padded to (None: as it is)."""
        valid = {id(leaf): n for n, leaf in state.valid.items()}
        self.packs = [(dtype, [(index[id(leaf)], None) if id(leaf) in index else (None, valid[id(leaf)])
                               for leaf in group]) for dtype, group in padded.packs.items()]
        """Per scalar pack: the walk's parameter or a valid size, per entry."""
        self.out_types = [v.type for v in padded.outputs]
        self.original = [v.type for v in walk.outputs]
        self.out_pads, self.symbols = out_pads, symbols
        self.template = None
        """The :class:`Template` of the walk at other sizes, or None."""

    def shifted(self, sigma: dict[int, int]) -> "_Plan":
        """This plan for the same graph with each symbol ``s`` at size
        ``sigma[s]`` (:meth:`Template.match`): the same program, its valid
        sizes and the outputs' regions at the new sizes."""
        new = object.__new__(_Plan)
        new.encoding, new.data, new.out_types, new.template = self.encoding, self.data, self.out_types, self.template
        new.packs = [(dtype, [e if e[0] is not None else (None, sigma[e[1]]) for e in group])
                     for dtype, group in self.packs]
        new.out_pads = [{d: tuple((sigma[sym], sigma[sym]) if sym is not None else (n, None) for n, sym in f)
                         for d, f in pads.items()} for pads in self.out_pads]
        new.original = [_at_sizes(t, pads, sigma) for t, pads in zip(self.original, self.out_pads)]
        new.symbols = {sigma[s]: b for s, b in self.symbols.items()}
        return new

    def attempt(self, params: list, device, held, keyed):
        """This plan's program called on the unpadded walk's parameters
        ``params``; :data:`~lazycore.ir.replayer.GUARDED` when that program
        is no longer cached. Raises :class:`_Unready` when an input's
        program failed (the barrier settles the step unpadded)."""
        known = Bucketed(None, *self.arguments(params, device, held), self, keyed)
        return known if known.key in CACHE else GUARDED

    def arguments(self, params: list, device, held) -> tuple[list, list]:
        """The padded program's arguments from the unpadded walk's parameters ``params``."""
        data = [params[i] if t is None else _padded_leaf(params[i], t, device, held) for i, t in self.data]
        packs = [(dtype, [params[i] if i is not None else Scalar(np.asarray(n, np.int32), "i32") for i, n in group])
                 for dtype, group in self.packs]
        return data, packs


def _at_sizes(t, pads: dict, sigma: dict[int, int]):
    """Type ``t``, padded along ``pads`` (dim -> factors), with each symbol at ``sigma``'s size."""
    if not pads:
        return t
    shape = list(t.shape)
    for d, f in pads.items():
        n = 1
        for size, sym in f:
            n *= size if sym is None else sigma[sym]
        shape[d] = n
    return TensorType(tuple(shape), t.dtype)


class Template:
    """Which nodes of a padded walk hold its symbols, so that a step that
    differs from it in those sizes alone (the next token of a generation:
    the ids and mask one longer) runs its program without a walk or the
    padding (:func:`lazycore.runtime.planning.recall`).

    ``touched``: per node whose padded form a symbol reaches (a padded
    result, a padded operand, a constant read as a size: the nodes whose
    digests a new size changes, as digests hold their operands'), by walk
    index: ``(op, attrs, types, pads, kind, symbols)``; kind ``region`` (a
    padded result's valid region: its leaf's layout says its sizes), ``inner``
    (a node inside a region's cut: checked with it), ``node`` (op and
    attributes equal, types equal but along padded dimensions; ``attrs``
    is then :func:`_attrs`'s, the digest's reading of them but for a
    result's own shape), ``slice`` (a slice's bounds: along a padded dimension, sizes).

    A node is matched by what it is, never by its digest with numbers put
    in: an integer equal to a size that padding did not read as that size
    stays a literal that must be equal, and the symbols must map one to one
    and keep their buckets. Every other node of the step must have its
    digest unchanged: its whole graph is the same."""

    __slots__ = ("touched", "buckets")

    def __init__(self, touched: list, buckets: dict[int, int]):
        self.touched = touched
        self.buckets = buckets
        """Symbol -> its bucket."""

    def match(self, node, record, sigma: dict[int, int], regions: dict[int, int]) -> bool:
        """Whether ``node`` is ``record``'s node at other sizes; binds the
        symbols it shows into ``sigma`` (old symbol -> new size) and, for a
        region, the buckets its leaf keeps into ``regions``."""
        op, attrs, types, pads, kind, _, extra = record
        if kind == "inner":
            return True  # (its region's cut checks its digest)
        if node.op != op or len(node.types) != len(types):
            return False
        if kind == "count":  # (its value: :meth:`sizes`, once every symbol is bound)
            value = node.attrs.get("value")
            return (value is not None and value.size and (value == value.flat[0]).all() and node.types == types
                    and _without(node.attrs, "value") == attrs)
        if kind == "slice":
            if not _slice_at(node.attrs, attrs, extra, sigma):
                return False
            kind = "checked"
        if kind == "region":
            leaf = padded_leaf(node)
            if leaf is None or leaf.sharding is not None:
                return False
            layout, sizes = leaf.valid.layout, leaf.valid.sizes
            if layout.keys() != pads[0].keys():
                return False
            for d, f in pads[0].items():
                g = layout[d]
                if len(g) != len(f):
                    return False
                for (n, sym), (m, new) in zip(f, g):
                    if (sym is None) != (new is None) or (sym is None and n != m):
                        return False
                    if sym is not None:
                        b = sizes.get(new)
                        if b is None or sigma.setdefault(sym, new) != new or regions.setdefault(new, b) != b:
                            return False
        elif kind == "node" and _attrs(node) != attrs:
            return False
        if type(node) is Data and (node.sharding is not None or type(node.storage) is Failure):
            return False
        for t, old, p in zip(node.types, types, pads):
            if t.dtype != old.dtype or len(t.shape) != len(old.shape):
                return False
            for d, (n, m) in enumerate(zip(t.shape, old.shape)):
                f = p.get(d)
                if f is None:
                    if n != m:
                        return False
                elif len(f) == 1 and f[0][1] is not None:
                    if sigma.setdefault(f[0][1], n) != n:
                        return False
        return True

    def sizes(self, nodes: list, sigma: dict[int, int], regions: dict[int, int]) -> bool:
        """After every node matched: whether ``sigma`` gives each symbol a
        size (one to one, at least 2, in its bucket) and the padded
        dimensions of several factors and the constants read as sizes agree
        with it. ``nodes``: this step's node of each of :attr:`touched`."""
        if sigma.keys() != self.buckets.keys() or len(set(sigma.values())) != len(sigma):
            return False
        for s, n in sigma.items():
            b = self.buckets[s]
            if n < 2 or (regions[n] if n in regions else bucket(n)) != b:
                return False
        for (_, (_, _, types, pads, kind, dependent, extra)), node in zip(self.touched, nodes):
            if any(sigma[s] != s for s in dependent):
                return False  # a constant read as a size, unchanged: that size must be too
            if kind == "inner":
                continue
            if kind == "count":
                syms, factor = extra
                if any(s not in sigma for s in syms):
                    return False
                want = factor * float(np.prod([float(sigma[s]) for s in syms]))
                if float(node.attrs["value"].flat[0]) != want:
                    return False
                continue
            for t, p in zip(node.types, pads):
                for d, f in p.items():
                    if len(f) > 1:
                        n = 1
                        for size, sym in f:
                            n *= size if sym is None else sigma[sym]
                        if t.shape[d] != n:
                            return False
        return True


def _attrs(node) -> str:
    """A touched node's attributes as :meth:`Template.match` compares them:
    sizes that its result type states (a reshape's, a broadcast's or an
    iota's ``shape``, a gather's windows: the packed count of a gradient's
    zeros, a padded batch's rows looked up) are left to the type's check,
    which lets padded dimensions take their symbols' sizes (a random draw's
    ``shape``: its bits' type)."""
    a = node.attrs
    out = node.types[0].shape
    if len(node.types) != 1:  # (a draw: the result its shape describes, its bits)
        spec = OPS.get(f"lazy.{node.op}")
        if spec is None or spec.params_from is None:
            return attrs_key(a)
        out = node.types[spec.results.index(spec.params_from)].shape
    shape = a.get("shape")
    if shape is not None and tuple(shape) == out:
        return _without(a, "shape") + " (its shape)"
    if node.op == "gather":
        sizes = a["slice_sizes"]
        whole = set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])
        windows = [d for d in range(len(sizes)) if d not in whole]
        if all(sizes[d] == 1 for d in whole) and [sizes[d] for d in windows] == [out[o] for o in a["offset_dims"]]:
            return _without(a, "slice_sizes") + " (its windows)"
    return attrs_key(a)


def _without(attrs: dict, name: str) -> str:
    """:func:`~lazycore.ir.graph.attrs_key` of ``attrs`` but ``name``."""
    return attrs_key({k: v for k, v in attrs.items() if k != name})


def _slice_at(a: dict, old: dict, pads: dict, sigma: dict[int, int]) -> bool:
    """Whether slice attributes ``a`` are ``old`` at ``sigma``'s sizes, for
    an operand padded along ``pads`` (whose symbols ``sigma`` holds by
    now): along a padded dimension, the whole of it, or its last positions
    (``x[:, -1:]``, as :func:`lazycore.runtime.padding._slice_tail` reads
    it: the same count before the end); elsewhere the same bounds."""
    if a.keys() != old.keys() or a["strides"] != old["strides"]:
        return False
    for d, (start, limit, s0, l0) in enumerate(zip(a["start"], a["limit"], old["start"], old["limit"])):
        f = pads.get(d)
        if f is None:
            if start != s0 or limit != l0:
                return False
            continue
        if len(f) != 1 or f[0][1] is None or f[0][1] not in sigma or a["strides"][d] != 1 or l0 != f[0][0]:
            return False
        n = sigma[f[0][1]]
        if limit != n or start != (0 if s0 == 0 else n - (l0 - s0)) or (s0 > 0 and start <= 0):
            return False
    return True


def _template(walk, marks: dict, state, symbols: dict[int, int]) -> Template | None:
    """The :class:`Template` of ``walk`` as :func:`pad_graph` padded it
    (``state``); None where a padded factor's size is not its symbol's."""
    new = state.new
    order = walk.order
    inner: set[int] = set()  # the nodes inside regions' cuts
    for node in reversed(order):  # (users first: a region's cut names its inner nodes)
        if (id(node) in inner or (not node.is_leaf and id(node) in marks)) and not node.operands[0][0].is_leaf:
            inner.add(id(node.operands[0][0]))
    counts = _counts(order, state)
    touched = []
    reached: set[int] = set()  # the nodes a symbol reaches: touched ones
    for i, node in enumerate(order):
        pads = new[id(node)][1]
        dependent = state.dependent.get(id(node), ())
        if id(node) in inner:
            touched.append((i, (node.op, None, node.types, pads, "inner", dependent, None)))
            reached.add(id(node))
            continue
        count = counts.get(id(node))
        if count is not None:  # (a number that is its symbols' count: checked as one, see _counts)
            if count[1] is not None:
                touched.append((i, (node.op, _without(node.attrs, "value"), node.types, pads, "count", (), count)))
            else:
                touched.append((i, (node.op, _attrs(node), node.types, pads, "node", (), None)))
            reached.add(id(node))
            continue
        if node.op == "div" and dependent and id(node.operands[1][0]) in counts:
            dependent = ()  # (its count is its constant's, checked there)
        region = not node.is_leaf and id(node) in marks
        operands = operand_values(node)
        if not (any(pads) or dependent or region or any(id(v[0]) in reached for v in operands)
                or any(new[id(v[0])][1][v[1]] for v in operands)):
            continue
        reached.add(id(node))
        for p in pads:
            for f in p.values():
                if any(sym is not None and n != sym for n, sym in f):
                    return None
        if region:
            touched.append((i, (node.op, None, node.types, [marks[id(node)]], "region", dependent, None)))
        elif node.op == "slice":  # (its bounds along a padded dimension are sizes: checked as such)
            v = node.operands[0]
            touched.append((i, (node.op, node.attrs, node.types, pads, "slice", dependent, new[id(v[0])][1][v[1]])))
        else:
            touched.append((i, (node.op, _attrs(node), node.types, pads, "node", dependent, None)))
    return Template(touched, dict(symbols))


def _counts(order: list, state) -> dict[int, tuple]:
    """The constants the padded walk read as counts of its symbols: an
    integer equal to a size or its negation (``size_constant``), a mean's
    divisor (its element count, ``_mean_count``), by id -> ``(symbols,
    factor)``: at other sizes each must be ``factor`` times their product,
    which the program reads from the valid sizes (the broadcast of a mean's
    divisor: ``(symbols, None)``, its digest changed with it)."""
    found: dict[int, tuple] = {}
    dependent = state.dependent
    users: dict[int, int] = {}
    for node in order:
        if not node.is_leaf:
            for v in operand_values(node):
                users[id(v[0])] = users.get(id(v[0]), 0) + 1
    for node in order:
        syms = dependent.get(id(node))
        if not syms:
            continue
        if node.op == "constant":
            found[id(node)] = (syms, 1 if int(node.attrs["value"].flat[0]) > 0 else -1)
        elif node.op == "div":
            c = node.operands[1][0]
            spread = c if c.op == "broadcast_in_dim" else None
            if spread is not None:
                c = c.operands[0][0]
            value = float(c.attrs["value"].flat[0]) if c.op == "constant" else None
            size = float(np.prod([float(n) for n in syms]))
            shared = users.get(id(c)) != 1 or (spread is not None and users.get(id(spread)) != 1)
            if value is None or not size or shared:
                continue  # (a number another op reads as a number too: at other sizes it would be read wrong)
            found[id(c)] = (syms, value / size)
            if spread is not None:
                found[id(spread)] = (syms, None)
    return found


PLANS = Replayer("runtime.bucket_plans", 64)
"""A walk's encoding, its marks by position and its symbols' buckets -> its :class:`_Plan`."""


def prepare(walk, device, keyed, held=frozenset()) -> Bucketed | None:
    """``walk`` at bucket sizes when some of its inputs are marked dynamic and
    the padding rules accept its graph; else None (it compiles as it is).
    ``keyed(data, out_types, encoding)``: the donation plan and compile key
    of the padded program's arguments; ``held``: ids of the inputs live
    handles hold (a padded copy of one is not donated, as it is not)."""
    if settings.buckets == () or device.pjrt is None or isinstance(device.pjrt, pjrt.MeshTarget):
        return None
    if settings.learn_buckets:
        LEARNED.observe(walk, device)
    marks: dict[int, dict] = {}
    symbols: dict[int, int] = {}
    where = []  # the marks by position: a plan's key
    for i, leaf in enumerate(walk.data):
        if not leaf.dynamic:
            continue
        if leaf.sharding is not None or type(leaf.storage) is Failure:
            return None
        dims = {}
        for d in sorted(leaf.dynamic):
            n = leaf.types[0].shape[d]
            b = bucket(n)
            if n >= 2 and b is not None:  # size 1 is every broadcast's: no symbol
                dims[d] = ((n, n),)
                symbols[n] = b
        if dims:
            marks[id(leaf)] = dims
            where.append((i, tuple(dims.items())))
    if _made and any(leaf.valid is not None for leaf in walk.data):  # padded results of earlier programs stay padded
        for i, node in enumerate(walk.order):
            if node.op in _CUT_OPS:
                leaf = padded_leaf(node)
                if leaf is not None and all(symbols.setdefault(n, b) == b for n, b in leaf.valid.sizes.items()):
                    marks[id(node)] = leaf.valid.layout
                    where.append((-1 - i, tuple(leaf.valid.layout.items())))
    if not marks:
        return None

    signature = (walk.encoding, tuple(where), tuple(sorted(symbols.items())))
    if not settings.debug:  # debug lines describe the padded walk
        try:
            known = PLANS.replay(signature, walk.params, device, held, keyed)
        except _Unready:  # an input's program failed: the barrier settles it unpadded
            return None
        if known is not GUARDED:
            return known
    try:
        try:
            state, outputs, out_pads = pad_graph(walk, marks, dict(symbols), bucket)
        except Refused as refused:
            # unmarked inputs of a padded size (labels beside marked inputs): padded too, once
            more = _sized_like(walk, marks, symbols)
            try:
                if not more:
                    raise
                state, outputs, out_pads = pad_graph(walk, {**marks, **more}, dict(symbols), bucket)
            except Refused:
                # a size that is also another dimension's (a head dimension of 16
                # at sequence length 16): once more without widening made values
                try:
                    state, outputs, out_pads = pad_graph(walk, marks, dict(symbols), bucket, widen=False)
                except Refused:
                    raise refused from None
        padded = Walk(outputs)
        if [c.op for c in checks.nodes(padded)] != [c.op for c in checks.nodes(walk)]:
            raise Refused("its value checks changed order")
    except Refused as e:
        events.emit("buckets", device, f"not padded: {e}; compiled at its own sizes")
        return None
    try:
        for leaf, new in state.inputs:
            new.buffer = _padded_buffer(leaf, new.types[0].shape, device)
            new.owned = _donatable(leaf, held)
    except _Unready:  # the buffer's program failed: the barrier settles it unpadded
        return None
    plan = _Plan(walk, padded, state, out_pads, state.symbols)
    plan.template = _template(walk, marks, state, state.symbols)
    PLANS.add(signature, plan)
    return Bucketed(padded, padded.data, list(padded.packs.items()), plan, keyed)


def padding_marks(data: list) -> tuple | None:
    """What decides how a step is padded besides its graph, for a barrier
    that recalls its plan instead of walking (:mod:`lazycore.runtime.stepplans`,
    whose fingerprint pins the graph, sizes and digests): per device-data
    parameter (``data``, in argument order) marked dynamic or holding a
    padded result, its marked dimensions with their sizes and buckets (this
    thread's ceiling, :func:`fixed`, counts) and its valid region. None when
    no parameter has either, or where :func:`prepare` would not pad (buckets
    off, the learned policy, which marks as it walks, a marked input that is
    sharded or failed)."""
    if settings.buckets == () or settings.learn_buckets:
        return None
    found = []
    for i, leaf in enumerate(data):
        dims, valid = leaf.dynamic, leaf.valid
        if not dims and valid is None:
            continue
        if dims and (leaf.sharding is not None or type(leaf.storage) is Failure):
            return None
        shape = leaf.types[0].shape
        found.append((i, tuple((d, shape[d], bucket(shape[d])) for d in sorted(dims)),
                      None if valid is None else (valid.digest, tuple(valid.layout.items()),
                                                  tuple(valid.sizes.items()))))
    return tuple(found) if found else None


def recalled(plan: _Plan, params: list, device, keyed, held=frozenset()) -> Bucketed | None:
    """The padded program :func:`prepare` made (``plan``) for an earlier step
    with the same graph and :func:`padding_marks`, called on this step's parameters
    ``params`` (the unpadded walk's, in walk order), without walking or
    padding its graph; None where it cannot be (an input's program failed:
    the barrier walks and settles it unpadded)."""
    if device.pjrt is None or isinstance(device.pjrt, pjrt.MeshTarget):
        return None
    try:
        data, packs = plan.arguments(params, device, held)
    except _Unready:
        return None
    return Bucketed(None, data, packs, plan, keyed)


def _sized_like(walk, marks: dict, symbols: dict[int, int]) -> dict[int, dict]:
    """Marks for the unmarked inputs' dimensions that have a symbol's size;
    an input of a marked input's shape takes that input's marks (a weight
    of the batch's shape, ``(3, 5, 3)`` beside a batch marked along its last
    dimension at length 3: not its first)."""
    like = {leaf.types[0].shape: marks[id(leaf)] for leaf in walk.data if id(leaf) in marks}
    more = {}
    for leaf in walk.data:
        if id(leaf) not in marks and leaf.sharding is None and type(leaf.storage) is not Failure:
            shape = leaf.types[0].shape
            dims = like.get(shape) or {d: ((n, n),) for d, n in enumerate(shape) if n in symbols}
            if dims:
                more[id(leaf)] = dims
    return more


def pad_host(array: np.ndarray, dim: int) -> np.ndarray:
    """``array`` padded with zeros along ``dim`` to its bucket (as it is when
    no bucket holds that size): a loader uploads the padded batch and
    hands out its :func:`cut`, so the barrier copies nothing."""
    n = array.shape[dim]
    b = bucket(n)
    if n < 2 or b is None or b == n:
        return array
    widths = [(0, 0)] * array.ndim
    widths[dim] = (0, b - n)
    return np.pad(array, widths)


def cut(leaf: Data, shape: tuple, dim: int) -> Value:
    """The value of shape ``shape`` whose dimension ``dim`` ``leaf`` holds
    padded (:func:`pad_host`): its valid region (:func:`region`), or the
    leaf itself, marked dynamic, where nothing was padded."""
    if leaf.types[0].shape == tuple(shape):
        if shape[dim] >= 2:
            mark(leaf, dim)
        return Value(leaf, 0)
    n, b = shape[dim], leaf.types[0].shape[dim]
    return region(leaf, TensorType(tuple(shape), leaf.types[0].dtype), {dim: ((n, n),)}, {n: b})


def _padded_leaf(leaf: Data, t, device, held) -> Data:
    """The argument ``leaf`` padded to ``t``: a copy that only this program
    reads, donated where ``leaf`` itself could be (:func:`_donatable`)."""
    return Data(_padded_buffer(leaf, t.shape, device), t, owned=_donatable(leaf, held))


def _donatable(leaf: Data, held) -> bool:
    """Whether a padded copy of ``leaf`` is donated: where ``leaf`` itself
    would be, a buffer lazycore made that no live handle holds. The first
    token of a generation pads the prompt's cache; were those copies kept,
    its program would donate less than the next token's (whose inputs are
    the last token's padded results) and compile twice. A copy of a buffer
    that is kept stays kept, as that buffer is at a size that is its
    bucket: one program for both."""
    return leaf.owned and id(leaf) not in held


class _Unready(Exception):
    """An input's buffer could not be read: the program computing it failed."""


def _padded_buffer(leaf: Data, shape: tuple, device):
    """``leaf``'s buffer padded with zeros to ``shape``, through the host
    (announced as transfers: a transfer guard sees these copies)."""
    t = leaf.types[0]
    if tuple(shape) == t.shape:  # a size that is its own bucket: nothing to pad
        return leaf.buffer
    try:
        host = hostcopy.to_host(leaf.buffer, t, copy=False)  # (padding copies it)
    except Exception as e:
        raise _Unready() from e
    host = np.pad(host, [(0, b - s) for s, b in zip(host.shape, shape)])
    events.emit("transfer", "host-to-device", type(t)(shape, t.dtype), host.nbytes)
    with events.timed("transfer"):
        buf = pjrt.to_device(host, device.pjrt)
    events.bump("transfers_to_device")
    events.bump("bytes_to_device", host.nbytes)
    return buf


# --- the learned policy ----------------------------------------------------------


class _Place:
    __slots__ = ("shapes", "sizes", "learned")

    def __init__(self, shapes):
        self.shapes = shapes
        self.sizes: dict[tuple[int, int], set[int]] = {}
        self.learned: set[tuple[int, int]] = set()


class Learner:
    """Input sizes seen per place (a graph's structure and the user's lines
    that made it); marks a dimension that keeps changing."""

    def __init__(self):
        self.places = Memo("runtime.bucket_places", 256)

    def observe(self, walk, device) -> None:
        if all(node.is_leaf or node.op in _MOVES for node in walk.order):
            return  # a read through views (a loop over parameters): nothing to share
        shapes = [leaf.types[0].shape for leaf in walk.data]
        key = _place(walk)
        place = self.places.get(key)
        if place is None:
            self.places.put(key, _Place(shapes))
            return
        for p, (old, new) in enumerate(zip(place.shapes, shapes)):
            changed = [d for d, (a, b) in enumerate(zip(old, new)) if a != b]
            # one dimension changing while the others keep their sizes: a
            # batch or a sequence length, not another tensor of the same rank
            if len(changed) != 1 or (p, changed[0]) in place.learned or changed[0] in walk.data[p].dynamic:
                continue
            d = changed[0]
            sizes = place.sizes.setdefault((p, d), {old[d]})
            sizes.add(new[d])
            if len(sizes) >= 3:  # it has changed twice: a third program otherwise
                place.learned.add((p, d))
                seen = ", ".join(map(str, sorted(sizes)))
                events.emit("buckets", device, f"input {p} ({walk.data[p].types[0]}{_user(walk, p)}) "
                            f"has had sizes {seen} along dim {d}: marked dynamic")
        place.shapes = shapes
        for p, d in place.learned:
            if d not in walk.data[p].dynamic:
                mark(walk.data[p], d)

    def clear(self) -> None:
        self.places.clear()


_MOVES = frozenset({"reshape", "permute", "slice", "broadcast_in_dim", "convert", "constant", "iota"})


def _place(walk) -> bytes:
    """The walk without sizes: op names, edges, the inputs' ranks and dtypes,
    and the user's lines that recorded its ops."""
    h = hashlib.blake2b(digest_size=16)
    h.update("|".join(node.op for node in walk.order).encode())
    h.update(walk.encoding[8 + 16 * int.from_bytes(walk.encoding[:8], "little"):])  # (its edges)
    h.update(repr([(leaf.types[0].rank, leaf.types[0].dtype) for leaf in walk.data]).encode())
    h.update(array("q", [hash(node.loc) for node in walk.order]).tobytes())
    return h.digest()


def _user(walk, p: int) -> str:
    """Where input ``p`` is first used: ``, used at file:line``, or nothing."""
    leaf = walk.data[p]
    for node in walk.order:
        if node.loc is not None and any(v[0] is leaf for v in operand_values(node)):
            file, line = resolve(node.loc)
            return f", used at {file}:{line}"
    return ""


LEARNED = Learner()
