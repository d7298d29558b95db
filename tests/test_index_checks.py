"""Indices held on the device are checked like divisors (issue 41, item 2).

Every op that indexes with values on the device records a value check
(lazycore.runtime.checks) over the range eager allows: an out-of-range index
fails what the op computed at the barrier, with eager's exception type, a
message naming the op, and the user's line; in-range programs give eager's
values; ``settings.index_checks`` off clamps reads and drops writes as before;
a failure leaves later work alone. Eager torch and NumPy decide each case.
"""

from __future__ import annotations

import numpy
import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import metrics
from lazycore.runtime.failures import BarrierError
from markers import markers

HERE, line_of, at = markers(__file__)
DEV = ltorch.device()


@pytest.fixture(autouse=True)
def fresh():
    lazycore.mark_step(wait=True)
    metrics.reset()
    yield
    lazycore.mark_step(wait=True)


def T(values, dev, dtype=None):
    return torch.tensor(values, device=dev, dtype=dtype)


def _inplace(fn):
    def run(x, *rest):
        fn(x, *rest)
        return x
    return run


# name -> (fn(dev, index) with its op's line marked "# <name>", bad index, good index,
#          the result with checks off, a text of the message)
x3 = lambda d: torch.arange(3.0, device=d)  # noqa: E731
x23 = lambda d: torch.arange(6.0, device=d).reshape(2, 3)  # noqa: E731
TORCH = {
    "index": (lambda d, i: x3(d)[T(i, d)], [0, 5], [0, -1], [0.0, 2.0],  # index
              "index 5 is out of bounds for dimension 0 with size 3"),
    "index_negative": (lambda d, i: x3(d)[T(i, d)], [-4], [-3], [0.0],  # index_negative
                       "index -4 is out of bounds for dimension 0 with size 3"),
    "index_2d": (lambda d, i: x23(d)[T([1], d), T(i, d)], [3], [2], [5.0],  # index_2d
                 "index 3 is out of bounds for dimension 1 with size 3"),
    "setitem": (lambda d, i: _inplace(lambda x, j: x.__setitem__(j, 7.0))(x3(d), T(i, d)), [3], [-1],  # setitem
                [0.0, 1.0, 2.0], "index 3 is out of bounds for dimension 0 with size 3"),
    "index_put_": (lambda d, i: x3(d).index_put_((T(i, d),), T([9.0], d), accumulate=True), [-4], [1],  # index_put_
                   [0.0, 1.0, 2.0], "index -4 is out of bounds for dimension 0 with size 3"),
    "gather": (lambda d, i: torch.gather(x23(d), 1, T(i, d)), [[0], [3]], [[2], [0]], [[0.0], [5.0]],  # gather
               "gather(): index 3 is out of bounds for dimension 1 with size 3"),
    "gather_negative": (lambda d, i: torch.gather(x3(d), 0, T(i, d)), [-1], [2], [2.0],  # gather_negative
                        "gather(): index -1 is out of bounds for dimension 0 with size 3"),
    "take_along_dim": (lambda d, i: torch.take_along_dim(x23(d), T(i, d)), [6], [5], [5.0],  # take_along_dim
                       "gather(): index 6 is out of bounds for dimension 0 with size 6"),
    "index_select": (lambda d, i: torch.index_select(x3(d), 0, T(i, d)), [1, 3], [2, 0], [1.0, 2.0],  # index_select
                     "index_select(): index out of range in self"),
    "index_select_dim1": (lambda d, i: torch.index_select(x23(d), 1, T(i, d)), [-1], [1], [[2.0], [5.0]],  # index_select_dim1
                          "index_select(): INDICES element is out of DATA bounds, axis_dim=3"),
    "embedding": (lambda d, i: F.embedding(T(i, d), x23(d).t()), [[0, 3]], [[2, 0]],  # embedding
                  [[[0.0, 3.0], [2.0, 5.0]]], "embedding(): index out of range in self"),
    "scatter": (lambda d, i: x3(d).scatter(0, T(i, d), 9.0), [3], [1], [0.0, 1.0, 2.0],  # scatter
                "scatter(): index 3 is out of bounds for dimension 0 with size 3"),
    "scatter_add": (lambda d, i: x3(d).scatter_add(0, T(i, d), T([9.0], d)), [-1], [1],  # scatter_add
                    [0.0, 1.0, 11.0], "scatter_add(): index -1 is out of bounds for dimension 0 with size 3"),
    "scatter_reduce": (lambda d, i: x3(d).scatter_reduce(0, T(i, d), T([9.0], d), "amax"), [3], [0],  # scatter_reduce
                       [0.0, 1.0, 2.0], "scatter_reduce(): index 3 is out of bounds for dimension 0 with size 3"),
    "index_add": (lambda d, i: x3(d).index_add(0, T(i, d), T([9.0], d)), [-1], [1], [0.0, 1.0, 11.0],  # index_add
                  "index_add(): index out of range in self"),
    "index_copy": (lambda d, i: x3(d).index_copy(0, T(i, d), T([9.0], d)), [3], [1], [0.0, 1.0, 2.0],  # index_copy
                   "index_copy_(): index 3 is out of bounds for dimension 0 with size 3"),
    "index_fill": (lambda d, i: x3(d).index_fill(0, T(i, d), 9.0), [-4], [-1], [0.0, 1.0, 2.0],  # index_fill
                   "index_fill(): index -4 is out of bounds for dimension 0 with size 3"),
    "take": (lambda d, i: torch.take(x23(d), T(i, d)), [6], [-6], [5.0],  # take
             "take(): out of range: tried to access index 6 on a tensor of 6 elements."),
    "put": (lambda d, i: x3(d).put(T(i, d), T([9.0], d)), [-4], [-3], [0.0, 1.0, 2.0],  # put
            "put_(): out of range: tried to access index -4 on a tensor of 3 elements."),
    "one_hot": (lambda d, i: F.one_hot(T(i, d), 3), [0, 3], [2, 0], [[1, 0, 0], [0, 0, 0]],  # one_hot
                "one_hot(): Class values must be smaller than num_classes."),
    "one_hot_negative": (lambda d, i: F.one_hot(T(i, d), 3), [-1], [1], [[0, 0, 0]],  # one_hot_negative
                         "one_hot(): Class values must be non-negative."),
    "cross_entropy": (lambda d, i: F.cross_entropy(x23(d), T(i, d)), [0, 7], [2, -100], None,  # cross_entropy
                      "nll_loss(): Target 7 is out of bounds."),
    "nll_loss_negative": (lambda d, i: F.nll_loss(x23(d), T(i, d)), [-1, 0], [0, 1], None,  # nll_loss_negative
                          "nll_loss(): Target -1 is out of bounds."),
    "nll_loss2d": (lambda d, i: F.nll_loss(x23(d).reshape(1, 2, 3), T(i, d), reduction="none"),  # nll_loss2d
                   [[0, 2, 1]], [[0, 1, 1]], None, "nll_loss(): Target 2 is out of bounds."),
}


