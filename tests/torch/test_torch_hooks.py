"""PyTorch's own hooks for the ``lazy`` device answer for lazycore (issue 21, item 5):
``torch._lazy``, the ``torch.lazy`` device module (``get_device_module``,
``fork_rng``, checkpointing), seeding, ``torch.autocast("lazy")``, copies and
pickles, and same-size ``view(dtype)``; each against eager on the same inputs."""

import copy
import gc
import io
import pickle
import warnings

import pytest
import torch
import torch._lazy
import torch._lazy.metrics
from torch.utils.checkpoint import checkpoint

import lazycore.torch as ltorch
from lazycore.observe import metrics


def _pending(t) -> bool:
    return t._storage.handle.pending


# --- torch._lazy ---------------------------------------------------------------------------


def test_torch_lazy_mark_step_runs_pending_work_and_step_closures(dev):
    y = torch.arange(4.0, device=dev) * 3
    assert _pending(y)
    seen = []
    torch._lazy.add_step_closure(lambda: seen.append(1))
    before = metrics.counters()["executions"]
    torch._lazy.mark_step()
    assert not _pending(y) and metrics.counters()["executions"] == before + 1
    assert seen == [1]
    torch._lazy.wait_device_ops()
    assert y.tolist() == [0.0, 3.0, 6.0, 9.0]


def test_torch_lazy_to_cpu_syncs(dev):
    y = torch.ones(3, device=dev) + 1
    (host,) = torch._lazy.to_cpu([y])
    assert host.device.type == "cpu" and host.tolist() == [2.0, 2.0, 2.0]


def test_torch_lazy_metrics_are_lazycores(dev):
    torch._lazy.metrics.reset()
    assert torch._lazy.metrics.counter_value("executions") == 0
    (torch.ones(2, device=dev) * 5).cpu()
    assert torch._lazy.metrics.counter_value("executions") == metrics.counters()["executions"] >= 1
    assert "executions" in torch._lazy.metrics.counter_names()
    assert torch._lazy.metrics.counter_value("no such counter") is None
    assert torch._lazy.metrics.metrics_report() .startswith("lazycore metrics report")


def test_torch_testing_wrapper_set_seed_on_lazy_results(dev):
    # PyTorch's OpInfo tests call torch._lazy.mark_step() on lazy results of random ops
    from torch.testing._utils import wrapper_set_seed

    x = torch.ones(64, device=dev)
    a = wrapper_set_seed(torch.nn.functional.dropout, x, 0.5, training=True)
    b = wrapper_set_seed(torch.nn.functional.dropout, x, 0.5, training=True)
    assert not _pending(a)
    assert torch.equal(a.cpu(), b.cpu())


# --- the device module -------------------------------------------------------------------------


def test_get_device_module_is_torch_lazy(dev):
    mod = torch.get_device_module("lazy")
    assert mod is torch.lazy is torch.get_device_module(dev)
    assert mod.is_available() and mod.device_count() >= 1 and mod.current_device() == 0
    with mod.device(0):
        assert mod.current_device() == 0
    with pytest.raises(RuntimeError, match="Invalid device ordinal"):
        mod.set_device(mod.device_count())
    with pytest.raises(ValueError):
        mod.get_rng_state("cpu")


def test_torch_manual_seed_reseeds_every_time(dev):
    torch.manual_seed(11)
    a = torch.rand(5, device=dev).cpu()
    torch.manual_seed(11)  # the same seed again: the stream restarts
    b = torch.rand(5, device=dev).cpu()
    torch.manual_seed(12)
    c = torch.rand(5, device=dev).cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.lazy.initial_seed() == torch.initial_seed() == 12
    torch.manual_seed(-1)  # torch wraps negative seeds
    assert torch.lazy.initial_seed() == torch.initial_seed()
    s = torch.seed()
    assert torch.lazy.initial_seed() == torch.initial_seed() == s


