"""``lazy-roll-loops``: runs of identical layers in a function become loops.

The rewrite the compiler does on a barrier's walk when ``roll_loops`` is on
(:mod:`lazycore.runtime.rolling`), on a ``lazy`` module instead: the ops of
each function's body are matched as :mod:`lazycore.passes.rolled_chains`
matches graph nodes (an op by its name, attributes and types; block
arguments are the leaves), and each chain found becomes one
``stablehlo.while`` (:mod:`lazycore.passes.rolled_emit`) placed after the
chain's last op. The uses of what the copies made move to the loop's
results, and the copies are erased. The compiler runs the matcher on the
walk rather than this pass on the module because the walk knows which leaves
are runtime scalars the layers share, and matching before the module is
built saves building N copies; both emit the same loop.
"""

from __future__ import annotations

from lazycore.dialect import from_mlir_type
from lazycore.dialect.mlir import ir

from .catalog import PassError, register_pass
from .rolled_chains import find_chains
from .rolled_emit import Stacks, emit_chain


class _Op:
    """One op (or block argument) as the matcher sees a node."""

    __slots__ = ("op", "attrs", "types", "operands", "is_leaf", "operation")

    def __init__(self, op, attrs, types, operands, is_leaf, operation=None):
        self.op, self.attrs, self.types, self.operands = op, attrs, types, operands
        self.is_leaf, self.operation = is_leaf, operation


def _roll_block(block: ir.Block) -> int:
    ops = list(block.operations)
    if not ops:
        return 0
    *body, ret = ops
    nodes: list[_Op] = []
    at: dict = {}  # ir.Value -> (node, result index)
    for arg in block.arguments:
        leaf = _Op("arg", {}, (from_mlir_type(arg.type),), (), True)
        nodes.append(leaf)
        at[arg] = (leaf, 0)
    for op in body:
        op = op.operation
        name = op.name
        # only lazy ops are matched: another op (a loop already there) is never
        # a copy of anything, so it gets attributes no other op has
        attrs = {a: str(op.attributes[a]) for a in op.attributes} if name.startswith("lazy.") else {"op": id(op)}
        operands = tuple(at[v] for v in op.operands)
        if len(op.regions):
            # what its regions read from this block is read by the op itself
            operands += tuple(at[v] for v in _captured(op) if v in at)
        node = _Op(name, attrs, tuple(from_mlir_type(r.type) for r in op.results), operands, False, op)
        nodes.append(node)
        for r, v in enumerate(op.results):
            at[v] = (node, r)
    chains = find_chains(nodes, [at[v] for v in ret.operands])
    if not chains:
        return 0
    env = {id(n): [arg] for n, arg in zip(nodes, block.arguments)}
    for n in nodes[len(block.arguments):]:
        env[id(n)] = list(n.operation.results)
    stacks = Stacks()

    def emit(node, operands):
        o = node.operation
        return list(ir.Operation.create(o.name, results=[r.type for r in o.results], operands=operands,
                                        attributes={a: o.attributes[a] for a in o.attributes}).results)

    for chain in chains:
        members = [n for copy in chain.copies for n in copy]
        last = chain.copies[-1][-1].operation
        old = {id(n): list(n.operation.results) for n in members}
        bound = {id(n): [None] * len(n.types) for n in members}
        with ir.InsertionPoint(_next(block, last)), last.location:
            scope = dict(env)
            scope.update(bound)
            emit_chain(chain, scope, stacks, emit)
        for n in members:
            for r, new in enumerate(scope[id(n)]):
                if new is not None:
                    old[id(n)][r].replace_all_uses_with(new)
                    env[id(n)][r] = new
        for n in reversed(members):
            if any(len(list(r.uses)) for r in n.operation.results):
                raise PassError(f"lazy-roll-loops: a value of {n.op} is still read after its run became a loop",
                                n.operation.location)
            n.operation.erase()
    return len(chains)


def _captured(op: ir.Operation):
    """The operands of the ops nested in ``op``'s regions."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from inner.operation.operands
                yield from _captured(inner.operation)


def _next(block: ir.Block, op: ir.Operation) -> ir.Operation:
    found = False
    for o in block.operations:
        if found:
            return o.operation
        found = o.operation == op
    raise AssertionError("an op is followed at least by its block's terminator")


@register_pass("lazy-roll-loops", "Rolls runs of identical layers into stablehlo.while loops over stacked inputs")
def _factory():
    def run(module_op):
        for op in module_op.regions[0].blocks[0].operations:
            if op.operation.name == "func.func" and len(op.operation.regions[0].blocks):
                _roll_block(op.operation.regions[0].blocks[0])

    return run