def _eager_error(fn, index):
    with pytest.raises(Exception) as info:
        fn("cpu", index)
    return type(info.value)


def _read(r):
    return r.tolist() if isinstance(r, torch.Tensor) else r


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_out_of_range_raises_eagers_type_at_the_barrier(name):
    fn, bad, good, _, text = TORCH[name]
    eager_type = _eager_error(fn, bad)
    result = fn(DEV, bad)  # nothing raises at the call: the values are the device's
    for _ in range(2):
        with pytest.raises(eager_type) as info:
            _read(result)
        e = info.value
        assert isinstance(e, BarrierError)
        assert (e.op, e.location, e.stage) == ("lazy.check", at(name), "check")
        assert str(e) == f"lazy.check (recorded at {at(name)}): {text}"


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_in_range_gives_eagers_values(name):
    fn, bad, good, _, _ = TORCH[name]
    want = fn("cpu", good)
    got = fn(DEV, good)
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("name", sorted(n for n in TORCH if TORCH[n][3] is not None))
def test_torch_checks_off_clamp_reads_and_drop_writes_as_before(name):
    fn, bad, _, clamped, _ = TORCH[name]
    with override(index_checks=False):
        result = fn(DEV, bad)
        assert _read(result) == clamped
    # the recording made with the checks off is not the one used with them on
    with pytest.raises(BarrierError):
        _read(fn(DEV, bad))


