"""Errors eager raises from types, shapes and flags are raised at the call on the
lazy device, with eager's type and message, and a call that raises changes no
tensor (issue 41, item 5).

Each case runs on eager CPU tensors first (eager decides the exception) and
then on the same tensors on the lazy device.
"""

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.observe import metrics


@pytest.fixture
def dev(dev):
    lazycore.mark_step(wait=True)
    metrics.reset()
    return dev


def eager_error(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


def raises_as_eager(dev, fn, *args):
    """fn(*args) raises on the lazy device what it raises on the CPU, at the call
    (no barrier runs); returns the lazy arguments."""
    expected = eager_error(fn, *args)
    lazy = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in args]
    lazycore.mark_step(wait=True)
    before = metrics.counters().get("executions", 0)
    with pytest.raises(type(expected)) as info:
        fn(*lazy)
    assert type(info.value) is type(expected)
    assert str(info.value) == str(expected)
    assert metrics.counters().get("executions", 0) == before  # raised at the call, not at a barrier
    return lazy


x3 = torch.arange(3.0)
findex = torch.tensor([0.0, 1.0])

CASES = {
    "index_select": lambda x, i: torch.index_select(x, 0, i),
    "index": lambda x, i: x[i],
    "gather": lambda x, i: torch.gather(x, 0, i),
    "scatter": lambda x, i: x.scatter(0, i, 1.0),
    "scatter_add": lambda x, i: x.scatter_add(0, i, x[:2]),
    "index_add": lambda x, i: x.index_add(0, i, x[:2]),
    "index_copy": lambda x, i: x.index_copy(0, i, x[:2]),
    "index_fill": lambda x, i: x.index_fill(0, i, 1.0),
    "take": lambda x, i: torch.take(x, i),
    "put": lambda x, i: x.put(i, x[:2]),
    "embedding": lambda x, i: F.embedding(i, x.reshape(3, 1)),
    "nll_loss": lambda x, i: F.nll_loss(x.reshape(1, 3).expand(2, 3), i),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_indices_raise_eagers_error_at_the_call(dev, name):
    raises_as_eager(dev, CASES[name], x3, findex)


def test_index_put_with_float_indices_raises_and_writes_nothing(dev):
    def put(x, i, v):
        x.index_put_((i,), v)

    x, _, _ = raises_as_eager(dev, put, torch.zeros(3), findex, torch.ones(2))
    assert x.tolist() == [0.0, 0.0, 0.0]
    x[findex.long().to(dev)] = torch.ones(2, device=dev)  # the tensor still works
    assert x.tolist() == [1.0, 1.0, 0.0]


def test_setitem_with_float_indices_raises_and_writes_nothing(dev):
    def put(x, i):
        x[i] = 5.0

    x, _ = raises_as_eager(dev, put, torch.zeros(3), findex)
    assert x.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_softmax_of_integers_raises_eagers_error(dev, op, dtype):
    raises_as_eager(dev, lambda x: op(x, 0), torch.tensor([1, 0], dtype=dtype))
    # with a float dtype= it runs, as in eager
    x = torch.tensor([1, 0], dtype=dtype)
    torch.testing.assert_close(op(x.to(dev), 0, dtype=torch.float32).cpu(), op(x, 0, dtype=torch.float32))


def test_one_hot_of_int32_raises_eagers_error(dev):
    raises_as_eager(dev, lambda i: F.one_hot(i, 3), torch.tensor([0, 1], dtype=torch.int32))


def test_int32_indices_stay_valid(dev):
    i = torch.tensor([2, 0], dtype=torch.int32)
    for name in ("index_select", "index", "gather", "embedding"):
        want = CASES[name](x3, i)
        got = CASES[name](x3.to(dev), i.to(dev))
        torch.testing.assert_close(got.cpu(), want)
