"""One StableHLO module with symbolic dimensions from several static ones.

lazycore's graph and lowerings are static-shaped. A program whose dimensions
are symbols (``b``, ``s``: a batch, a sequence) is made from the same function
lowered at several sizes of them (:func:`generalize`): the modules must agree
op for op; every dimension that differs between them is a polynomial of the
symbols, of degree at most one in each (``b``, ``2*b + 1``, ``b*s``), solved
from the modules at the corners of a box of sizes and checked on one more;
it becomes ``?`` in the types, and each op whose static attributes carry such a
size becomes its dynamic form, its shape computed from the arguments'
``stablehlo.get_dimension_size``:

=================================  ====================================================
``broadcast_in_dim``               ``dynamic_broadcast_in_dim``
``reshape``                        ``dynamic_reshape``
``iota``                           ``dynamic_iota``
``slice``                          ``real_dynamic_slice``
a splat ``constant``               a scalar constant (or a size: ``mean``'s divisor)
                                   broadcast with ``dynamic_broadcast_in_dim``
=================================  ====================================================

Every other op takes ``?`` types as they are. What cannot be written that way
raises :class:`SymbolicShapeError` naming the op and its source line: modules
that differ in structure (Python control flow on a size), a size baked into a
constant's values, a size that is no such polynomial (``b // 2``), an op that
makes a symbolic shape from static operands and attributes of its own
(``rng_bit_generator``).

:func:`refine` is the way back, as ``jax.export`` runs its modules: StableHLO's
``stablehlo-refine-arguments`` and ``stablehlo-refine-shapes`` at the
arguments' concrete types, then ``stablehlo-canonicalize-dynamism`` turns the
dynamic ops whose shapes became constants back into static ones.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from fractions import Fraction

from lazycore.dialect.mlir import ir, passmanager, stablehlo

__all__ = ["Poly", "SymbolicShapeError", "generalize", "refine", "corners"]

DYNAMIC = ir.ShapedType.get_dynamic_size()


class SymbolicShapeError(ValueError):
    """The modules cannot be one module with symbolic dimensions."""


# --- polynomials of the symbols ---------------------------------------------------------


@dataclass(frozen=True)
class Poly:
    """Sum of integer coefficients times products of distinct symbols."""

    terms: tuple  # ((frozenset of symbols, coefficient), ...), sorted, no zero coefficient

    @staticmethod
    def of(terms: dict) -> "Poly":
        items = [(frozenset(k), int(c)) for k, c in terms.items() if c]
        # the symbols' terms first, the constant last: "n - 1", "2*b + 1"
        return Poly(tuple(sorted(items, key=lambda kc: (not kc[0], len(kc[0]), sorted(kc[0])))))

    def __call__(self, sizes: dict[str, int]) -> int:
        total = 0
        for syms, c in self.terms:
            for s in syms:
                c *= sizes[s]
            total += c
        return total

    def __str__(self) -> str:
        parts = []
        for syms, c in self.terms:
            name = "*".join(sorted(syms))
            if not name:
                parts.append(str(c))
            elif c == 1:
                parts.append(name)
            elif c == -1:
                parts.append(f"-{name}")
            else:
                parts.append(f"{c}*{name}")
        text = " + ".join(parts) or "0"
        return text.replace("+ -", "- ")


def corners(low: dict[str, int], high: dict[str, int]) -> list[dict[str, int]]:
    """The sizes at the corners of the box ``low``..``high``, ``low`` first."""
    names = sorted(low)
    return [{n: (high[n] if bit else low[n]) for n, bit in zip(names, bits)}
            for bits in itertools.product((0, 1), repeat=len(names))]


def _fit(points: list[dict[str, int]], values: list) -> Poly | None:
    """The polynomial through ``values`` at the box's ``points`` (corners first,
    then checks), with integer coefficients; None if there is none."""
    names = sorted(points[0])
    monomials = [frozenset(c) for r in range(len(names) + 1) for c in itertools.combinations(names, r)]
    count = len(monomials)
    # exact rational elimination: 2**k unknowns at 2**k corners
    rows = [[Fraction(_monomial(m, p)) for m in monomials] + [Fraction(v)] for p, v in zip(points[:count], values)]
    for col in range(count):
        pivot = next((r for r in range(col, count) if rows[r][col] != 0), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(count):
            if r != col and rows[r][col] != 0:
                f = rows[r][col] / rows[col][col]
                rows[r] = [a - f * b for a, b in zip(rows[r], rows[col])]
    coeffs = [rows[i][-1] / rows[i][i] for i in range(count)]
    if any(c.denominator != 1 for c in coeffs):
        return None
    poly = Poly.of(dict(zip(monomials, coeffs)))
    if any(poly(p) != v for p, v in zip(points, values)):
        return None
    return poly


def _monomial(syms, point) -> int:
    out = 1
    for s in syms:
        out *= point[s]
    return out


# --- walking modules in step -------------------------------------------------------------


def _ops(op):
    """Every op nested in ``op``, in program order (regions before what follows)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                yield inner
                yield from _ops(inner)