def test_torch_a_failed_check_fails_only_what_depends_on_it():
    x = torch.arange(4.0, device=DEV)
    bad = x[torch.tensor([1, 9], device=DEV)]  # failing read
    y = x * 2
    x[torch.tensor([5], device=DEV)] = 1.0  # failing write
    lazycore.mark_step()
    with pytest.raises(IndexError):
        bad.tolist()
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(IndexError) as info:
        x.tolist()  # the write failed: x fails, as eager's x[5] = 1 raises
    assert info.value.location == at("failing write")
    # later work runs as in a fresh process, over the same programs
    for _ in range(2):
        z = torch.arange(4.0, device=DEV)
        z[torch.tensor([3], device=DEV)] = 1.0
        assert z[torch.tensor([3, 0], device=DEV)].tolist() == [1.0, 0.0]
        assert (y + 1).tolist() == [1.0, 3.0, 5.0, 7.0]


def test_torch_training_step_with_a_bad_target_fails_its_loss_and_gradients():
    w = torch.zeros(4, 3, device=DEV, requires_grad=True)
    for target, ok in (([0, 2], True), ([0, 3], False), ([1, 1], True)):
        x = torch.ones(2, 4, device=DEV)
        loss = F.cross_entropy(x @ w, torch.tensor(target, device=DEV))  # loss line
        loss.backward()  # backward line
        lazycore.mark_step()
        if ok:
            eager_w = torch.zeros(4, 3, requires_grad=True)
            F.cross_entropy(torch.ones(2, 4) @ eager_w, torch.tensor(target)).backward()
            torch.testing.assert_close(w.grad.cpu(), eager_w.grad)
            torch.testing.assert_close(loss.cpu(), F.cross_entropy(torch.ones(2, 4) @ eager_w, torch.tensor(target)))
        else:
            with pytest.raises(IndexError) as info:
                loss.tolist()
            assert info.value.location == at("loss line")
            with pytest.raises(IndexError) as info:
                w.grad.tolist()  # nll_loss_backward checks the targets too, at the backward's line
            assert info.value.location in (at("loss line"), at("backward line"))
        w.grad = None


def test_host_index_tensors_of_x_i_are_checked_too():
    x = torch.arange(3.0, device=DEV)
    r = x[torch.tensor([3])]  # host index
    with pytest.raises(IndexError) as info:
        r.tolist()
    assert info.value.location == at("host index")


def test_a_recorded_lowering_keeps_its_check_and_its_line():
    """The same call signature again replays the recorded lowering: the check comes
    with it, at the new call's line."""
    x = torch.arange(3.0, device=DEV)
    assert x[torch.tensor([2], device=DEV)].tolist() == [2.0]
    r = x[torch.tensor([4], device=DEV)]  # replayed call
    with pytest.raises(IndexError) as info:
        r.tolist()
    assert info.value.location == at("replayed call")


# --- NumPy -------------------------------------------------------------------------------------------


def _setitem(m, i):
    a = m.arange(3.0)
    a[m.asarray(i)] = 7.0  # np_setitem
    return a


def _put_along_axis(m, i):
    a = m.arange(6.0).reshape(2, 3)
    m.put_along_axis(a, m.asarray(i), 7.0, 1)  # np_put_along_axis
    return a


NUMPY = {
    "np_getitem": (lambda m, i: m.arange(3.0)[m.asarray(i)], [0, 5], [0, -1], [0.0, 2.0],  # np_getitem
                   "ndarray.__getitem__: index 5 is out of bounds for axis 0 with size 3"),
    "np_getitem_negative": (lambda m, i: m.arange(6.0).reshape(2, 3)[:, m.asarray(i)], [-4], [-3],  # np_getitem_negative
                            [[0.0], [3.0]], "ndarray.__getitem__: index -4 is out of bounds for axis 1 with size 3"),
    "np_setitem": (_setitem, [3], [-1], [0.0, 1.0, 2.0],
                   "ndarray.__setitem__: index 3 is out of bounds for axis 0 with size 3"),
    "np_take": (lambda m, i: m.take(m.arange(6.0), m.asarray(i)), [6], [-6], [5.0],  # np_take
                "take: index 6 is out of bounds for axis 0 with size 6"),
    "np_take_along_axis": (lambda m, i: m.take_along_axis(m.arange(6.0).reshape(2, 3), m.asarray(i), 1),  # np_take_along_axis
                           [[0], [-4]], [[0], [-1]], [[0.0], [3.0]],
                           "take_along_axis: index -4 is out of bounds for axis 1 with size 3"),
    "np_put_along_axis": (_put_along_axis, [[3], [0]], [[2], [-3]], [[0.0, 1.0, 2.0], [7.0, 4.0, 5.0]],
                          "put_along_axis: index 3 is out of bounds for axis 1 with size 3"),
}


