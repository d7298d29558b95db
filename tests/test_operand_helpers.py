"""ir.graph's two readings of a node's operands, the one way every layer walks
variadic groups: operand_values flattens them in place, map_operands maps each
value and keeps each group where it is (as a tuple, or as ``group`` makes it)."""

import numpy as np

from lazycore.dialect.spec import spec_of
from lazycore.ir.graph import Value, constant, make_node, map_operands, operand_values


def _dynamic_slice():
    x = constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    i, j = constant(np.array(1, np.int32)), constant(np.array(2, np.int32))
    spec = spec_of("dynamic_slice")
    operands = (Value(x, 0), (Value(i, 0), Value(j, 0)))
    types = spec.infer(operands[0].type, [v.type for v in operands[1]], sizes=(2, 2))
    return make_node(spec, operands, {"sizes": (2, 2)}, types), x, i, j


def test_operand_values_flattens_a_group_in_its_place():
    node, x, i, j = _dynamic_slice()
    assert [v.node for v in operand_values(node)] == [x, i, j]
    add = make_node(spec_of("add"), (Value(x, 0), Value(x, 0)), {}, (Value(x, 0).type,))
    assert operand_values(add) is add.operands  # no group: the node's own tuple


def test_map_operands_keeps_each_group_in_its_place():
    node, x, i, j = _dynamic_slice()
    name = {id(x): "x", id(i): "i", id(j): "j"}
    got = map_operands(node.operands, lambda v: name[id(v.node)])
    assert got == ("x", ("i", "j")) and type(got) is tuple
    got = map_operands(node.operands, lambda v: name[id(v.node)], list)
    assert got == ("x", ["i", "j"])
    assert map_operands(node.operands, lambda v: v) == node.operands  # the identity keeps the operands
