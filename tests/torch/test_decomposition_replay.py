"""Ops that run PyTorch's decomposition are recorded once per call signature
and replayed: eager's values and layouts, the nodes per-op tracing makes,
and nothing replayed that has a side effect (dispatch.py)."""

import os
import sys

import numpy as np
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import override

aten = torch.ops.aten

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _replay_counts import Dispatches as _Dispatches, digests as _digests, rand as _rand  # noqa: E402


def _layer_norm_backward(dev, seed):
    x = _rand(4, 6, 8, seed=seed)
    w, b = _rand(8, seed=seed + 1), _rand(8, seed=seed + 2)
    _, mean, rstd = aten.native_layer_norm(x, [8], w, b, 1e-5)
    g = _rand(4, 6, 8, seed=seed + 3)
    return (g, x, [8], mean, rstd, w, b, [True, True, True])


CASES = {
    "native_layer_norm": (aten.native_layer_norm.default, lambda d, s: (_rand(4, 6, 8, seed=s), [8],
                                                                     _rand(8, seed=s + 1), _rand(8, seed=s + 2), 1e-5)),
    "native_layer_norm_backward": (aten.native_layer_norm_backward.default, _layer_norm_backward),
    "gelu": (aten.gelu.default, lambda d, s: (_rand(5, 7, seed=s),)),
    "gelu_backward": (aten.gelu_backward.default, lambda d, s: (_rand(5, 7, seed=s), _rand(5, 7, seed=s + 1))),
    "tril": (aten.tril.default, lambda d, s: (_rand(6, 6, seed=s), -1)),
    "embedding_dense_backward": (aten.embedding_dense_backward.default, lambda d, s: (
        _rand(3, 5, 4, seed=s), torch.from_numpy(np.random.default_rng(s).integers(0, 9, (3, 5))), 9, -1, False)),
    "slice_backward": (aten.slice_backward.default, lambda d, s: (_rand(4, 3, seed=s), [4, 7], 1, 2, 5, 1)),
}


def _to(args, dev):
    return tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)


def _check(got, want):
    gots = got if isinstance(got, (list, tuple)) else (got,)
    wants = want if isinstance(want, (list, tuple)) else (want,)
    assert len(gots) == len(wants)
    for g, w in zip(gots, wants):
        if w is None:
            assert g is None
            continue
        assert g.stride() == w.stride() and g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_replayed_decomposition_gives_eager_values_layouts_and_traced_nodes(dev, name, monkeypatch):
    op, make = CASES[name]
    first = _to(make(dev, 0), dev)
    second = make(dev, 10)  # new values, the same signature
    on_device = _to(second, dev)

    def call(args):
        ltorch.mark_step()  # each call at the same step-log position: the scalar policy decides alike
        return op(*args)

    with override(replay=False):
        traced = _digests(call(first))
    call(first)  # records
    dispatches = _Dispatches(monkeypatch)
    got = call(on_device)
    assert dispatches.count == 1, "the replay runs none of the decomposition's pieces"
    _check(got, op(*second))
    assert _digests(call(first)) == traced


def test_view_arguments_are_read_once_and_replay_as_traced(dev):
    x = _rand(8, 6).to(dev)
    w, b = _rand(8).to(dev), _rand(8).to(dev)
    xt = x.t()  # a view: its value is read for the decomposition's pieces
    with override(replay=False):
        traced = _digests(aten.native_layer_norm(xt, [8], w, b, 1e-5))
    aten.native_layer_norm(xt, [8], w, b, 1e-5)
    y = _rand(8, 6, seed=3)
    got = aten.native_layer_norm(y.to(dev).t(), [8], w, b, 1e-5)
    _check(got, aten.native_layer_norm(y.t(), [8], w.cpu(), b.cpu(), 1e-5))
    assert _digests(aten.native_layer_norm(xt, [8], w, b, 1e-5)) == traced


def test_one_tensor_passed_twice_replays_only_for_that_pattern(dev):
    a, b = _rand(5, 7).to(dev), _rand(5, 7, seed=1).to(dev)
    aten.gelu_backward(a, a)  # recorded with both arguments one tensor
    got = aten.gelu_backward(a, b)
    _check(got, aten.gelu_backward(a.cpu(), b.cpu()))
    _check(aten.gelu_backward(b, b), aten.gelu_backward(b.cpu(), b.cpu()))


