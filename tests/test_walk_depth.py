"""The walk's two visits (lazycore.ir.walk): recursion while the
interpreter's stack allows, an explicit stack beyond; both give one
post-order and one encoding, at any depth, and a shared node is placed once."""

import numpy as np

import lazycore as lc
from lazycore.ir import walk
from lazycore.ir.walk import Walk, encode


def chain(n):
    x = lc.from_numpy(np.ones((2,), np.float32))
    y = x
    for _ in range(n):
        y = lc.apply("add", y, x)
    return x, y


def test_the_explicit_stack_gives_the_recursions_order_and_encoding(monkeypatch):
    a = lc.from_numpy(np.ones((2, 3), np.float32))
    b = lc.from_numpy(np.full((2, 3), 2.0, np.float32))
    s = lc.apply("add", a, b)
    m = lc.apply("mul", s, a)
    c = lc.apply("optimization_barrier", [m, s, m])  # a variadic group, several results
    top = lc.apply("add", c[1], c[0])  # (the group is met below the top: by the explicit stack too)
    outs = [top.value, m.value, c[0].value, s.value]
    recursed = encode(outs)
    monkeypatch.setattr(walk, "DEPTH", 0)
    stacked = encode(outs)
    assert stacked == recursed
    assert [n.op for n in recursed[0]] == ["data", "data", "add", "mul", "optimization_barrier", "add"]
    assert recursed[1] == [a.value.node, b.value.node]


def test_a_chain_deeper_than_the_interpreters_limit_walks():
    x, y = chain(3000)  # deeper than sys.getrecursionlimit() (1000)
    w = Walk([y.value])
    assert len(w.order) == 3001 and w.params == [x.value.node]
    assert w.order[-1] is y.value.node and w.order[0] is x.value.node


def test_equal_graphs_encode_equal_and_sharing_is_encoded():
    a, b = lc.from_numpy(np.ones((2,), np.float32)), lc.from_numpy(np.ones((2,), np.float32))
    once = lc.apply("add", a, a)
    twice = lc.apply("add", a, b)  # same digests, other wiring
    again = lc.apply("add", b, b)
    assert Walk([once.value]).encoding == Walk([again.value]).encoding
    assert Walk([once.value]).encoding != Walk([twice.value]).encoding
