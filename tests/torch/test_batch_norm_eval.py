"""Every output of the batch-norm ops is eager CPU's: the saved statistics are
empty outside training and in the input's element type in training (the meta
kernels and decompositions answer as CUDA does: running statistics, float32)."""

import pytest
import torch

import lazycore
from lazycore.observe import metrics

aten = torch.ops.aten

# name -> (op taking (x, w, b, running_mean, running_var), its modes)
CALLS = {
    "native_batch_norm": (lambda tr, *a: aten.native_batch_norm(*a, tr, 0.1, 1e-5), (True, False)),
    "_native_batch_norm_legit": (lambda tr, *a: aten._native_batch_norm_legit(*a, tr, 0.1, 1e-5), (True, False)),
    "_native_batch_norm_legit.no_stats": (
        lambda tr, x, w, b, rm, rv: aten._native_batch_norm_legit(x, w, b, tr, 0.1, 1e-5), (True,)),
    "_native_batch_norm_legit_functional": (
        lambda tr, *a: aten._native_batch_norm_legit_functional(*a, tr, 0.1, 1e-5), (True, False)),
    "_native_batch_norm_legit_no_training": (
        lambda tr, *a: aten._native_batch_norm_legit_no_training(*a, 0.1, 1e-5), (False,)),
    "_batch_norm_no_update": (lambda tr, *a: aten._batch_norm_no_update(*a, 0.1, 1e-5), (False,)),
    "_batch_norm_with_update": (lambda tr, *a: aten._batch_norm_with_update(*a, 0.1, 1e-5), (True,)),
    "_batch_norm_with_update_functional": (
        lambda tr, *a: aten._batch_norm_with_update_functional(*a, 0.1, 1e-5), (True,)),
    "_batch_norm_impl_index": (
        lambda tr, *a: aten._batch_norm_impl_index(*a, tr, 0.1, 1e-5, False), (True, False)),
    "batch_norm": (lambda tr, *a: aten.batch_norm(*a, tr, 0.1, 1e-5, False), (True, False)),
}
CASES = [(name, tr) for name, (_, modes) in CALLS.items() for tr in modes]


def _args(dtype, params_dtype=None):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, 5, generator=g) * 2 + 1
    w, b = torch.randn(3, generator=g), torch.randn(3, generator=g)
    rm, rv = torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5
    return [x.to(dtype)] + [t.to(params_dtype or dtype) for t in (w, b, rm, rv)]


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _compare(got, want, tol):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            assert g == w, (i, g, w)
            continue
        assert g.device.type == "lazy", i
        g = g.cpu()
        assert (tuple(g.shape), g.dtype) == (tuple(w.shape), w.dtype), (i, g.shape, g.dtype, w.shape, w.dtype)
        torch.testing.assert_close(g, w, **tol)


# (input, parameters): a float32 parameter beside a reduced-precision input is eager's mixed type
DTYPES = [(torch.float32, None), (torch.float64, None), (torch.bfloat16, None), (torch.float16, None),
          (torch.bfloat16, torch.float32), (torch.float16, torch.float32)]


@pytest.mark.parametrize("dtype,params_dtype", DTYPES, ids=[f"{d}-{p}" for d, p in DTYPES])
@pytest.mark.parametrize("name,training", CASES, ids=[f"{n}-{'train' if t else 'eval'}" for n, t in CASES])
def test_every_output_is_eagers(dev, name, training, dtype, params_dtype):
    fn = CALLS[name][0]
    tol = {} if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2)
    before = metrics.fallbacks()  # earlier tests' fallbacks in this process are theirs
    for _ in range(2):  # the first call records the decomposition, the second replays it
        args = _args(dtype, params_dtype)
        eargs = [a.clone() for a in args]
        want = _flat(fn(training, *eargs))
        largs = [a.to(dev) for a in args]
        got = _flat(fn(training, *largs))
        lazycore.mark_step()
        _compare(got, want, tol)
        # the running statistics the op updates in place are eager's too
        torch.testing.assert_close(largs[3].cpu(), eargs[3], **tol)
        torch.testing.assert_close(largs[4].cpu(), eargs[4], **tol)
        assert metrics.fallbacks() == before


@pytest.mark.parametrize("training", [True, False])
def test_without_weight_and_bias(dev, training):
    x, _, _, rm, rv = _args(torch.bfloat16, torch.float32)
    want = aten.native_batch_norm(x, None, None, rm.clone(), rv.clone(), training, 0.1, 1e-5)
    got = aten.native_batch_norm(x.to(dev), None, None, rm.to(dev), rv.to(dev), training, 0.1, 1e-5)
    _compare(list(got), list(want), dict(rtol=2e-2, atol=2e-2))


def test_eval_module_backward_is_eagers(dev):
    """Eval-mode backward reads the running statistics, not the (empty) saved ones."""
    torch.manual_seed(5)
    bn = torch.nn.BatchNorm1d(3).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    lbn = torch.nn.BatchNorm1d(3).eval().to(dev)
    lbn.load_state_dict(bn.state_dict())
    x = torch.randn(4, 3, 5)
    xe, xl = x.clone().requires_grad_(), x.to(dev).requires_grad_()
    g = torch.randn(4, 3, 5)
    bn(xe).backward(g)
    lbn(xl).backward(g.to(dev))
    torch.testing.assert_close(xl.grad.cpu(), xe.grad)
    torch.testing.assert_close(lbn.weight.grad.cpu(), bn.weight.grad)
    torch.testing.assert_close(lbn.bias.grad.cpu(), bn.bias.grad)
