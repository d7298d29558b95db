"""The one routine that makes nodes again (lazycore.ir.remake): entries
encoded from nodes and interpreted give the nodes' digests, as tracing gave
them; a body copied onto new operands (a captured step's call body inlined
by rolling) makes each of its nodes again, a nested call's body too, and a
copy of a walk keeps the nodes whose operands did not move."""

import numpy as np

import lazycore as lc
from lazycore.dialect.types import TensorType
from lazycore.ir import remake
from lazycore.ir.graph import Value, constant
from lazycore.ir.regions import Arg, Body, RegionNode
from lazycore.ir.walk import Walk

T = TensorType((2, 3), "f32")


def _lazy(node):
    return lc.LazyTensor(Value(node, 0), lc.default_device())


def _body(ops=("add", "mul")):
    """A body over two placeholders: a constant, then each op of ``ops`` on the value before and the second."""
    args = [Arg(0, T), Arg(1, T)]
    x, y = _lazy(args[0]), _lazy(args[1])
    k = _lazy(constant(np.full((2, 3), 2.0, np.float32)))
    for op in ops:
        x = lc.apply(op, lc.apply(op, x, y), k)
    return Body(args, [x.value], {(id(a), 0): i for i, a in enumerate(args)})


def test_entries_interpreted_make_the_nodes_with_the_digests_tracing_gave():
    body = _body()
    at = dict(body.boundary)
    for node in body.order:
        at[(id(node), 0)] = len(at)
    entries = remake.entries(body.order, lambda v: at[(id(v[0]), v[1])])
    assert [e[0] for e in entries] == [n.op for n in body.order]
    env = [Value(a, 0) for a in body.args]
    digests = remake.made(entries, env)
    assert digests == tuple(n.digest for n in body.order)
    made = [v[0] for v in env[2:]]
    assert all(m is not n and m.op == n.op and m.attrs == n.attrs for m, n in zip(made, body.order))
    # hashing only makes no node and gives the same digests
    assert remake.made(entries, [Value(a, 0) for a in body.args], make=False) == digests


def test_a_body_copied_onto_operands_makes_every_node_again_and_inlines_a_nested_call():
    inner = _body(("sub",))
    a, b = lc.from_numpy(np.ones((2, 3), np.float32)), lc.from_numpy(np.full((2, 3), 3.0, np.float32))
    args = [Arg(0, T), Arg(1, T)]
    call = RegionNode("call", ((Value(args[0], 0), Value(args[1], 0)),), (inner,), (T,))
    outer = Body(args, [Value(call, 0)], {(id(x), 0): i for i, x in enumerate(args)})
    first = remake.body_on(outer, (a.value, b.value))
    second = remake.body_on(outer, (a.value, b.value))
    walk = Walk(first)
    assert [n.op for n in walk.order if not n.is_leaf] == [n.op for n in inner.order]  # the call inlined
    assert walk.params == [a.value.node, b.value.node]
    assert not {id(n) for n in walk.order if not n.is_leaf} & {id(n) for n in Walk(second).order if not n.is_leaf}
    assert not {id(n) for n in walk.order} & {id(n) for n in inner.order}  # each copy its own nodes
    # (1 - 3) - 2
    np.testing.assert_array_equal(lc.to_numpy(lc.LazyTensor(first[0], lc.default_device())),
                                  np.full((2, 3), -4.0, np.float32))


def test_a_walk_copied_keeps_the_nodes_whose_operands_did_not_move():
    a, b = lc.from_numpy(np.ones((2, 3), np.float32)), lc.from_numpy(np.full((2, 3), 2.0, np.float32))
    # nodes made again hold their operands as a tuple, as map_operands gives them
    # (a traced node's may be a list: compared unequal, it is copied)
    s = _lazy(remake.again(lc.apply("add", a, a).value.node, (a.value, a.value)))
    t = _lazy(remake.again(lc.apply("mul", s, b).value.node, (s.value, b.value)))
    walk = Walk([t.value])
    c = lc.from_numpy(np.full((2, 3), 5.0, np.float32))
    new = {(id(b.value.node), 0): c.value}
    remake.onto(walk.order, lambda v: new.get((id(v[0]), v[1]), v), new)
    assert (id(s.value.node), 0) not in new  # its operands did not move: kept
    moved = new[(id(t.value.node), 0)]
    assert moved[0] is not t.value.node and moved[0].operands == (s.value, c.value)
    np.testing.assert_array_equal(lc.to_numpy(lc.LazyTensor(moved, lc.default_device())),
                                  np.full((2, 3), 10.0, np.float32))
