"""Loops kept as loops: chains of identical layers found in a program's ops.

A stack of N layers with their own weights, traced op by op, arrives at a
barrier as N copies of one sub-graph: each copy reads what the one before
it made (the carried values), its own inputs (the per-copy values: its
weights, or what an earlier chain's copy made for it), and values all copies
share. A training step holds three such runs: the forward layers, their
backward in reverse order (carrying the gradient, reading the activations
the forward kept) and the per-layer optimizer updates (carrying nothing).
:func:`find_chains` finds them in a topologically ordered list of nodes;
:mod:`lazycore.passes.rolled_emit` emits each as one ``stablehlo.while``
whose body is the first copy's ops, so XLA compiles one layer per chain
instead of N.

The matcher is the same for the two callers: the compiler, on a barrier's
walk (:mod:`lazycore.runtime.rolling`: lazy graph nodes), and the
``lazy-roll-loops`` pass on a module's ops (:mod:`lazycore.passes.roll_loops`).
A node is anything with ``op``, ``attrs``, ``types``, ``operands`` and
``is_leaf``; an operand is a value, a ``(node, result index)`` pair, or a
group (a tuple) of values. Nothing here touches MLIR.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

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

    copies: list[list]
    slots: list[tuple[int, int]]
    """The carried values: ``(j, result index)`` of a copy's node."""
    init: list
    """Each slot's value before the first copy."""
    stacked: list[list]
    """Per-copy inputs: for each, the outer value every copy reads (N of them)."""
    shared: list
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
    remat: list = field(default_factory=list)
    """Nodes the body makes again, operands first: what the copies share that
    is made from constants and scalars alone."""
    remade: list = field(default_factory=list)
    """The values of ``remat`` the copies read (operand kind "remat")."""
    remat_leaf: dict = field(default_factory=dict)
    """``(id(leaf), result)`` of a leaf copy 0's ``remat`` nodes read ->
    ("shared" | "stacked", index): where the body finds it."""
    flags: list[tuple[int, int]] = field(default_factory=list)
    """``(j, result index)`` of the copies' value check flags (``find_chains``'s
    ``flags``): one i1 array holds them, copy ``i``'s flag ``q`` at ``[i, q]``
    (had over the stacked copies before the loop where a flag is made of them
    alone, :mod:`lazycore.passes.rolled_flags`; else written by the loop),
    and no copy's value is bound (the program returns the array)."""


def _attrs_key(node) -> tuple:
    """A node's attributes, exactly (a dense constant by its bytes' digest; a
    loop by its bodies' structure): copies must compute the same thing."""
    out = []
    for name in sorted(node.attrs):
        a = node.attrs[name]
        if isinstance(a, np.ndarray):
            a = (a.dtype.str, a.shape, _digest(np.ascontiguousarray(a).tobytes()))
        out.append((name, a))
    bodies = getattr(node, "bodies", None)
    if bodies:
        out.append(tuple(_digest(b.encoding) for b in bodies))
    return tuple(out)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _single(o) -> bool:
    """Whether an operand is one value (a ``(node, index)`` pair), not a group."""
    return len(o) == 2 and isinstance(o[1], int)


def _local(node) -> tuple:
    """What a node looks like on its own: op, attributes, types and its
    operands' types (where they come from is for :func:`_verify` to match)."""
    ops = tuple(_type(o) if _single(o) else tuple(_type(v) for v in o) for o in node.operands)
    return (node.op, _attrs_key(node), node.types, ops)


def _type(v):
    return v[0].types[v[1]]


def _members(node):
    """``((operand, member), value)`` for each operand value of ``node``."""
    for k, o in enumerate(node.operands):
        if _single(o):
            yield (k, 0), o
        else:
            for m, v in enumerate(o):
                yield (k, m), v