def test_lazy_manual_seed_leaves_the_cpu_generator_alone(dev):
    # as torch.cuda.manual_seed: the device's generator only
    torch.manual_seed(0)
    cpu_state = torch.get_rng_state()
    torch.lazy.manual_seed(5)
    a = torch.randn(3, device=dev).cpu()
    torch.lazy.manual_seed_all(5)
    b = torch.randn(3, device=dev).cpu()
    assert torch.equal(a, b) and torch.lazy.initial_seed() == 5
    assert torch.equal(torch.get_rng_state(), cpu_state) and torch.initial_seed() == 0


def test_fork_rng_restores_the_lazy_generator(dev):
    torch.manual_seed(3)
    torch.rand(2, device=dev)  # advance the stream on the device
    with torch.random.fork_rng(device_type="lazy"):
        inside = torch.rand(4, device=dev).cpu()
        torch.manual_seed(99)
        torch.rand(4, device=dev)
    after = torch.rand(4, device=dev).cpu()
    assert torch.equal(inside, after)


def test_rng_state_round_trip_and_eager_errors(dev):
    mod = torch.lazy
    torch.manual_seed(4)
    torch.rand(3, device=dev)
    state = mod.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.dim() == 1
    a = torch.rand(6, device=dev).cpu()
    mod.set_rng_state(state)
    b = torch.rand(6, device=dev).cpu()
    assert torch.equal(a, b)
    assert torch.equal(mod.get_rng_state_all()[0], mod.get_rng_state(0))
    for bad in (torch.zeros(state.numel()), torch.zeros(3, dtype=torch.uint8)):
        with pytest.raises(Exception) as eager:
            torch.set_rng_state(bad)
        with pytest.raises(type(eager.value)):
            mod.set_rng_state(bad)


def test_synchronize_and_memory_figures(dev):
    mod = torch.lazy
    gc.collect()
    gc.disable()  # no other test's garbage may go away in between
    try:
        _memory_figures(mod, dev)
    finally:
        gc.enable()


def _memory_figures(mod, dev):
    base = mod.memory_allocated()
    x = torch.ones(1000, device=dev) * 2  # pending: no device data yet
    assert mod.memory_allocated() == base
    mod.synchronize()
    assert not _pending(x)
    assert mod.memory_allocated() == base + 4000
    stats = mod.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + 4000
    del x
    assert mod.memory_allocated() == base


def test_checkpoint_replays_dropout_with_the_stashed_lazy_rng_state(dev):
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 6).to(dev)
    x = torch.randn(3, 6, device=dev, requires_grad=True)

    def block(v):
        return torch.nn.functional.dropout(lin(v), 0.5, training=True).sum()

    torch.manual_seed(1)
    checkpoint(block, x, use_reentrant=False).backward()
    with_checkpoint = x.grad.cpu()
    x.grad = None
    torch.manual_seed(1)
    block(x).backward()
    assert torch.equal(with_checkpoint, x.grad.cpu())


# --- autocast ----------------------------------------------------------------------------------

_CALLS = {
    "mm": lambda a, b, c: a @ b,
    "add": lambda a, b, c: a + c,
    "bmm": lambda a, b, c: torch.bmm(a[None], b[None]),
    "einsum": lambda a, b, c: torch.einsum("ij,jk->ik", a, b),  # bmm inside is cast, not einsum
    "cat_promotes": lambda a, b, c: torch.cat([a.bfloat16(), c]),
    "linear": lambda a, b, c: torch.nn.functional.linear(a, b.t(), c[0, :3]),
    "softmax": lambda a, b, c: torch.softmax(a, -1),
    "layer_norm": lambda a, b, c: torch.nn.functional.layer_norm(a, (8,)),
    "mse_loss_fp32": lambda a, b, c: torch.nn.functional.mse_loss(a.bfloat16(), c),
    "sdpa": lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(a[None], c[None], c[None]),
    "conv2d": lambda a, b, c: torch.nn.functional.conv2d(a[None, None], c[None, None, :3, :3]),
    "prod_fp32": lambda a, b, c: torch.prod(a.bfloat16(), 1),
}