def test_a_float_argument_keys_its_own_recording(dev):
    x, w, b = _rand(4, 8).to(dev), _rand(8).to(dev), _rand(8).to(dev)
    for eps in (1e-5, 0.5, 1e-5, 3.0):
        _check(aten.native_layer_norm(x, [8], w, b, eps), aten.native_layer_norm(x.cpu(), [8], w.cpu(), b.cpu(), eps))


def test_a_random_decomposition_draws_anew_at_every_call(dev, monkeypatch):
    # rrelu in training mode draws its slopes from the RNG state: never replayed
    x = -torch.ones(2000).to(dev)
    a = torch.nn.functional.rrelu(x, training=True)
    dispatches = _Dispatches(monkeypatch)
    b = torch.nn.functional.rrelu(x, training=True)
    assert dispatches.count > 1
    assert not torch.equal(a.cpu(), b.cpu())


def test_training_with_layer_norm_and_gelu_is_bitwise_the_traced_training(dev):
    def train(replay):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                    torch.nn.Linear(16, 1))
        model.to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with override(replay=replay):
            for i in range(4):
                x = _rand(5, 8, seed=i).to(dev)
                loss = model(x).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                ltorch.mark_step()
        return [p.detach().cpu() for p in model.parameters()]

    for a, b in zip(train(True), train(False)):
        assert torch.equal(a, b)


def test_a_recording_may_update_what_it_made_but_nothing_else(dev):
    """A lowering that fills a value it made in place replays; one that
    updates its input in place runs every call (the update is its effect)."""
    runs = []

    @lazycore.replayed
    def filled(x):
        runs.append("filled")
        z = lazycore.apply("constant", value=np.zeros((3,), np.float32), device=x.device)
        z.assign(lazycore.apply("add", z, x))
        return lazycore.apply("mul", z, x)

    @lazycore.replayed
    def doubled_in_place(x):
        runs.append("in place")
        x.assign(lazycore.apply("add", x, x))
        return x

    d = lazycore.default_device()
    for k in range(3):
        v = np.arange(3, dtype=np.float32) + k
        np.testing.assert_array_equal(lazycore.to_numpy(filled(lazycore.from_numpy(v, d))), v * v)
    assert runs.count("filled") == 1
    for k in range(3):
        x = lazycore.from_numpy(np.full(3, float(k), np.float32), d)
        doubled_in_place(x)
        np.testing.assert_array_equal(lazycore.to_numpy(x), np.full(3, 2.0 * k, np.float32))
    assert runs.count("in place") == 3


def test_what_an_unrecordable_decomposition_writes_through_a_view_reaches_the_base(dev):
    # native_batch_norm updates its running statistics in place (its schema
    # does not say so): never replayed, and a view argument is written back
    x = _rand(6, 4, 3)
    w, b = _rand(4, seed=1), _rand(4, seed=2)
    for _ in range(3):
        mean, var = torch.zeros(8), torch.ones(8)
        lmean, lvar = mean.to(dev), var.to(dev)
        want = aten.native_batch_norm(x, w, b, mean[::2], var[1::2], True, 0.1, 1e-5)
        got = aten.native_batch_norm(x.to(dev), w.to(dev), b.to(dev), lmean[::2], lvar[1::2], True, 0.1, 1e-5)
        _check(got, want)
        np.testing.assert_allclose(lmean.cpu().numpy(), mean.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(lvar.cpu().numpy(), var.numpy(), rtol=1e-5, atol=1e-7)


def test_trying_to_record_changes_no_program(dev):
    """The first call of a signature (recorded, or found unrecordable) makes
    the graph every later call makes, its nodes shared alike: its pieces
    replay inside the recording as they do outside, so a step's program
    never changes after it (one compile for all the steps)."""
    from lazycore.observe import metrics

    x = _rand(6, 4, 3).to(dev)
    w, b = _rand(4, seed=1).to(dev), _rand(4, seed=2).to(dev)
    mean, var = torch.zeros(4).to(dev), torch.ones(4).to(dev)
    ltorch.mark_step()
    before = metrics.counters()["compiles"]
    digests = []
    for _ in range(4):
        bn = aten.native_batch_norm(x * 1.5, w, b, mean, var, True, 0.1, 1e-5)  # not recordable
        ln = aten.native_layer_norm(x * 1.5, [3], None, None, 1e-5)  # recordable
        digests.append(_digests(bn) + _digests(ln) + _digests(mean) + _digests(var))
        ltorch.mark_step()
    assert digests[1:] == digests[:-1]
    assert metrics.counters()["compiles"] - before == 1