def find_chains(order: list, outputs: list, scalar_leaf: Callable = lambda node: False,
                flags: list = (), least: int = MIN_COPIES) -> list[Chain]:
    """Disjoint runs of at least ``least`` (:data:`MIN_COPIES` or more) identical copies in
    ``order`` (nodes, operands before their users) that can each become one
    loop, in order; ``outputs``: the values the program returns;
    ``scalar_leaf(node)``: whether a leaf is a runtime scalar (an epsilon,
    a learning rate), which the layers may share; ``flags``: the value checks'
    flags the program returns too, a copy's as a row of its loop's stack
    (:attr:`Chain.flags`), where an output would be a value of its own per copy."""
    # what is computed from constants and scalars alone (an epsilon
    # broadcast, a mask) is made once where the first layer needs it and
    # shared by the rest: in the runs, it would shift the first copy by a
    # few ops, so the copies are matched without it
    fixed: set[int] = set()  # from constants alone
    scalar: set[int] = set()  # from constants and scalar leaves
    for n in order:
        if n.is_leaf and scalar_leaf(n):
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
    flag_values = {(id(v[0]), v[1]) for v in flags}
    taken = np.zeros(len(seq), bool)
    chains = []
    for _, start, p, k in _candidates(seq, least):
        if taken[start:start + k * p].any():
            continue
        # the longest run may not verify (its first or last copy reads or is
        # read otherwise than the others): try fewer copies before giving up
        chain = None
        for copies in range(k, least - 1, -1):
            if copies * p < MIN_ROLLED:
                break
            for skip in range(k - copies + 1):
                first = start + skip * p
                chain = _verify([[inner[first + i * p + j][1] for j in range(p)] for i in range(copies)],
                                inner[first + copies * p - 1][0], users, out_values, fixed, scalar,
                                flag_values)
                if chain is not None:
                    taken[first:first + copies * p] = True
                    chains.append(chain)
                    break
            if chain is not None:
                break
    return sorted(chains, key=lambda c: c.last_position)