def _blocks(op):
    for region in op.regions:
        for block in region.blocks:
            yield block
            for inner in block.operations:
                yield from _blocks(inner.operation)


def where(op) -> str:
    """The source line of an op, from its location."""
    found = re.search(r'"([^"]+)":(\d+)', str(op.location))
    return f"{found.group(1)}:{found.group(2)}" if found else "an unknown line"


def _describe(op) -> str:
    return f"{op.name} (from {where(op)})"


def _shape(t) -> tuple[int, ...] | None:
    if not isinstance(t, ir.RankedTensorType):
        return None
    return tuple(ir.RankedTensorType(t).shape)


class _Dims:
    """The polynomial of each dimension that differs between the modules."""

    def __init__(self, points):
        self.points = points

    def of(self, types, what) -> tuple | None:
        """Per dimension: an int (the same everywhere) or a Poly; None: no tensor."""
        shapes = [_shape(t) for t in types]
        if shapes[0] is None:
            if any(str(t) != str(types[0]) for t in types):
                raise SymbolicShapeError(f"{what()} has different types at different sizes")
            return None
        if any(s is None or len(s) != len(shapes[0]) for s in shapes):
            raise SymbolicShapeError(f"{what()} has a different rank at different sizes")
        out = []
        for d, sizes in enumerate(zip(*shapes)):
            if all(s == sizes[0] for s in sizes):
                out.append(sizes[0])
                continue
            poly = _fit(self.points, list(sizes))
            if poly is None:
                sample = ", ".join(f"{_sizes_text(p)}: {s}" for p, s in zip(self.points, sizes))
                raise SymbolicShapeError(f"{what()}: dimension {d} is no sum of products of the symbols with "
                                         f"integer coefficients ({sample})")
            out.append(poly)
        return tuple(out)


def _sizes_text(point) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(point.items()))


def _symbolic(dims) -> bool:
    return dims is not None and any(isinstance(d, Poly) for d in dims)


# --- generalize ----------------------------------------------------------------------------

# the attributes that may hold a size, by op: rewritten into operands of the op's dynamic form
_SHAPE_ATTRS = {
    "stablehlo.slice": ("start_indices", "limit_indices"),
    "stablehlo.constant": ("value",),
}


