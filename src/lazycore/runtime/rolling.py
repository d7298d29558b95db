"""Loops kept as loops: a chain of identical layers found in a barrier's walk.

A stack of N layers with their own weights, traced op by op, arrives at a
barrier as N copies of one sub-graph: each copy reads what the one before
it made (the carried values), its own weights (leaves of the same types),
and values all copies share. :func:`find_chain` finds the longest such run
in a walk; the compiler then emits it as one ``stablehlo.while`` over the
weights stacked along a new leading axis, the body being the first copy's
ops (:func:`lazycore.runtime.compiler.build_module`), so XLA compiles one
layer instead of N.

This is a first step, for forward graphs: a run whose intermediate values
anything outside the next copy reads (the activations a backward pass
keeps) is left unrolled. Only the compiler looks at it, on a compile-cache
miss; ``settings.roll_loops`` (``LAZYCORE_ROLL_LOOPS=1``) turns it on and is
part of the compile key. Nothing here touches MLIR.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lazycore.ir.graph import Node, Value, digest
from lazycore.ir.regions import RegionNode

MIN_COPIES = 3
MIN_OPS = 2
MAX_PERIOD = 512


@dataclass
class Chain:
    """``copies[i][j]``: node ``j`` of copy ``i``; copy 0's nodes are the body."""

    copies: list[list[Node]]
    slots: list[tuple[int, int]]
    """The carried values: ``(j, result index)`` of a copy's node."""
    init: list[Value]
    """Each slot's value before the first copy."""
    stacked: list[list[Value]]
    """Per-copy inputs: for each, the leaf every copy reads (N of them)."""
    shared: list[Value]
    """Outer values every copy reads."""
    operand_kind: dict[tuple[int, int, int], tuple[str, int]]
    """``(j, operand, member)`` of copy 0 -> ("slot" | "stacked" | "shared", index),
    for operands that are not copy 0's own nodes."""
    last_position: int
    """Walk position of the chain's last node: the loop is emitted there."""


def _attrs_key(node: Node) -> tuple:
    """A node's attributes, exactly (a dense constant by its bytes' digest; a
    loop by its bodies' structure): copies must compute the same thing."""
    out = []
    for name in sorted(node.attrs):
        a = node.attrs[name]
        if isinstance(a, np.ndarray):
            a = (a.dtype.str, a.shape, digest(np.ascontiguousarray(a).tobytes()))
        out.append((name, a))
    if type(node) is RegionNode:
        out.append(tuple(digest(b.encoding) for b in node.bodies))
    return tuple(out)


def _local(node: Node) -> tuple:
    """What a node looks like on its own: op, attributes, types and its
    operands' types (where they come from is for :func:`_verify` to match)."""
    ops = tuple(o.type if type(o) is Value else tuple(v.type for v in o) for o in node.operands)
    return (node.op, _attrs_key(node), node.types, ops)


def _members(node: Node):
    """``((operand, member), value)`` for each operand value of ``node``."""
    for k, o in enumerate(node.operands):
        if type(o) is Value:
            yield (k, 0), o
        else:
            for m, v in enumerate(o):
                yield (k, m), v


def find_chain(order: list[Node], outputs: list[Value]) -> Chain | None:
    """The longest run of at least :data:`MIN_COPIES` identical copies in the
    walk ``order`` that can become one loop, or None."""
    inner = [(i, n) for i, n in enumerate(order) if not n.is_leaf]
    if len(inner) < MIN_COPIES * MIN_OPS:
        return None
    sig = [_local(n) for _, n in inner]
    n = len(sig)
    best = None  # (covered, start, period, copies)
    for p in range(MIN_OPS, min(MAX_PERIOD, n // MIN_COPIES) + 1):
        run = 0
        for j in range(n - p):
            run = run + 1 if sig[j] == sig[j + p] else 0
            copies = (run + p) // p
            if copies >= MIN_COPIES and (best is None or copies * p > best[0]):
                start = j - run + 1
                best = (copies * p, start, p, copies)
    if best is None:
        return None
    _, start, p, k = best
    # the longest run may not verify (its first or last copy reads or is read
    # otherwise than the others): try fewer copies before giving up
    for copies in range(k, MIN_COPIES - 1, -1):
        for skip in range(k - copies + 1):
            first = start + skip * p
            chain = _verify([[inner[first + i * p + j][1] for j in range(p)] for i in range(copies)],
                            inner[first + copies * p - 1][0], order, outputs)
            if chain is not None:
                return chain
    return None


def _verify(copies: list[list[Node]], last_position: int, order: list[Node], outputs: list[Value]) -> Chain | None:
    k = len(copies)
    if any(node.op == "check" for node in copies[0]):
        return None  # a check's flag is a program output of its own
    pos = {id(node): (i, j) for i, copy in enumerate(copies) for j, node in enumerate(copy)}
    slots: dict[tuple[int, int], int] = {}
    init: list[Value] = []
    stacked: list[list[Value]] = []
    shared: list[Value] = []
    kind: dict[tuple[int, int, int], tuple[str, int]] = {}
    first = copies[0]
    for j, node in enumerate(first):
        for (o, m), v in _members(node):
            at = pos.get(id(v[0]))
            if at is not None:
                if at[0] != 0:
                    return None
                # copy 0's own node: every copy must read its own at the same place
                for i in range(1, k):
                    w = dict(_members(copies[i][j]))[(o, m)]
                    if pos.get(id(w[0])) != (i, at[1]) or w[1] != v[1]:
                        return None
                continue
            seen = [dict(_members(copies[i][j]))[(o, m)] for i in range(k)]
            later = [pos.get(id(w[0])) for w in seen[1:]]
            if all(a is not None for a in later):
                # carried: copy i reads copy i-1's node at one place
                slot = (later[0][1], seen[1][1])
                if any(a != (i, slot[0]) or w[1] != slot[1] for i, (a, w) in enumerate(zip(later, seen[1:]))):
                    return None
                if slot not in slots:
                    slots[slot] = len(init)
                    init.append(v)
                elif init[slots[slot]] != v:
                    return None
                kind[(j, o, m)] = ("slot", slots[slot])
            elif any(a is not None for a in later):
                return None
            elif all(w == v for w in seen):
                if v not in shared:
                    shared.append(v)
                kind[(j, o, m)] = ("shared", shared.index(v))
            elif all(w[0].is_leaf for w in seen):
                kind[(j, o, m)] = ("stacked", len(stacked))
                stacked.append(seen)
            else:
                return None
    # what the copies make is read by the next copy only, but for the last
    # copy's carried values, which the rest of the program may read
    slot_of = {(j, r) for j, r in slots}
    for p, node in enumerate(order):
        at_user = pos.get(id(node))
        for _, v in (_members(node) if not node.is_leaf else ()):
            at = pos.get(id(v[0]))
            if at is None:
                continue
            if at_user is not None:
                if at_user[0] not in (at[0], at[0] + 1):
                    return None
                continue
            if at[0] != k - 1 or (at[1], v[1]) not in slot_of or p < last_position:
                return None
    for v in outputs:
        at = pos.get(id(v[0]))
        if at is not None and (at[0] != k - 1 or (at[1], v[1]) not in slot_of):
            return None
    ordered = sorted(slots, key=slots.get)
    return Chain(copies, ordered, init, stacked, shared, kind, last_position)
