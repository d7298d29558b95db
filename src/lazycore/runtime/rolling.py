"""Loops kept as loops at a barrier: the chains of identical layers in a
walk (:mod:`lazycore.passes.rolled_chains` finds them, on lazy graph nodes
here).

The compiler emits the chains; before a program is looked up, the barrier
asks which parameters it takes stacked (:func:`stack_groups`), without
loading MLIR, so a program loaded from disk still needs no compiler;
``settings.roll_loops`` (on by default, ``LAZYCORE_ROLL_LOOPS=0`` turns it
off) is part of the compile key. Nothing here touches MLIR.
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import Node, Scalar, Value
from lazycore.passes.rolled_chains import MIN_COPIES, Chain, Stacks, find_chains as _find_chains  # noqa: F401
from lazycore.runtime import pjrt


def find_chains(order: list[Node], outputs: list[Value]) -> list[Chain]:
    """The chains to emit as loops in a walk, in walk order."""
    return _find_chains(order, outputs, scalar_leaf=lambda node: type(node) is Scalar)


def find_chain(order: list[Node], outputs: list[Value]) -> Chain | None:
    """The largest chain in a walk, or None."""
    chains = find_chains(order, outputs)
    return max(chains, key=lambda c: len(c.copies) * len(c.copies[0])) if chains else None


def rolls_on(device) -> bool:
    """Whether programs of ``device`` roll layers: with ``roll_loops`` on,
    but for a mesh's."""
    return settings.roll_loops and not (device is not None and isinstance(device.pjrt, pjrt.MeshTarget))


def chains(walk, device, constants) -> list:
    """The runs of identical layers a program of the walk emits as loops
    (none with rolling off, with folded constants, or on a mesh); found once
    per walk."""
    if constants or not rolls_on(device):
        return []
    found = walk.__dict__.get("chains")
    if found is None:
        found = walk.chains = find_chains(walk.order, list(walk.outputs))
    return found


def groups(walk, chains) -> list[tuple]:
    """The runs of device-data parameters the chains read stacked (indices
    in ``walk.data``; each run once, in the order its first reader stacks
    it): entry arguments of their own in a stacked program."""
    index = {id(leaf): i for i, leaf in enumerate(walk.data)}
    known = Stacks()
    found = []
    for chain in sorted(chains, key=lambda c: c.last_position):  # as the compiler emits them
        for values in chain.stacked:
            if any(id(v[0]) not in index for v in values) or known.find(values) is not None:
                continue
            known.add(len(found), values)
            found.append(tuple(index[id(v[0])] for v in values))
    return found


def stack_groups(walk, device=None) -> list[tuple]:
    """The device-data parameters a stacked program of the walk takes as
    stacks, per stack (:func:`lazycore.runtime.compiler.build_program`)."""
    return groups(walk, chains(walk, device, None))
