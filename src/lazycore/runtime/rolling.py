"""Loops kept as loops: chains of identical layers found in a barrier's walk.

A stack of N layers with their own weights, traced op by op, arrives at a
barrier as N copies of one sub-graph: each copy reads what the one before
it made (the carried values), its own inputs (the per-copy values: its
weights, or what an earlier chain's copy made for it), and values all copies
share. A training step holds three such runs: the forward layers, their
backward in reverse order (carrying the gradient, reading the activations
the forward kept) and the per-layer optimizer updates (carrying nothing).
:func:`find_chains` finds them in a walk; the compiler emits each as one
``stablehlo.while`` whose body is the first copy's ops
(:mod:`lazycore.runtime.rolled_emit`), so XLA compiles one layer per chain
instead of N. A copy's values that anything outside the chain reads (the
activations a backward pass keeps, the new weights) leave the loop stacked
along a new leading axis, written in place with ``dynamic_update_slice``;
a later chain reading them per copy reads the stack directly.

Only the compiler looks at it, on a compile-cache miss;
``settings.roll_loops`` (``LAZYCORE_ROLL_LOOPS=1``) turns it on and is part
of the compile key. Nothing here touches MLIR.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lazycore.ir.graph import Node, Scalar, Value, digest
from lazycore.ir.regions import RegionNode

MIN_COPIES = 3
MIN_OPS = 2
MIN_ROLLED = 12
"""Fewest ops a chain must hold in all: a loop costs a little each step, so a
few repeated ops are not worth one."""
MAX_PERIOD = 512
MAX_CANDIDATES = 64


@dataclass
class Chain:
    """``copies[i][j]``: node ``j`` of copy ``i``; copy 0's nodes are the body."""

    copies: list[list[Node]]
    slots: list[tuple[int, int]]
    """The carried values: ``(j, result index)`` of a copy's node."""
    init: list[Value]
    """Each slot's value before the first copy."""
    stacked: list[list[Value]]
    """Per-copy inputs: for each, the outer value every copy reads (N of them)."""
    shared: list[Value]
    """Outer values every copy reads."""
    operand_kind: dict[tuple[int, int, int], tuple[str, int]]
    """``(j, operand, member)`` of copy 0 -> ("slot" | "stacked" | "shared", index),
    for operands that are not copy 0's own nodes."""
    last_position: int
    """Walk position of the chain's last node: the loop is emitted there."""
    exported: list[tuple[int, int]] = field(default_factory=list)
    """``(j, result index)`` of the copies' values read outside the chain
    (but for the last copy's carried values, the loop's results): the loop
    returns them stacked, copy ``i``'s at row ``i``."""


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


def find_chains(order: list[Node], outputs: list[Value]) -> list[Chain]:
    """Disjoint runs of at least :data:`MIN_COPIES` identical copies in the
    walk ``order`` that can each become one loop, largest first."""
    # what is computed from constants and scalars alone (an epsilon
    # broadcast, a mask) is made once where the first layer needs it and
    # shared by the rest: in the runs, it would shift the first copy by a
    # few ops, so the copies are matched without it
    fixed: set[int] = set()  # from constants alone
    scalar: set[int] = set()  # from constants and scalar leaves
    for n in order:
        if type(n) is Scalar:
            scalar.add(id(n))
        elif not n.is_leaf:
            ins = [id(v[0]) for _, v in _members(n)]
            if all(i in fixed for i in ins):
                fixed.add(id(n))
            if all(i in fixed or i in scalar for i in ins):
                scalar.add(id(n))
    inner = [(i, n) for i, n in enumerate(order) if not n.is_leaf and id(n) not in scalar]
    if len(inner) < MIN_ROLLED:
        return []
    ids: dict[tuple, int] = {}
    seq = np.fromiter((ids.setdefault(_local(n), len(ids)) for _, n in inner), np.int64, len(inner))
    users = _outside_users(order)
    out_values = {(id(v[0]), v[1]) for v in outputs}
    taken = np.zeros(len(seq), bool)
    chains = []
    for _, start, p, k in _candidates(seq):
        if taken[start:start + k * p].any():
            continue
        # the longest run may not verify (its first or last copy reads or is
        # read otherwise than the others): try fewer copies before giving up
        chain = None
        for copies in range(k, MIN_COPIES - 1, -1):
            if copies * p < MIN_ROLLED:
                break
            for skip in range(k - copies + 1):
                first = start + skip * p
                chain = _verify([[inner[first + i * p + j][1] for j in range(p)] for i in range(copies)],
                                inner[first + copies * p - 1][0], users, out_values, fixed)
                if chain is not None:
                    taken[first:first + copies * p] = True
                    chains.append(chain)
                    break
            if chain is not None:
                break
    return sorted(chains, key=lambda c: c.last_position)


