"""Python ints passed to an op (``arange(n) + offset``) that become program
parameters keep a program's structure whatever their values (issue 40 item
3, sliding-window generation).

An int is part of a recorded lowering's call signature, so each value has a
recording of its own, replayed for later calls of that value:

* Its parameter was the recording's, shared by every replay: two calls of
  one signature in a step, ``x + k`` and ``x + 3``, held one parameter when
  ``k`` was 3 by chance, a program with one parameter fewer, compiled once
  more (transformers' mask ``arange(4) + kv_offset`` and the cache's
  ``roll(-1)``, whose ``arange(4) + 1`` met it at ``kv_offset = 1``). Now
  each user's instruction has its own (one per replay made a chain of 200
  ``y + 5`` a program of 200 parameters).
* Recordings share scalar parameters of one value across signatures
  (:func:`lazycore.trace.recipes.shared`, issue 39): ``y + k`` on another
  shape met the window's 4 at ``kv_offset = 4``. Ints are no longer shared:
  a call's int is served by its signature's recording alone, so which
  recording a call finds never changes.
* A new value records again, and the scalar policy saw it at a step-log
  position only: a graph after another (the filling token's, then the full
  cache's) puts it after other ops, so it was baked at its first value there
  and promoted, with a compile, a step later. The int argument has a place
  of its own now (the lowering, the op it lowers, its position, the user's
  instruction), where the value of an earlier graph promotes it at once.
  Only where the user's code made the call: a backward pass's ops all come
  from the user's ``backward()``, whose ints (embedding's backward compares
  its indices with 0, -1 and the tables' sizes) promoted each other there,
  the 0 baked in the first step a parameter in the next
  (tests/torch/test_shape_buckets.py's token model); one lowering serves
  several ops (``_compare``: ``x >= 1`` and ``x < 4``), told apart by the op.

Each loop runs eagerly on the CPU too: the lazy answers are eager's.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

pytestmark = pytest.mark.usefixtures("clean_runtime", "device_values")


def _compiles():
    c = lazycore.metrics.counters()
    return c.get("compiles", 0) + c.get("stack_compiles", 0)


def _run(step, values, device):
    """``step(k)`` for each ``k``, its result read (a barrier): the compiles per
    step and the results."""
    counts, results = [], []
    for k in values:
        c0 = _compiles()
        results.append(step(k).cpu())
        counts.append(_compiles() - c0)
    return counts, results


def _offsets(device):
    x = torch.arange(4).to(device)
    y = torch.arange(6).to(device)

    def step(k):
        moving = x + k  # (a signature per value of k)
        fixed = x + 3  # the same signature as ``moving`` at k == 3
        other = y + 4  # another signature holding 4
        return torch.cat([moving * fixed, other])

    return step


def test_an_int_equal_to_another_by_chance_compiles_nothing(dev):
    """``k`` takes 3 and 4, the values of two other ints of its step: the
    program of 5 serves them (before: [1, 0, 1, 1, 0])."""
    values = [5, 6, 3, 4, 7]
    counts, got = _run(_offsets(dev), values, dev)
    _, want = _run(_offsets(torch.device("cpu")), values, None)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert counts == [1, 0, 0, 0, 0], counts


def _two_graphs(device):
    x = torch.arange(4).to(device)
    w = torch.ones(4, dtype=torch.long).to(device)

    def step(k):
        if k == 0:
            w.mul_(2)  # another graph: the int below lands after other ops
        return x + k

    return step


def test_an_int_of_another_graph_promotes_at_once(dev):
    """``x + k`` over k = 0, 1, 2, 3, the first step's graph holding more
    work: 1 is a parameter at once, as the 0 before it at that instruction
    says it varies (before: [1, 1, 1, 0])."""
    values = [0, 1, 2, 3]
    counts, got = _run(_two_graphs(dev), values, dev)
    _, want = _run(_two_graphs(torch.device("cpu")), values, None)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert counts == [1, 1, 0, 0], counts


def _parameters_behind(t) -> int:
    """The Python-number parameters (``Scalar`` leaves) ``t``'s pending value is made from."""
    from lazycore.frontends.torch.tensor import read
    from lazycore.ir.graph import Node, Scalar, operand_values

    todo, seen, found = [read(t).value.node], set(), 0
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        found += type(n) is Scalar
        if type(n) is Node:
            todo.extend(v[0] for v in operand_values(n))
    return found


def test_a_repeated_int_stays_baked(dev):
    """An int that never changes at its instruction stays a constant (a fold)
    beside another instruction's varying int of the same signature."""
    x = torch.arange(4).to(dev)
    found = []
    for k in (2, 5, 7):
        a = x + 1
        b = x + k
        found.append((_parameters_behind(a), _parameters_behind(b)))
        assert torch.equal(a.cpu(), torch.arange(4) + 1)
        assert torch.equal(b.cpu(), torch.arange(4) + k)
    assert found == [(0, 1)] * 3, found


def test_a_chain_at_one_instruction_holds_one_parameter(dev):
    """``y = y + 5`` 200 times at one instruction: one parameter, as one
    recording's replays have always shared (a guard: 200 when each replay
    made its own)."""
    y = torch.arange(4).to(dev)
    for _ in range(200):
        y = y + 5
    assert _parameters_behind(y) == 1
    assert torch.equal(y.cpu(), torch.arange(4) + 1000)


def _counted(dev, lengths, step):
    """``step(x)`` over lazy ``arange(n)`` marked dynamic (one shape bucket:
    each length records its lowerings again, one program serves them all),
    checked against eager: the compiles per step."""
    counts = []
    for n in lengths:
        x = torch.arange(n)
        c0 = _compiles()
        got = step(ltorch.dynamic(x.to(dev), 0)).cpu()
        counts.append(_compiles() - c0)
        assert torch.equal(got, step(x))
    return counts


def _conditions(x):
    m = torch.ones_like(x, dtype=torch.bool)
    for op, bound in ((torch.ge, 1), (torch.lt, 4)):
        m = m & op(x, bound)  # (two ops of one lowering at one instruction)
    return m.long() * x


def test_two_ops_of_one_lowering_at_one_instruction_keep_apart(dev):
    """``x >= 1`` and ``x < 4`` made by one instruction are one lowering
    (``_compare``) with one int position: at one place their 1 and 4 promoted
    each other in the first step, and the 1 baked there was a parameter at
    the next length's recording (before: [1, 1, 0]). The op lowered tells
    them apart."""
    counts = _counted(dev, (5, 6, 7), _conditions)
    assert counts == [1, 0, 0], counts