def generalize(modules, points: list[dict[str, int]], sources: dict[str, tuple[int, int]], entry: str = "main"):
    """``modules[0]`` rewritten to have symbolic dimensions, in place.

    ``modules``: the same program lowered at ``points`` (the sizes of the
    symbols: the corners of a box first (:func:`corners`), then any checks);
    ``sources``: symbol -> (argument, dimension) of the entry function whose
    size it is. Returns the symbolic shapes of the entry's arguments and
    results (tuples of ints and :class:`Poly`)."""
    base = modules[0]
    dims = _Dims(points)
    with base.context, ir.Location.unknown():
        walks = [list(_ops(m.operation)) for m in modules]
        if any(len(w) != len(walks[0]) for w in walks):
            first = next((k for k, ops in enumerate(zip(*walks)) if len({o.name for o in ops}) > 1),
                         min(len(w) for w in walks) - 1)
            raise SymbolicShapeError(
                f"the program differs at different sizes ({', '.join(str(len(w)) for w in walks)} ops), first at "
                f"{' / '.join(_describe(w[first]) for w in walks)}: does Python code branch on a size, or does "
                "an op's lowering depend on it (a scan's number of steps)?")
        numbering = [_numbering(m.operation) for m in modules]
        rewrites = []
        symbolic = set()  # the base module's values of symbolic shapes
        for ops in zip(*walks):
            op = ops[0]
            for other in ops[1:]:
                if other.name != op.name or len(other.operands) != len(op.operands) \
                        or len(other.results) != len(op.results):
                    raise SymbolicShapeError(f"the program differs at different sizes: {_describe(op)} against "
                                             f"{_describe(other)}: does Python code branch on a size, or does an "
                                             "op's lowering depend on it?")
            for k in range(len(op.operands)):
                ids = {num[o.operands[k]] for num, o in zip(numbering, ops)}
                if len(ids) > 1:
                    raise SymbolicShapeError(f"the operands of {_describe(op)} differ at different sizes")
            mine = _attributes(op)
            theirs = [_attributes(o) for o in ops[1:]]
            changed = sorted({k for t in theirs for k in set(t) | set(mine) if t.get(k) != mine.get(k)})
            if op.name == "func.func":
                changed = [a for a in changed if a != "function_type"]
            allowed = _SHAPE_ATTRS.get(op.name, ())
            if any(a not in allowed for a in changed):
                raise SymbolicShapeError(f"{_describe(op)} has attributes that depend on a size "
                                         f"({', '.join(a for a in changed if a not in allowed)}): lazycore cannot "
                                         "write it with symbolic dimensions")
            results = [dims.of([o.results[i].type for o in ops], lambda: _describe(op))
                       for i in range(len(op.results))]
            symbolic.update(r for r, d in zip(op.results, results) if _symbolic(d))
            if changed or any(_symbolic(r) for r in results):
                rewrites.append((ops, results, changed))
        func = _entry(base, entry)
        body = func.regions[0].blocks[0]
        arg_dims = [_dims_of_value(modules, entry, i, dims, "argument") for i in range(len(body.arguments))]
        ret = list(body.operations)[-1]
        res_dims = [_dims_of_value(modules, entry, i, dims, "result") for i in range(len(ret.operands))]
        for blocks in zip(*[list(_blocks(m.operation)) for m in modules]):
            for i, arg in enumerate(blocks[0].arguments):
                d = dims.of([b.arguments[i].type for b in blocks],
                            lambda: f"argument {i} of a block of {_describe(blocks[0].owner)}")
                if _symbolic(d):
                    symbolic.add(arg)
                    arg.set_type(_dynamic_type(arg.type, d))
        emit = _Emitter(func, sources)
        for ops, results, changed in rewrites:
            _rewrite(ops, results, changed, dims, emit, symbolic)
        ret = list(body.operations)[-1]
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in body.arguments], [v.type for v in ret.operands]))
        _cleanup(base)
    return arg_dims, res_dims


def _attributes(op) -> dict[str, str]:
    named = op.attributes
    return {named[i].name: str(named[i].attr) for i in range(len(named))}


def _numbering(module_op) -> dict:
    """Each value's position: block arguments and results in program order."""
    out = {}
    for block in _blocks(module_op):
        for a in block.arguments:
            out[a] = len(out)
    for op in _ops(module_op):
        for r in op.results:
            out[r] = len(out)
    return out


def _dims_of_value(modules, entry, i, dims, kind):
    if kind == "argument":
        types = [_entry(m, entry).regions[0].blocks[0].arguments[i].type for m in modules]
    else:
        types = [ir.FunctionType(ir.TypeAttr(_entry(m, entry).attributes["function_type"]).value).results[i]
                 for m in modules]
    return dims.of(types, lambda: f"{kind} {i}")


def _entry(module, entry):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == entry:
            return op.operation
    raise ValueError(f"module has no entry function @{entry}")


def _dynamic_type(t, dims):
    t = ir.RankedTensorType(t)
    return ir.RankedTensorType.get([DYNAMIC if isinstance(d, Poly) else d for d in dims], t.element_type,
                                   t.encoding)


