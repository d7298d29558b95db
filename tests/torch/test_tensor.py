"""The lazy device as torch users see it: moving data, observing values, views and in-place ops."""

import re

import numpy as np
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics


def lazy_and_eager(make, dev):
    torch.manual_seed(0)
    eager = make()
    return eager.to(dev), eager.clone()


def test_device_and_metadata_without_barrier(dev, clean_runtime):
    x = torch.ones(3, 4).to(dev)
    y = (x * 2).t()
    before = metrics.counters()["executions"]
    assert y.shape == (4, 3) and y.dtype == torch.float32 and y.device == dev
    assert y.stride() == (1, 4) and not y.is_contiguous()
    assert metrics.counters()["executions"] == before
    assert dev.type == "lazy" and ltorch.device("cpu") == dev


def test_unknown_device_kind_is_refused():
    with pytest.raises(RuntimeError, match="no lazycore device tpu:0"):
        ltorch.device("tpu")


def test_observing_values(dev):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(dev) + 0.5
    assert x.sum().item() == pytest.approx(18.0)
    assert x.tolist() == [[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]]
    np.testing.assert_array_equal(x.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5)
    np.testing.assert_array_equal(np.asarray(x), x.cpu().numpy())
    assert float(x[1, 2]) == 5.5 and int(x[0, 0] * 2) == 1 and bool(x[0, 0] > 0)
    assert repr(x) == "tensor([[0.5000, 1.5000, 2.5000],\n        [3.5000, 4.5000, 5.5000]], device='lazy:0')"
    assert "grad_fn=<MulBackward0>" in repr(x.requires_grad_() * 2)


def test_cpu_keeps_strides(dev):
    x = torch.arange(6.0).reshape(2, 3)
    y = x.to(dev).t().cpu()
    assert y.stride() == x.t().stride()
    torch.testing.assert_close(y, x.t())


@pytest.mark.parametrize(
    "update",
    [
        lambda x: x.permute(1, 2, 0).add_(42),
        lambda x: x.__setitem__(0, 5),
        lambda x: x.narrow(0, 1, 2).zero_(),
        lambda x: x[:, 1].mul_(2),
        lambda x: x.transpose(0, 2)[1:, ::2].fill_(-1),
        lambda x: x.view(-1)[3:9].add_(100),
        lambda x: x.unsqueeze(0).squeeze(0)[..., 1].sub_(3),
        lambda x: x[1].t().mul_(10),
        lambda x: x.diagonal(dim1=1, dim2=2).fill_(7),
        lambda x: x.unfold(2, 2, 1)[..., 0].add_(1),
        lambda x: x.as_strided((2, 2), (5, 1), 3).copy_(torch.ones(2, 2)),
        lambda x: [v.add_(i) for i, v in enumerate(x.unbind(1))],
        lambda x: [v.mul_(-1) for v in x.split(2, dim=2)[1:]],
        lambda x: x[::2, :, 1:3].copy_(torch.zeros(2, 3, 2)),
        lambda x: x.detach().add_(1),
    ],
)
def test_updates_through_views_reach_the_base(dev, update):
    x, ref = lazy_and_eager(lambda: torch.randn(3, 3, 4), dev)
    update(x)
    update(ref)
    torch.testing.assert_close(x.cpu(), ref)


def test_views_see_later_updates_of_the_base(dev):
    x, ref = lazy_and_eager(lambda: torch.randn(4, 5), dev)
    v, rv = x.t()[1:3], ref.t()[1:3]
    x.mul_(3)
    ref.mul_(3)
    w, rw = v.reshape(-1), rv.reshape(-1)
    x[2] = 9.0
    ref[2] = 9.0
    torch.testing.assert_close(v.cpu(), rv)
    torch.testing.assert_close(w.cpu(), rw)


def test_transpose_in_place_on_matrix(dev):
    x, ref = lazy_and_eager(lambda: torch.randn(3, 3), dev)
    x.t().mul_(2)
    ref.t().mul_(2)
    torch.testing.assert_close(x.cpu(), ref)


def test_writing_into_an_expanded_view_is_refused_as_in_eager(dev):
    x = torch.zeros(3).to(dev)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.expand(2, 3).add_(1)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.zeros(3).expand(2, 3).add_(1)


def test_type_promotion_and_broadcasting(dev):
    a = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    b = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64)
    cases = [
        lambda a, b: a + b,
        lambda a, b: a * 2.5,
        lambda a, b: a / 4,
        lambda a, b: a // 4,
        lambda a, b: (a - 7) % 4,
        lambda a, b: a > b,
        lambda a, b: torch.where(a > 2, a, b),
        lambda a, b: (a + True),
        lambda a, b: a.to(torch.float16) + b.to(torch.float32),
    ]
    for f in cases:
        want = f(a, b)
        got = f(a.to(dev), b.to(dev))
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)