def _candidates(seq: np.ndarray, least: int) -> list[tuple[int, int, int, int]]:
    """``(ops covered, start, period, copies)`` of the maximal periodic runs
    in the signature sequence, most ops first (fewer copies of a longer
    period, the same ops, come after)."""
    n = len(seq)
    found = []
    for p in range(MIN_OPS, min(MAX_PERIOD, n // least) + 1):
        same = np.concatenate(([False], seq[:-p] == seq[p:], [False]))
        edges = np.flatnonzero(np.diff(same.view(np.int8)))
        starts, ends = edges[0::2], edges[1::2]
        copies = (ends - starts + p) // p
        keep = (copies >= least) & (copies * p >= MIN_ROLLED)
        found.extend(zip((copies * p)[keep].tolist(), starts[keep].tolist(), [p] * int(keep.sum()),
                         copies[keep].tolist()))
    found.sort(key=lambda c: (-c[0], c[2]))
    return found[:MAX_CANDIDATES]


def _outside_users(order: list) -> dict[int, list]:
    """id(node) -> the inner nodes reading it (once each)."""
    users: dict[int, list] = {}
    for node in order:
        if node.is_leaf:
            continue
        seen = set()
        for _, v in _members(node):
            if id(v[0]) not in seen:
                seen.add(id(v[0]))
                users.setdefault(id(v[0]), []).append(node)
    return users


def _verify(copies: list[list], last_position: int, users: dict[int, list],
            out_values: set[tuple[int, int]], fixed: set[int], scalar: set[int],
            flag_values: set[tuple[int, int]] = frozenset()) -> Chain | None:
    k = len(copies)
    pos = {id(node): (i, j) for i, copy in enumerate(copies) for j, node in enumerate(copy)}
    slots: dict[tuple[int, int], int] = {}
    init: list = []
    stacked: list[list] = []
    shared: list = []
    kind: dict[tuple[int, int, int], tuple[str, int]] = {}
    remat: list = []
    remade: list = []
    remat_leaf: dict[tuple[int, int], tuple[str, int]] = {}
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
            elif not v[0].is_leaf and all(id(w[0]) in scalar for w in seen) and (
                    leaves := _align(seen)) is not None:
                # made from constants and scalars alone (a broadcast epsilon, a
                # mask, a layer's own broadcast learning rate), by each copy the
                # same way: made again in the body, where XLA fuses it into its
                # readers as it does unrolled, rather than carried in whole or
                # stacked; the scalars it reads are shared, or stacked where
                # the copies' differ
                for per in leaves:
                    at_leaf = remat_leaf.get((id(per[0][0]), per[0][1]))
                    if all(w == per[0] for w in per):
                        if at_leaf is None:
                            if per[0] not in shared:
                                shared.append(per[0])
                            remat_leaf[(id(per[0][0]), per[0][1])] = ("shared", shared.index(per[0]))
                        elif at_leaf[0] != "shared":
                            return None
                    elif at_leaf is None:
                        remat_leaf[(id(per[0][0]), per[0][1])] = ("stacked", len(stacked))
                        stacked.append(per)
                    elif at_leaf[0] != "stacked" or stacked[at_leaf[1]] != per:
                        return None
                _pull(v[0], remat)
                if v not in remade:
                    remade.append(v)
                kind[(j, o, m)] = ("remat", remade.index(v))
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
    flags: set[tuple[int, int]] = set()
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
                if (id(node), r) in flag_values:
                    flags.add((j, r))
    # a check in one copy is a check in each: every copy's flag is one
    for j, r in flags:
        if any((id(copy[j]), r) not in flag_values for copy in copies):
            return None
    ordered = sorted(slots, key=slots.get)
    return Chain(copies, ordered, init, stacked, shared, kind, last_position, sorted(exported), remat, remade,
                 remat_leaf, sorted(flags))


def _pull(node, remat: list) -> None:
    """Appends to ``remat`` the inner nodes ``node`` is made of, operands first."""
    if any(n is node for n in remat):
        return
    for _, w in _members(node):
        if not w[0].is_leaf:
            _pull(w[0], remat)
    remat.append(node)


def _align(values: list) -> list | None:
    """The leaves each copy's value is made of, as ``[[copy 0's, copy 1's,
    ...], ...]`` in one order, when every copy makes its value by the same
    ops with the same attributes (a constant's bytes included); else None."""
    leaves: list = []
    done: set = set()

    def walk(vs) -> bool:
        nodes = [v[0] for v in vs]
        if any(v[1] != vs[0][1] for v in vs):
            return False
        if any(n.is_leaf for n in nodes):
            if not all(n.is_leaf and n.types == nodes[0].types for n in nodes):
                return False
            leaves.append(list(vs))
            return True
        key = tuple(id(n) for n in nodes)
        if key in done:
            return True
        done.add(key)
        if any(_local(n) != _local(nodes[0]) for n in nodes):
            return False
        groups = [dict(_members(n)) for n in nodes]
        return all(walk([g[k] for g in groups]) for k in groups[0])

    return leaves if walk(values) else None


class Stacks:
    """Which stacked array holds a value as one of its rows, for one module
    (an array is an MLIR value where a loop is emitted, any token where the
    runtime only plans which parameters come in stacked)."""

    def __init__(self):
        self.arrays: list = []
        self.rows: dict[tuple[int, int], tuple[int, int]] = {}
        """(id(node), result) -> (array number, row)."""
        self.sizes: list[int] = []
        """Per array, how many of its rows hold values of the graph."""
        self.updates: list[tuple] = []
        """(array, array a loop returned with its rows written over in place)."""
        self.flags: dict[tuple[int, int], tuple] = {}
        """(id(node), result) of a value check flag a loop computed -> (the
        loop's array of its flags, row, column): :attr:`Chain.flags`."""

    def add(self, array, values) -> None:
        self.add_rows(array, dict(enumerate(values)))

    def add_rows(self, array, rows: dict) -> None:
        """``array``'s row ``i`` holds ``rows[i]`` (a value of the graph)."""
        n = len(self.arrays)
        self.arrays.append(array)
        self.sizes.append(len(rows))
        for i, v in rows.items():
            self.rows.setdefault((id(v[0]), v[1]), (n, i))

    def latest(self, array):
        """``array`` after the loops that wrote their results over its rows."""
        for old, new in self.updates:
            if old == array:
                array = new
        return array

    def find(self, values) -> tuple | None:
        """``(array, first row, step)`` when ``values`` are rows of one stack
        at evenly spaced rows one apart (forwards or backwards), else None."""
        at = [self.rows.get((id(v[0]), v[1])) for v in values]
        if any(a is None for a in at) or len({a[0] for a in at}) != 1:
            return None
        step = at[1][1] - at[0][1]
        if step not in (1, -1) or any(a[1] != at[0][1] + step * i for i, a in enumerate(at)):
            return None
        return self.arrays[at[0][0]], at[0][1], step