class _Emitter:
    """Builds the shape arithmetic: sizes of the entry's arguments, polynomials
    of them, shape tensors (``tensor<Nxi32>``)."""

    def __init__(self, func, sources):
        self.args = func.regions[0].blocks[0].arguments
        self.sources = sources
        self.i32 = ir.IntegerType.get_signless(32)
        self.scalar = ir.RankedTensorType.get([], self.i32)

    def _op(self, name, operands, result, attrs=None):
        return ir.Operation.create(name, results=[result], operands=operands, attributes=attrs or {}).result

    def const(self, value: int, shape=()):
        t = ir.RankedTensorType.get(list(shape), self.i32)
        return self._op("stablehlo.constant", [], t,
                        {"value": ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(self.i32, value))})

    def size(self, symbol):
        arg, dim = self.sources[symbol]
        return self._op("stablehlo.get_dimension_size", [self.args[arg]], self.scalar,
                        {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)})

    def poly(self, p) -> ir.Value:
        """A ``tensor<i32>`` holding ``p`` (an int or a :class:`Poly`)."""
        if not isinstance(p, Poly):
            return self.const(p)
        total = None
        for syms, c in p.terms:
            term = None
            for s in sorted(syms):
                v = self.size(s)
                term = v if term is None else self._op("stablehlo.multiply", [term, v], self.scalar)
            if term is None:
                term = self.const(c)
            elif c != 1:
                term = self._op("stablehlo.multiply", [term, self.const(c)], self.scalar)
            total = term if total is None else self._op("stablehlo.add", [total, term], self.scalar)
        return total if total is not None else self.const(0)

    def shape(self, dims) -> ir.Value:
        """A ``tensor<Nxi32>`` of the dimensions."""
        one = ir.RankedTensorType.get([1], self.i32)
        parts = [self._op("stablehlo.reshape", [self.poly(d)], one) for d in dims]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return self.const(0, (0,))
        t = ir.RankedTensorType.get([len(parts)], self.i32)
        return self._op("stablehlo.concatenate", parts, t,
                        {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})


def _rewrite(ops, results, changed, dims, emit, symbolic) -> None:
    op = ops[0]
    out = results[0] if results else None
    name = op.name
    with ir.InsertionPoint(op):
        if name == "stablehlo.constant":
            symbolic.add(_constant(ops, out, dims, emit))
            return
        if name == "stablehlo.slice" and changed:
            symbolic.add(_slice(ops, out, dims, emit))
            return
        symbolic_operand = any(o in symbolic for o in op.operands)
        if name == "stablehlo.broadcast_in_dim":
            new = ir.Operation.create("stablehlo.dynamic_broadcast_in_dim", results=[_dynamic_type(op.result.type, out)],
                                      operands=[op.operands[0], emit.shape(out)],
                                      attributes={"broadcast_dimensions": op.attributes["broadcast_dimensions"]})
        elif name == "stablehlo.reshape":
            new = ir.Operation.create("stablehlo.dynamic_reshape", results=[_dynamic_type(op.result.type, out)],
                                      operands=[op.operands[0], emit.shape(out)])
        elif name == "stablehlo.iota":
            new = ir.Operation.create("stablehlo.dynamic_iota", results=[_dynamic_type(op.result.type, out)],
                                      operands=[emit.shape(out)],
                                      attributes={"iota_dimension": op.attributes["iota_dimension"]})
        else:
            if not symbolic_operand and not op.regions:
                raise SymbolicShapeError(f"{_describe(op)} makes a result of a symbolic shape from operands of "
                                         "static shapes: lazycore cannot write it with symbolic dimensions")
            for r, d in zip(op.results, results):
                if _symbolic(d):
                    r.set_type(_dynamic_type(r.type, d))
            return
    symbolic.add(new.result)
    op.result.replace_all_uses_with(new.result)
    op.erase()


def _constant(ops, out, dims, emit):
    op = ops[0]
    attrs = [ir.DenseElementsAttr(o.attributes["value"]) for o in ops]
    if not all(a.is_splat for a in attrs):
        if any(str(a) != str(attrs[0]) for a in attrs) or _symbolic(out):
            raise SymbolicShapeError(f"{_describe(op)}: a constant whose values depend on a size (a size baked "
                                     "into its values): lazycore cannot write it with symbolic dimensions")
        return op.result
    t = ir.RankedTensorType(op.result.type)
    element = t.element_type
    scalar_t = ir.RankedTensorType.get([], element)
    values = [a.get_splat_value() for a in attrs]
    texts = [str(v) for v in values]
    if all(s == texts[0] for s in texts):
        scalar = ir.Operation.create("stablehlo.constant", results=[scalar_t], operands=[],
                                     attributes={"value": ir.DenseElementsAttr.get_splat(scalar_t, values[0])}).result
    else:
        scalar = _symbolic_scalar(op, values, element, scalar_t, dims, emit)
    if _symbolic(out):
        new = ir.Operation.create("stablehlo.dynamic_broadcast_in_dim", results=[_dynamic_type(t, out)],
                                  operands=[scalar, emit.shape(out)],
                                  attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])})
    else:
        new = ir.Operation.create("stablehlo.broadcast_in_dim", results=[t], operands=[scalar],
                                  attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])})
    op.result.replace_all_uses_with(new.result)
    op.erase()
    return new.result