def test_bad_calls_raise_eagers_error_at_the_call(dev):
    x, y = torch.ones(2, 3).to(dev), torch.ones(4).to(dev)
    # the message is the meta kernel's; the exception type is eager's
    with pytest.raises(RuntimeError, match="broadcast|must match"):
        x + y
    with pytest.raises(IndexError):
        x.sum(dim=5)
    with pytest.raises(RuntimeError):
        torch.ones(3, dtype=torch.int64).to(dev).add_(0.5)
    with pytest.raises(RuntimeError, match="same device"):
        x + torch.ones(2, 3)
    # nothing pending was lost or half-updated by the refused calls
    torch.testing.assert_close(x.cpu(), torch.ones(2, 3))


def test_cpu_scalar_tensors_mix_with_lazy_ones(dev):
    x = torch.arange(4.0).to(dev)
    torch.testing.assert_close((x * torch.tensor(3.0)).cpu(), torch.arange(4.0) * 3)


def test_factories_on_the_lazy_device(dev):
    assert torch.zeros(2, 3, device=dev).cpu().eq(0).all()
    torch.testing.assert_close(torch.full((2, 2), 7.5, device=dev).cpu(), torch.full((2, 2), 7.5))
    torch.testing.assert_close(torch.arange(2, 11, 3, device=dev).cpu(), torch.arange(2, 11, 3))
    torch.testing.assert_close(torch.arange(0.0, 1.0, 0.25, device=dev).cpu(), torch.arange(0.0, 1.0, 0.25))
    torch.testing.assert_close(torch.linspace(-1, 1, 7, device=dev).cpu(), torch.linspace(-1, 1, 7))
    torch.testing.assert_close(torch.eye(3, 4, device=dev).cpu(), torch.eye(3, 4))
    torch.testing.assert_close(torch.ones_like(torch.ones(2).to(dev)).cpu(), torch.ones(2))
    t = torch.tensor([[1, 2], [3, 4]], device=dev)
    assert t.device == dev and t.dtype == torch.int64
    torch.testing.assert_close(t.cpu(), torch.tensor([[1, 2], [3, 4]]))


def test_random_ops_have_the_right_distributions(dev):
    ltorch.manual_seed(123)
    n = 200_000
    u = torch.rand(n, device=dev).cpu()
    z = torch.randn(n, device=dev, dtype=torch.float64).cpu()
    b = torch.empty(n, device=dev).bernoulli_(0.3).cpu()
    k = torch.randint(3, 9, (n,), device=dev).cpu()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01 and z.dtype == torch.float64
    assert abs(b.mean() - 0.3) < 0.005 and set(b.unique().tolist()) == {0.0, 1.0}
    assert set(k.unique().tolist()) == set(range(3, 9)) and k.dtype == torch.int64
    # reseeding restarts the stream; consecutive draws differ
    ltorch.manual_seed(123)
    again = torch.rand(n, device=dev).cpu()
    torch.testing.assert_close(again, u)
    assert not torch.equal(torch.rand(n, device=dev).cpu(), u)


def test_fallback_is_counted_with_the_user_line(dev, clean_runtime):
    x = torch.tensor([3.0, 1.0, 2.0]).to(dev)
    values = torch.unique(x, dim=0)  # its size depends on the values: runs on the CPU
    line = test_fallback_is_counted_with_the_user_line.__code__.co_firstlineno + 2
    torch.testing.assert_close((values * 2).cpu(), torch.tensor([2.0, 4.0, 6.0]))
    sites = metrics.fallbacks()
    assert metrics.counters()["fallbacks"] >= 1
    assert any(loc.endswith(f"test_tensor.py:{line}") for loc in sites["aten.unique_dim.default"])


def test_in_place_fallback_writes_back_through_views(dev, clean_runtime):
    x, ref = lazy_and_eager(lambda: torch.tensor([[3.0, 1.0, 2.0], [9.0, 8.0, 7.0]]), dev)
    x[1].exponential_(generator=torch.Generator().manual_seed(0))
    ref[1].exponential_(generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(x.cpu(), ref)
    assert "aten.exponential_.default" in metrics.fallbacks()


def test_parameters_and_modules_move(dev):
    m = torch.nn.Linear(3, 2)
    w = m.weight.detach().clone()
    m.to(dev)
    assert isinstance(m.weight, torch.nn.Parameter) and m.weight.device == dev and m.weight.requires_grad
    torch.testing.assert_close(m.weight.cpu().detach(), w)
    with torch.no_grad():
        m.weight.mul_(2)
    torch.testing.assert_close(m.weight.detach().cpu(), w * 2)
    m.weight.data = torch.zeros(2, 3).to(dev)
    assert m.weight.detach().cpu().eq(0).all()


def test_autograd_matches_eager(dev):
    torch.manual_seed(0)
    a = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, 3, requires_grad=True)

    def f(a, b):
        return (torch.tanh(a @ b).exp() * 3).sum(dim=1).log().mean()

    f(a, b).backward()
    la = a.detach().to(dev).requires_grad_()
    lb = b.detach().to(dev).requires_grad_()
    f(la, lb).backward()
    torch.testing.assert_close(la.grad.cpu(), a.grad)
    torch.testing.assert_close(lb.grad.cpu(), b.grad)