@pytest.mark.parametrize("name", list(_CALLS))
def test_autocast_casts_as_torchs_policy(dev, name):
    torch.manual_seed(0)
    a, b, c = torch.randn(4, 8), torch.randn(8, 3), torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = _CALLS[name](a, b, c)
    with torch.autocast("lazy", dtype=torch.bfloat16):
        got = _CALLS[name](a.to(dev), b.to(dev), c.to(dev))
    assert got.device == dev and got.dtype == want.dtype
    tol = 2e-2 if want.dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol)


def test_autocast_training_step_matches_eager(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4))
    lazy_model = copy.deepcopy(model).to(dev)
    x, target = torch.randn(5, 8), torch.randint(0, 4, (5,))

    def step(m, x, target, device_type):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            out = m(x)
            loss = torch.nn.functional.cross_entropy(out, target)
        loss.backward()
        return out, loss

    out_e, loss_e = step(model, x, target, "cpu")
    out_l, loss_l = step(lazy_model, x.to(dev), target.to(dev), "lazy")
    assert (out_l.dtype, loss_l.dtype) == (out_e.dtype, loss_e.dtype) == (torch.bfloat16, torch.float32)
    torch.testing.assert_close(loss_l.cpu(), loss_e, rtol=2e-2, atol=2e-2)
    for p, q in zip(model.parameters(), lazy_model.parameters()):
        assert q.grad.dtype == p.grad.dtype == torch.float32
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=5e-2, atol=5e-2)


def test_autocast_reaches_inside_python_functions(dev):
    # multi_head_attention_forward is Python: its linear/bmm/softmax calls are decided one by one
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    lazy = copy.deepcopy(mha).to(dev)
    x = torch.randn(2, 5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_e, w_e = mha(x, x, x)
    with torch.autocast("lazy", dtype=torch.bfloat16):
        out_l, w_l = lazy(x.to(dev), x.to(dev), x.to(dev))
    assert (out_l.dtype, w_l.dtype) == (out_e.dtype, w_e.dtype)
    torch.testing.assert_close(out_l.cpu().float(), out_e.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(w_l.cpu().float(), w_e.float(), rtol=2e-2, atol=2e-2)


def test_autocast_state_nesting_and_other_devices(dev):
    x = torch.randn(3, 3)
    assert not torch.is_autocast_enabled("lazy")
    stack = torch._C._len_torch_function_stack()
    with torch.autocast("lazy"):
        assert torch.is_autocast_enabled("lazy") and torch.get_autocast_dtype("lazy") == torch.bfloat16
        assert (x.to(dev) @ x.to(dev)).dtype == torch.bfloat16
        assert (x @ x).dtype == torch.float32  # CPU tensors: lazy autocast is not CPU autocast
        with torch.autocast("lazy", enabled=False):
            assert (x.to(dev) @ x.to(dev)).dtype == torch.float32
        with torch.autocast("lazy", dtype=torch.float16):
            assert (x.to(dev) @ x.to(dev)).dtype == torch.float16
        assert (x.to(dev) @ x.to(dev)).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("lazy") and torch._C._len_torch_function_stack() == stack
    assert (x.to(dev) @ x.to(dev)).dtype == torch.float32


def test_autocast_refuses_a_dtype_as_eager_does(dev):
    for device_type in ("cpu", "lazy"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.autocast(device_type, dtype=torch.float64):
                assert not torch.is_autocast_enabled(device_type)
        assert any("Disabling autocast" in str(w.message) for w in caught)


# --- copies and pickles ---------------------------------------------------------------------------


def test_deepcopy_of_tensors(dev):
    x = torch.arange(6.0).reshape(2, 3).to(dev).requires_grad_()
    x.grad = torch.ones(2, 3, device=dev)
    x.note = "kept"
    y = copy.deepcopy(x)
    assert y.device == dev and y.requires_grad and y.is_leaf and y.note == "kept"
    assert torch.equal(y.detach().cpu(), x.detach().cpu()) and torch.equal(y.grad.cpu(), x.grad.cpu())
    with torch.no_grad():
        y.add_(1)
    assert x.detach().cpu()[0, 0] == 0 and y.detach().cpu()[0, 0] == 1
    a, b = copy.deepcopy([x, x])
    assert a is b  # the memo, as eager
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(x * 2)


def test_deepcopy_of_a_module_keeps_parameters_independent(dev):
    torch.manual_seed(0)
    lazy = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)).to(dev)
    lazy[1].weight = lazy[0].weight  # tied (after .to: it swaps each module's parameters, as for XLA)
    twin = copy.deepcopy(lazy)
    for p, q in zip(lazy.parameters(), twin.parameters()):
        assert isinstance(q, torch.nn.Parameter) and q.device == dev and torch.equal(p.detach().cpu(), q.detach().cpu())
    assert twin[1].weight is twin[0].weight and twin[0].weight is not lazy[0].weight
    with torch.no_grad():
        twin[0].weight.zero_()
    assert lazy[0].weight.detach().cpu().abs().sum() > 0


def _saved(obj, **load):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_pickle_and_torch_save_of_tensors(dev, dtype):
    host = (torch.arange(6) % 3).reshape(2, 3).to(dtype)
    x = host.to(dev)
    for back in (pickle.loads(pickle.dumps(x)), _saved(x), _saved(x.t())):  # a CPU tensor's pickle (issue 43)
        assert back.device.type == "cpu" and back.dtype == dtype
    assert torch.equal(_saved(x), host) and torch.equal(_saved(x.t()), host.t())
    on_cpu = _saved(x, map_location="cpu")
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, host)