def _np_read(r):
    return numpy.asarray(r).tolist()


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_numpy_out_of_range_raises_numpys_error_at_the_barrier(name):
    fn, bad, good, _, text = NUMPY[name]
    with pytest.raises(IndexError):
        fn(numpy, numpy.asarray(bad))
    result = fn(lnp, bad)
    with pytest.raises(IndexError) as info:
        _np_read(result)
    e = info.value
    assert isinstance(e, BarrierError)
    assert (e.location, e.stage) == (at(name), "check")
    assert str(e) == f"lazy.check (recorded at {at(name)}): {text}"


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_numpy_in_range_gives_numpys_values(name):
    fn, _, good, _, _ = NUMPY[name]
    assert _np_read(fn(lnp, good)) == fn(numpy, numpy.asarray(good)).tolist()


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_numpy_checks_off_clamp_reads_and_drop_writes_as_before(name):
    fn, bad, _, clamped, _ = NUMPY[name]
    with override(index_checks=False):
        assert _np_read(fn(lnp, bad)) == clamped


def test_numpy_host_indices_still_raise_at_the_call_and_later_work_runs():
    a = lnp.arange(3.0)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        a[[3]]
    bad = a[lnp.asarray([3])]
    ok = a * 2
    with pytest.raises(IndexError):
        _np_read(bad)
    assert _np_read(ok) == [0.0, 2.0, 4.0]
    assert _np_read(a[lnp.asarray([2, 0])]) == [2.0, 0.0]


def test_numpy_take_clip_and_wrap_modes_are_not_checked():
    a = lnp.arange(3.0)
    i = lnp.asarray([5, -7])
    assert _np_read(lnp.take(a, i, mode="clip")) == numpy.take(numpy.arange(3.0), [5, -7], mode="clip").tolist()
    assert _np_read(lnp.take(a, i, mode="wrap")) == numpy.take(numpy.arange(3.0), [5, -7], mode="wrap").tolist()


def test_a_captured_step_keeps_its_checks_in_its_call_node():
    """lazycore.torch.capture replays the step as one ``call`` node; its index
    checks yield their flags from it, and a bad target at a replay fails the
    step's results (eager raises inside the step) with the user's line."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @ltorch.capture
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)  # captured loss
        loss.backward()
        opt.step()
        return loss

    x = torch.ones(2, 4, device=DEV)
    losses = []
    for k in range(6):
        y = torch.tensor([0, 3] if k == 4 else [k % 3, 1], device=DEV)
        losses.append(step(x, y))
        lazycore.mark_step()
    assert step.replays >= 3
    steady = metrics.graph_sizes()[2:4]
    params = len(list(model.parameters()))
    assert all(nodes <= 4 + 2 * params for nodes, _, _ in steady), steady  # a call node, not the step's ops
    for k, loss in enumerate(losses):
        if k < 4:
            assert loss.item() == loss.item()  # a number
        else:
            with pytest.raises(IndexError) as info:
                loss.item()
            assert info.value.location == at("captured loss")
    with pytest.raises(IndexError):
        model.weight.tolist()  # updated by the failed step: failed too


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss2d_lowering_gives_eagers_loss_and_gradient(reduction, weighted):
    """nll_loss2d (cross entropy over (N, C, d1, d2)) is lowered like nll_loss now,
    so its targets are checked as eager checks them: forward and backward values."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=g)
    t = torch.randint(0, 3, (2, 4, 5), generator=g)
    t[0, 0, 0] = -100  # ignored
    w = torch.rand(3, generator=g) if weighted else None
    xe = x.clone().requires_grad_()
    le = F.cross_entropy(xe, t, weight=w, reduction=reduction)
    le.sum().backward()
    xl = x.to(DEV).requires_grad_()
    ll = F.cross_entropy(xl, t.to(DEV), weight=None if w is None else w.to(DEV), reduction=reduction)
    ll.sum().backward()
    torch.testing.assert_close(ll.cpu(), le.detach())
    torch.testing.assert_close(xl.grad.cpu(), xe.grad)
