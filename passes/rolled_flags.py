"""A rolled loop's value check flags, computed once over its stacked copies.

Each copy of a chain (:mod:`lazycore.passes.rolled_chains`) that indexes
with values held on the device checks its own indices: computed in the
loop's body, every check is a mask and a reduction per copy, kernels run
once per iteration, and the flags are written into the loop's flag array a
row per iteration. A flag made only of the copies' stacked inputs (an
index), values all copies share and constants, through elementwise, shape
and reduction ops, is the same computation over the stacked inputs with a
leading copy axis: :func:`over_stacks` emits it so, before the loop, as one
reduction over all copies (per copy along the leading axis), which XLA also
shares between loops that check the same stack (a forward chain and the
update chain reading the same indices). A flag made of what a copy carries
(or of an op not listed here) stays in the body.

The flags' layout is unchanged: copy ``c``'s flag ``q`` is element ``[c, q]``
of the chain's one flag array (:attr:`lazycore.passes.rolled_chains.Chain.flags`).
"""

from __future__ import annotations

from typing import Callable

from lazycore.dialect import OPS, create, from_mlir_type
from lazycore.dialect.reduction import REDUCE

__all__ = ["over_stacks"]

_REDUCTIONS = frozenset(REDUCE)


def _elementwise(op: str) -> bool:
    spec = OPS.get(f"lazy.{op}")
    return spec is not None and spec.elementwise  # (a bitcast keeps the width: lazy.bitcast_convert)


def _single(o) -> bool:
    return len(o) == 2 and isinstance(o[1], int)


def _lead(op: str, attrs: dict, k: int) -> dict | None:
    """``attrs`` of a shape or reduction op over a value with a new leading
    axis of ``k`` copies."""
    a = dict(attrs)
    if op == "reshape":
        a["shape"] = (k,) + tuple(a["shape"])
    elif op == "broadcast_in_dim":
        a["dims"] = (0,) + tuple(d + 1 for d in a["dims"])
        a["shape"] = (k,) + tuple(a["shape"])
    elif op == "slice":
        a["start"] = [0] + list(a["start"])
        a["limit"] = [k] + list(a["limit"])
        a["strides"] = [1] + list(a["strides"])
    elif op == "permute":
        a["dims"] = (0,) + tuple(d + 1 for d in a["dims"])
    elif op == "reverse" or op in _REDUCTIONS:
        a["dims"] = tuple(d + 1 for d in a["dims"])
    else:
        return None
    return a


def over_stacks(chain, rows: Callable, shared: Callable, emit: Callable) -> dict[int, object]:
    """Per flag ``q`` of ``chain.flags`` that can be had over the stacked
    copies, its value for every copy as one ``(copies,)`` array (emitted at
    the current insertion point, outside the loop). ``rows(n)``: the chain's
    stacked input ``n`` as a ``(copies, ...)`` array in copy order;
    ``shared(n)``: shared value ``n``; ``emit(node, operands)``: one node's
    results, as the compiler emits them (for what the copies remake from
    constants and shared scalars)."""
    k = len(chain.copies)
    position = {id(n): j for j, n in enumerate(chain.copies[0])}
    made: dict[int, object] = {}  # id(copy 0's node) -> its value over the copies, or None
    remade: dict[int, list | None] = {}  # id(remat node) -> its results outside the loop, or None

    def spread(x):
        t = from_mlir_type(x.type)
        return create("broadcast_in_dim", x, dims=tuple(range(1, len(t.shape) + 1)),
                      shape=(k,) + tuple(t.shape)).result

    def outside(v):
        """A value the copies remake (``chain.remat``), made once outside."""
        node = v[0]
        if node.is_leaf:
            what, n = chain.remat_leaf[(id(node), v[1])]
            return shared(n) if what == "shared" else None
        if id(node) not in remade:
            operands = [outside(o) if _single(o) else [outside(w) for w in o] for o in node.operands]
            missing = any(x is None for o in operands for x in (o if isinstance(o, list) else [o]))
            remade[id(node)] = None if missing else emit(node, operands)
        results = remade[id(node)]
        return None if results is None else results[v[1]]

    def operand(j: int, o: int, v):
        if id(v[0]) in position:
            return value(v)
        what, n = chain.operand_kind[(j, o, 0)]
        if what == "stacked":
            return rows(n)
        if what == "shared":
            return spread(shared(n))
        if what == "remat":
            x = outside(chain.remade[n])
            return None if x is None else spread(x)
        return None  # carried from the copy before: per iteration

    def value(v):
        node = v[0]
        if id(node) not in made:
            made[id(node)] = None  # (until made: an op not listed here is never revisited)
            made[id(node)] = _over(node, position[id(node)])
        got = made[id(node)]
        return got if got is None or v[1] == 0 else None

    def _over(node, j: int):
        if not all(_single(o) for o in node.operands) or len(node.types) != 1:
            return None
        if node.op == "check":  # (lowers to its operand)
            return operand(j, 0, node.operands[0])
        if _elementwise(node.op):
            attrs = node.attrs
        else:
            attrs = _lead(node.op, node.attrs, k)
            if attrs is None:
                return None
        operands = [operand(j, o, v) for o, v in enumerate(node.operands)]
        if any(x is None for x in operands):
            return None
        return create(node.op, *operands, **attrs).result

    found = {}
    for q, (j, r) in enumerate(chain.flags):
        got = value((chain.copies[0][j], r))
        if got is not None and from_mlir_type(got.type).shape == (k,):
            found[q] = got
    return found