def _symbolic_scalar(op, values, element, scalar_t, dims, emit):
    """A splat's value that is a size (``mean``'s divisor) or one over a size."""
    is_float = isinstance(element, ir.FloatType)
    numbers = [ir.FloatAttr(v).value if is_float else ir.IntegerAttr(v).value for v in values]
    poly = _fit(dims.points, numbers) if all(float(n).is_integer() for n in numbers) else None
    inverse = None
    if poly is None and is_float and all(n != 0 for n in numbers):
        inverse = [1 / n for n in numbers]
        rounded = [round(n) for n in inverse]
        close = all(abs(r - n) <= 1e-6 * max(1.0, abs(n)) for r, n in zip(rounded, inverse))
        inverse = _fit(dims.points, rounded) if close else None
    if poly is None and inverse is None:
        raise SymbolicShapeError(f"{_describe(op)}: a constant whose value depends on a size in a way lazycore "
                                 f"cannot write with symbols ({', '.join(map(str, numbers))})")
    size = emit.poly(poly if poly is not None else inverse)
    if str(element) != "i32":
        size = ir.Operation.create("stablehlo.convert", results=[scalar_t], operands=[size]).result
    if inverse is None:
        return size
    one = ir.Operation.create("stablehlo.constant", results=[scalar_t], operands=[],
                              attributes={"value": ir.DenseElementsAttr.get_splat(
                                  scalar_t, ir.FloatAttr.get(element, 1.0))}).result
    return ir.Operation.create("stablehlo.divide", results=[scalar_t], operands=[one, size]).result


def _slice(ops, out, dims, emit):
    op = ops[0]

    def bounds(attr):
        per = [list(ir.DenseI64ArrayAttr(o.attributes[attr])) for o in ops]
        return [col[0] if all(c == col[0] for c in col) else _fit(dims.points, list(col)) or _no_fit(op, attr)
                for col in zip(*per)]

    start, limit = bounds("start_indices"), bounds("limit_indices")
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    new = ir.Operation.create("stablehlo.real_dynamic_slice", results=[_dynamic_type(op.result.type, out)],
                              operands=[op.operands[0], emit.shape(start), emit.shape(limit), emit.shape(strides)])
    op.result.replace_all_uses_with(new.result)
    op.erase()
    return new.result


def _no_fit(op, attr):
    raise SymbolicShapeError(f"{_describe(op)}: its {attr} depend on a size in a way lazycore cannot write with "
                             "symbols")


def _cleanup(module) -> None:
    """Shares the shape arithmetic (one ``get_dimension_size`` per symbol)."""
    passmanager.PassManager.parse("builtin.module(cse)").run(module.operation)


# --- refine --------------------------------------------------------------------------------


@functools.cache
def _passes_registered() -> bool:
    stablehlo.register_stablehlo_passes()
    return True


def refine(module, arg_types: list[str]) -> None:
    """``module`` (with symbolic dimensions) at the argument types ``arg_types``
    (MLIR text, all static), in place: every shape static, the dynamic ops
    static again."""
    _passes_registered()
    types = ",".join(arg_types)
    with module.context:
        pm = passmanager.PassManager.parse(
            f"builtin.module(stablehlo-refine-arguments{{types={types}}},stablehlo-refine-shapes,"
            "func.func(stablehlo-canonicalize-dynamism),stablehlo-refine-shapes,canonicalize,cse)")
        pm.run(module.operation)
        for op in _ops(module.operation):
            for r in op.results:
                shape = _shape(r.type)
                if shape is not None and DYNAMIC in shape:
                    raise SymbolicShapeError(f"{_describe(op)} still has a dynamic shape at {', '.join(arg_types)}")