def find_chain(order: list[Node], outputs: list[Value]) -> Chain | None:
    """The largest chain :func:`find_chains` finds, or None."""
    chains = find_chains(order, outputs)
    return max(chains, key=lambda c: len(c.copies) * len(c.copies[0])) if chains else None


def _candidates(seq: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(ops covered, start, period, copies)`` of the maximal periodic runs
    in the signature sequence, most ops first (fewer copies of a longer
    period, the same ops, come after)."""
    n = len(seq)
    found = []
    for p in range(MIN_OPS, min(MAX_PERIOD, n // MIN_COPIES) + 1):
        same = np.concatenate(([False], seq[:-p] == seq[p:], [False]))
        edges = np.flatnonzero(np.diff(same.view(np.int8)))
        starts, ends = edges[0::2], edges[1::2]
        copies = (ends - starts + p) // p
        keep = (copies >= MIN_COPIES) & (copies * p >= MIN_ROLLED)
        found.extend(zip((copies * p)[keep].tolist(), starts[keep].tolist(), [p] * int(keep.sum()),
                         copies[keep].tolist()))
    found.sort(key=lambda c: (-c[0], c[2]))
    return found[:MAX_CANDIDATES]


def _outside_users(order: list[Node]) -> dict[int, list[Node]]:
    """id(node) -> the inner nodes reading it (once each)."""
    users: dict[int, list[Node]] = {}
    for node in order:
        if node.is_leaf:
            continue
        seen = set()
        for _, v in _members(node):
            if id(v[0]) not in seen:
                seen.add(id(v[0]))
                users.setdefault(id(v[0]), []).append(node)
    return users


def _verify(copies: list[list[Node]], last_position: int, users: dict[int, list[Node]],
            out_values: set[tuple[int, int]], fixed: set[int]) -> Chain | None:
    k = len(copies)
    if any(node.op == "check" for node in copies[0]):
        return None  # a check's flag is a program output of its own
    pos = {id(node): (i, j) for i, copy in enumerate(copies) for j, node in enumerate(copy)}
    slots: dict[tuple[int, int], int] = {}
    init: list[Value] = []
    stacked: list[list[Value]] = []
    shared: list[Value] = []
    kind: dict[tuple[int, int, int], tuple[str, int]] = {}
    # every edge into a copy is classified here, operand by operand of copy
    # 0 against the same operand of the others: whatever does not fit a
    # loop's shape (a copy reading two copies back, or its own node where
    # the others read outer values) rejects the run
    members = [dict(_members(copy[j])) for copy in copies for j in range(len(copy))]
    p = len(copies[0])
    for j, node in enumerate(copies[0]):
        for (o, m), v in _members(node):
            seen = [members[i * p + j][(o, m)] for i in range(k)]
            at = pos.get(id(v[0]))
            if at is not None:
                if at[0] != 0:
                    return None
                # copy 0's own node: every copy must read its own at the same place
                if any(pos.get(id(w[0])) != (i, at[1]) or w[1] != v[1] for i, w in enumerate(seen)):
                    return None
                continue
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
            elif any(id(w[0]) in fixed for w in seen):
                return None  # copies that differ in a constant compute different things
            else:
                kind[(j, o, m)] = ("stacked", len(stacked))
                stacked.append(seen)
    # what the rest of the program reads of the copies leaves the loop: the
    # last copy's carried values as its results, anything else stacked
    exported: set[tuple[int, int]] = set()
    for i, copy in enumerate(copies):
        for j, node in enumerate(copy):
            for user in users.get(id(node), ()):
                if id(user) in pos:
                    continue
                for _, v in _members(user):
                    if v[0] is node and not (i == k - 1 and (j, v[1]) in slots):
                        exported.add((j, v[1]))
            for r in range(len(node.types)):
                if (id(node), r) in out_values and not (i == k - 1 and (j, r) in slots):
                    exported.add((j, r))
    ordered = sorted(slots, key=slots.get)
    return Chain(copies, ordered, init, stacked, shared, kind, last_position, sorted(exported))