def test_mark_step_runs_everything_pending(dev, clean_runtime):
    x = torch.ones(8).to(dev)
    y = x * 3
    z = y.sum()
    lazycore.mark_step()
    assert metrics.counters()["executions"] == 1
    assert z.item() == 24.0 and metrics.counters()["executions"] == 1


def test_host_index_tensors_are_accepted_as_on_cuda(dev):
    x = torch.arange(12.0).reshape(3, 4)
    idx = torch.tensor([2, 0])
    torch.testing.assert_close(x.to(dev)[idx].cpu(), x[idx])
    lazy = x.to(dev)
    lazy[idx] = -1.0
    x[idx] = -1.0
    torch.testing.assert_close(lazy.cpu(), x)


@pytest.mark.parametrize(
    "update",
    [
        lambda x: x.squeeze_(0).mul_(2),
        lambda x: x.unsqueeze_(1).add_(1),
        lambda x: x.t_().sub_(1) if x.dim() == 2 else x,
        lambda x: x.transpose_(0, 1)[0].zero_(),
        lambda x: x.as_strided_((2, 2), (1, 2)).fill_(3),
    ],
)
def test_in_place_view_ops_reshape_the_tensor_itself(dev, update):
    x, ref = lazy_and_eager(lambda: torch.randn(1, 5), dev)
    y = x.view(5)
    ry = ref.view(5)
    update(x)
    update(ref)
    assert x.shape == ref.shape and x.stride() == ref.stride()
    torch.testing.assert_close(x.cpu(), ref)
    torch.testing.assert_close(y.cpu(), ry)


def test_views_of_empty_tensors(dev):
    x = torch.randn(0, 3)
    torch.testing.assert_close(x.to(dev).diagonal().cpu(), x.diagonal())


INTEGER_TYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
def test_sign_abs_and_power_of_integers_match_eager(dev, dtype):
    # unsigned types have no stablehlo.sign / abs; XLA's integer power looks at six
    # exponent bits only and gives 0 for (-1) ** -n: each lowers apart now
    info = torch.iinfo(dtype)
    x = torch.tensor([0, 1, 7, info.max, info.min, info.max // 3], dtype=dtype)
    for f in (torch.sign, torch.sgn, torch.abs, torch.neg):
        torch.testing.assert_close(f(x.to(dev)).cpu(), f(x), rtol=0, atol=0)
    base = torch.tensor([0, 3, -3, 1, -1, -1, 2, 5, 0], dtype=torch.int64).to(dtype)
    exponent = torch.tensor([64, 100, 100, -5, -3, -2, 64, 70, -1], dtype=torch.int64).to(dtype)
    if dtype == torch.uint8:
        exponent = exponent.abs() + 130  # past the sign bit of a signed byte
    got = torch.pow(base.to(dev), exponent.to(dev)).cpu()
    torch.testing.assert_close(got, torch.pow(base, exponent), rtol=0, atol=0)
    torch.testing.assert_close((base.to(dev) ** 100).cpu(), base ** 100, rtol=0, atol=0)


def test_types_the_op_table_refuses_raise_eagers_error(dev):
    for f, x in [(torch.abs, torch.tensor([True, False])), (torch.bitwise_not, torch.tensor([1.5]))]:
        with pytest.raises(NotImplementedError) as eager:
            f(x)
        with pytest.raises(NotImplementedError, match=re.escape(str(eager.value))):
            f(x.to(dev))


def test_torch_dtypes_map_onto_the_cores_element_types():
    """The torch table (frontends/torch/dtypes.py) is torch's own; the element types it
    names are the dialect's one table, and a tensor's host copy has that table's NumPy dtype."""
    from lazycore.dialect.types import DTYPES, to_numpy_dtype
    from lazycore.frontends.torch import dtypes

    assert sorted(dtypes.TO_LAZY.values()) == sorted(DTYPES)  # each core type once, no other names
    for tdtype, name in dtypes.TO_LAZY.items():
        assert dtypes.TO_TORCH[name] is tdtype
        assert dtypes.to_numpy(torch.zeros(2, dtype=tdtype)).dtype == to_numpy_dtype(name), tdtype