def test_torch_save_of_modules_and_state_dicts(dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(dev)
    state = _saved(model.state_dict())  # weights_only=True: torch's allowlisted rebuild
    assert all(v.device.type == "cpu" for v in state.values())  # portable (issue 43)
    fresh = torch.nn.Linear(4, 2).to(dev)
    fresh.load_state_dict(state)
    x = torch.randn(3, 4, device=dev)
    assert torch.equal(fresh(x).detach().cpu(), model(x).detach().cpu())
    whole = _saved(model, weights_only=False)
    assert isinstance(whole.weight, torch.nn.Parameter) and whole.weight.requires_grad
    assert whole.weight.device.type == "cpu" and torch.equal(whole.weight.detach(), model.weight.detach().cpu())


# --- view(dtype) ---------------------------------------------------------------------------------

_BITCASTS = [
    (torch.float32, torch.int32),
    (torch.int32, torch.float32),
    (torch.float64, torch.int64),
    (torch.int16, torch.bfloat16),
    (torch.float16, torch.int16),
    (torch.bfloat16, torch.float16),
    (torch.uint8, torch.int8),
]


def _bits(t):
    return t.contiguous().view(torch.uint8)


@pytest.mark.parametrize("src,dst", _BITCASTS)
def test_view_dtype_reads_the_same_bits(dev, src, dst):
    torch.manual_seed(0)
    host = torch.randint(-100, 100, (3, 4)).to(src) if not src.is_floating_point else torch.randn(3, 4).to(src) * 50
    want = host.view(dst)
    got = host.to(dev).view(dst)
    assert got.dtype == dst and got.shape == want.shape
    assert torch.equal(_bits(got.cpu()), _bits(want))
    assert torch.equal(_bits(host.to(dev).t().view(dst).cpu()), _bits(host.t().view(dst)))


def test_writes_through_a_dtype_view_reach_the_base(dev):
    def run(x):
        bits = x.view(torch.int32)
        bits.add_(1)  # the next float up
        x[:, 1].view(torch.int32).fill_(0)
        strided = x.as_strided((2,), (3,), 1).view(torch.int32)
        return x, bits, strided

    host = torch.tensor([[1.0, -2.5, 3.0], [0.5, 4.0, -0.0]])
    for got, want in zip(run(host.to(dev)), run(host.clone())):
        assert torch.equal(_bits(got.cpu()), _bits(want))


def test_view_dtype_refusals_name_themselves(dev):
    x = torch.ones(2, 4, device=dev)
    with pytest.raises(NotImplementedError, match="element size"):
        x.view(torch.float16)
    with pytest.raises(NotImplementedError, match="bool"):
        torch.ones(3, dtype=torch.uint8, device=dev).view(torch.bool)
