"""The step log's key (lazycore.ir.graph.StepLog): written as nodes are made,
so the barrier makes no pass over the step's nodes, and equal keys still mean
isomorphic steps (docs/dev/replay.md, "The step log's key")."""

import pytest

from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import TensorType
from lazycore.ir.graph import LOG, Scalar, Value, make_node

F32 = TensorType((), "float32")


@pytest.fixture
def log():
    LOG.reset()
    yield LOG
    LOG.reset()


def add(a: Value, b: Value) -> Value:
    return Value(make_node(spec_of("add"), (a, b), {}, (F32,)), 0)


def outside(value: float) -> Value:
    """A leaf made while nothing is logged: old to the step that uses it."""
    on, LOG.on = LOG.on, False
    try:
        return Value(Scalar(value, "float32"), 0)
    finally:
        LOG.on = on


class _Unread:
    """Operands that must not be read again."""

    def __iter__(self):
        raise AssertionError("the barrier read a made node's operands again")


def test_the_barrier_reads_no_made_node_again(log):
    a, b = outside(1.0), outside(2.0)
    x = add(a, b)
    y = add(x, a)
    z = add(y, Value(Scalar(3.0, "float32"), 0))
    for node in list(log.nodes):  # the step's own nodes: their operands were written when made
        node.operands = _Unread()
    key = log.encode([z, x])
    assert key == log.encode([z, x])  # asked again: the same key
    # the old leaves joined the log after the step's own nodes, as plans index it
    for v in (a, b):
        assert log.nodes[v[0].seq - log.start] is v[0]
    assert log.nodes.index(a[0]) == 4 and log.nodes.index(b[0]) == 5  # a first used first


def _key(wiring) -> tuple:
    LOG.reset()
    a, b = outside(1.0), outside(2.0)
    x = add(a, b)
    return LOG.encode([add(x, a if wiring == "a" else b)])


def test_equal_steps_have_equal_keys_and_wiring_tells_them_apart(log):
    assert _key("a") == _key("a")
    assert _key("a") != _key("b")


def _shared_key(share: bool) -> tuple:
    """``k`` made in the step and used; then a scalar made and, where
    ``share``, replaced by ``k`` (trace/recipes.py's shared scalars) and used."""
    LOG.reset()
    a = outside(1.0)
    k = Value(Scalar(0.5, "float32"), 0)
    x = add(a, k)
    fresh = Scalar(0.5 if share else 0.25, "float32")
    if share:
        LOG.put_instead(fresh, k[0])
        fresh = k[0]
    return LOG.encode([add(x, Value(fresh, 0))]), k[0], fresh


def test_a_shared_node_keeps_its_number(log):
    """Two references to one node and to two nodes of one digest (a shared
    scalar parameter against a new one, one value apart) must not key alike:
    a plan recalled for the second would give the new scalar the first's
    value. The node replaced keeps the number the references made so far
    hold (renumbering it, as the log did when it encoded at the barrier,
    would key both steps alike once references are written as made)."""
    shared, k, _ = _shared_key(True)
    assert log.nodes[k.seq - log.start] is k
    apart, k2, fresh = _shared_key(False)
    assert fresh is not k2
    assert shared[1] == apart[1]  # the same digests in the same places
    assert shared != apart


def test_old_nodes_are_logged_once(log):
    a = outside(1.0)
    x = add(a, a)
    y = add(x, a)
    key = log.encode([y])
    assert [n for n in log.nodes if n is a[0]] == [a[0]]
    outs, digests, edges = key
    assert len(digests) == 3
    assert outs[0] == ((2, len(edges)),)  # two nodes of its own, then the old ones moved in


def test_a_made_node_writes_its_operands_then_end(log):
    """The numbers each made node writes, by the one- and two-operand nodes'
    unrolled path and by the general loop alike: per operand its log position
    (``-1 - k`` for the ``k``-th old node) and result index, a variadic group
    as ``GROUP - size`` and its members, then ``END``."""
    from lazycore.ir.graph import END, GROUP, Node

    def node(name, operands, n_results=1):
        return Node(name, operands, {}, (F32,) * n_results, name.encode())

    a = outside(1.0)
    x = Value(node("neg", (a,)), 0)  # 0
    y = add(x, a)  # 1
    s = node("split", (y,), 2)  # 2, two results
    z = Value(node("select", (x, Value(s, 1), Value(s, 0))), 0)  # 3
    node("concatenate", ((x, z, x),))  # 4
    node("iota", ())  # 5
    add(Value(s, 1), outside(2.0))  # 6
    add(a, a)  # 7
    assert log.edges == [
        -1, 0, END,
        0, 0, -1, 0, END,
        1, 0, END,
        0, 0, 2, 1, 2, 0, END,
        GROUP - 3, 0, 0, 3, 0, 0, 0, END,
        END,
        2, 1, -2, 0, END,
        -1, 0, -1, 0, END,
    ]
    assert [n.seq - log.start for n in log.nodes] == list(range(8))
