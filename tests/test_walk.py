"""One structural encoding of an ordered piece of graph (lazycore.ir.walk):
a barrier's walk and a loop or branch body encode with the same algorithm,
a body's outer values by operand position."""

import numpy as np

import lazycore as lc
from lazycore.dialect.types import TensorType
from lazycore.ir.graph import Value
from lazycore.ir.regions import Arg, Body
from lazycore.ir.walk import Walk, encode


def data(value=1.0):
    return lc.from_numpy(np.full((2, 3), value, np.float32))


def test_a_body_without_outer_values_encodes_as_the_barrier_walks():
    a, b = data(), data(2.0)
    s = lc.apply("add", a, b)
    out = lc.apply("mul", s, s)
    walk = Walk([out.value])
    body = Body([], [out.value], {})
    assert body.encoding == walk.encoding
    assert body.order == walk.order
    assert [n.op for n in walk.order] == ["data", "data", "add", "mul"]  # post-order, a shared node once
    assert walk.params == walk.data == [a.value.node, b.value.node]


def test_a_bodys_outer_values_are_referred_to_by_position_not_walked():
    t = TensorType((2, 3), "f32")
    x, y = Arg(0, t), Arg(1, t)
    def body_of(first, second, boundary):
        inner = lc.apply("add", lc.LazyTensor(Value(first, 0), lc.default_device()),
                         lc.LazyTensor(Value(second, 0), lc.default_device()))
        return Body([x, y], [inner.value], boundary)

    same = body_of(x, y, {(id(x), 0): 0, (id(y), 0): 1})
    assert [n.op for n in same.order] == ["add"]  # the placeholders are no inner nodes
    outer = data()  # an outer value the body reads: an operand of the region node, not walked
    again = body_of(outer.value.node, y, {(id(outer.value.node), 0): 0, (id(y), 0): 1})
    assert [n.op for n in again.order] == ["add"]
    assert again.encoding[8 + 16:] == same.encoding[8 + 16:]  # the same edges: by position
    swapped = body_of(x, y, {(id(x), 0): 1, (id(y), 0): 0})
    assert swapped.encoding != same.encoding
    order, leaves, encoding = encode(same.results, same.boundary)
    assert (order, leaves, encoding) == (same.order, [], same.encoding)


def test_equal_ops_on_one_scalar_encode_as_one_node_shared():
    # which steps share a broadcast of a constant depends on how they were
    # traced (a recording's replays share its own; a replay of another step's
    # recording brings that one's): the encoding, the compile key, must not
    # (nn.MultiheadAttention over shape buckets compiled twice per bucket)
    x = data()
    zero = lc.scalar(0.0)
    def select(a, fill):
        return lc.apply("select", lc.apply("compare", a, a, direction="NE"), a, fill)

    one = lc.apply("broadcast_in_dim", zero, shape=(2, 3), dims=())
    shared = Walk([select(x, one).value, select(lc.apply("add", x, x), one).value])
    apart = Walk([select(x, lc.apply("broadcast_in_dim", zero, shape=(2, 3), dims=())).value,
                  select(lc.apply("add", x, x), lc.apply("broadcast_in_dim", zero, shape=(2, 3), dims=())).value])
    assert shared.encoding == apart.encoding and shared.params == apart.params
    assert [n.op for n in apart.order].count("broadcast_in_dim") == 2  # both still built (cse merges them)
    assert [n.op for n in shared.order].count("broadcast_in_dim") == 1
    # two scalar parameters of one type: their broadcasts differ, as the parameters may
    other = lc.scalar(0.0, fold=False)
    two = Walk([select(x, lc.apply("broadcast_in_dim", lc.scalar(0.0, fold=False), shape=(2, 3), dims=())).value,
                select(lc.apply("add", x, x), lc.apply("broadcast_in_dim", other, shape=(2, 3), dims=())).value])
    assert two.encoding != shared.encoding and len(two.params) == len(shared.params) + 2
    # an op on device data is the program's to merge (cse), not the encoding's
    y = data(3.0)
    dup = Walk([lc.apply("neg", y).value, lc.apply("neg", y).value])
    once = lc.apply("neg", y)
    assert dup.encoding != Walk([once.value, once.value]).encoding


def test_equal_ops_on_one_scalar_encode_as_shared_past_the_recursion_depth():
    # (past walk.DEPTH nested operands the walk keeps its own stack)
    from lazycore.ir import walk as walk_module

    x, zero = data(), lc.scalar(0.5, fold=False)
    def chain(shared):
        y, b = x, lc.apply("broadcast_in_dim", zero, shape=(2, 3), dims=())
        for _ in range(walk_module.DEPTH + 100):
            y = lc.apply("add", y, b if shared else lc.apply("broadcast_in_dim", zero, shape=(2, 3), dims=()))
        return Walk([y.value])

    shared, apart = chain(True), chain(False)
    assert shared.encoding == apart.encoding and shared.params == apart.params
    n = walk_module.DEPTH + 100
    assert len(shared.order) == 3 + n and len(apart.order) == 2 + 2 * n  # (every broadcast still in the order)


def test_equal_constants_encode_as_one_node_shared():
    # a recording's replays share its constants, a traced call makes its own:
    # the encoding, the compile key, must not tell them apart
    from lazycore.ir.graph import constant

    x = data()
    def const(value, dtype=np.float32):
        return lc.LazyTensor(Value(constant(np.asarray(value, dtype)), 0), lc.default_device())

    def fill(a, c):
        return lc.apply("select", lc.apply("compare", a, a, direction="NE"), a,
                        lc.apply("broadcast_in_dim", c, shape=(2, 3), dims=()))

    zero = const(0.0)
    shared = Walk([fill(x, zero).value, fill(lc.apply("add", x, x), zero).value])
    apart = Walk([fill(x, const(0.0)).value, fill(lc.apply("add", x, x), const(0.0)).value])
    assert shared.encoding == apart.encoding and shared.params == apart.params
    assert [n.op for n in apart.order].count("constant") == 2  # both still built (cse merges them)
    # a constant's value, sign of zero and type tell it apart
    for other in (const(1.0), const(-0.0), lc.apply("convert", const(0.0, np.float16), dtype="f32")):
        differs = Walk([fill(x, const(0.0)).value, fill(lc.apply("add", x, x), other).value])
        assert differs.encoding != shared.encoding
    # and a shared constant is one whether its users are found by recursion or by the walk's own stack
    from lazycore.ir import walk as walk_module

    def chain(shared):
        y, c = x, const(0.5)
        for _ in range(walk_module.DEPTH + 100):
            y = lc.apply("add", y, lc.apply("broadcast_in_dim", c if shared else const(0.5), shape=(2, 3), dims=()))
        return Walk([y.value])

    assert chain(True).encoding == chain(False).encoding
