"""LSTM, GRU and plain RNN layers on the lazy device run one loop per layer
(frontends/torch/ops/recurrent.py) with eager CPU's values: outputs, final
states and every gradient, for the layers' options (layers, directions,
projections, no biases, ``batch_first``, given initial states that require
grad), held to torch's CPU composite (oneDNN's LSTM off: the composite's is
the algorithm the loops follow); dropout between layers as the composite on
the lazy device draws it; and the program does not grow with the sequence."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch

from lazycore.observe import metrics
from lazycore.observe.inspect_graph import ir_text

sys.path.insert(0, str(Path(__file__).parent))
from _bits import BY_HAND  # noqa: E402
from _recurrent_inputs import inputs as _inputs, on as _on  # noqa: E402

aten = torch.ops.aten

_CASES = {
    "lstm": (torch.nn.LSTM, dict(num_layers=2)),
    "lstm_bidirectional_batch_first": (torch.nn.LSTM, dict(bidirectional=True, batch_first=True)),
    "lstm_projection_no_bias": (torch.nn.LSTM, dict(num_layers=2, proj_size=3, bias=False)),
    "lstm_dropout": (torch.nn.LSTM, dict(num_layers=3, dropout=0.5)),
    "gru": (torch.nn.GRU, dict(num_layers=2, bidirectional=True)),
    "rnn_tanh": (torch.nn.RNN, dict(num_layers=2, batch_first=True)),
    "rnn_relu_no_bias": (torch.nn.RNN, dict(nonlinearity="relu", bias=False)),
}


def _lstm_composite(module):
    """An LSTM ``module``'s forward with torch's C++ composite (RNN.cpp: the cell per time step), not
    torch._decomp's Python one that ``OpOverload.decompose`` would run."""

    def forward(x, hx):
        m = module
        out = aten.lstm.input._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, x, hx, m._flat_weights, m.bias,
                                     m.num_layers, m.dropout, m.training, m.bidirectional, m.batch_first)
        return out[0], out[1:]

    return forward


def _results(module, forward, x, hx, seed):
    """Output, final states and the gradients of a loss of them for the
    input, the initial states and the parameters, on the CPU."""
    torch.manual_seed(seed)
    out, finals = forward(x, hx)
    loss = out.square().sum() + sum(f.sin().sum() for f in finals)
    inputs = [x, *(hx if isinstance(hx, tuple) else (hx,)), *module.parameters()]
    return [t.detach().cpu() for t in (out, *finals, *torch.autograd.grad(loss, inputs))]


def _module_forward(module):
    def forward(x, hx):
        out, finals = module(x, hx)
        return out, finals if isinstance(finals, tuple) else (finals,)

    return forward


@pytest.mark.parametrize("name", [n for n in _CASES if n != "lstm_dropout"])
def test_loops_give_eager_cpus_values(dev, name):
    cls, kwargs = _CASES[name]
    torch.manual_seed(0)
    eager = cls(5, 4, **kwargs)
    lazy = copy.deepcopy(eager).to(dev)
    x, hx = _inputs(eager)
    with torch.backends.mkldnn.flags(enabled=False):
        want = _results(eager, _module_forward(eager), *_on("cpu", x, hx), seed=1)
    x, hx = _on(dev, x, hx)
    loops = ir_text([lazy(x, hx)[0]]).count("stablehlo.while")
    assert loops == lazy.num_layers * (2 if lazy.bidirectional else 1)
    before = metrics.counters().get("fallbacks", 0)
    got = _results(lazy, _module_forward(lazy), x, hx, seed=1)
    assert metrics.counters().get("fallbacks", 0) == before
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}, result {i}: {m}")


# CI: test_packed_sequences.py::test_dropout_between_packed_layers_draws_as_the_composite (the same _stack dropout)
@BY_HAND
def test_dropout_between_layers_draws_as_the_composite(dev):
    cls, kwargs = _CASES["lstm_dropout"]
    torch.manual_seed(0)
    module = cls(5, 4, **kwargs).to(dev)
    x, hx = _on(dev, *_inputs(module))
    got = _results(module, _module_forward(module), x, hx, seed=1)
    want = _results(module, _lstm_composite(module), x, hx, seed=1)
    assert not torch.equal(got[0], _results(module, _module_forward(module), x, hx, seed=2)[0])
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=lambda m: f"result {i}: {m}")


def test_the_program_does_not_grow_with_the_sequence(dev):
    # (the input's one product per layer is lowered by its row count, as eager's
    # GEMM orders it: the cells' activations tell an unrolled sequence apart)
    torch.manual_seed(0)
    module = torch.nn.LSTM(5, 4, num_layers=2).to(dev)
    counts = []
    for steps in (3, 12):
        out, (h, c) = module(torch.randn(steps, 2, 5).to(dev))
        text = ir_text([out, h, c])
        counts.append((text.count('"lazy.tanh"'), text.count('"lazy.logistic"')))
    assert counts == [(4, 6), (4, 6)], counts  # a tanh and three sigmoids a layer, and the cell state's tanh


def test_arguments_the_loops_do_not_take_get_the_composites_error(dev):
    module = torch.nn.LSTM(5, 4).to(dev)
    x = torch.randn(3, 2, 5).to(dev)
    bad = (torch.zeros(1, 2, 7).to(dev), torch.zeros(1, 2, 4).to(dev))
    with pytest.raises(RuntimeError) as lazy:
        torch.lstm(x, bad, module._flat_weights, True, 1, 0.0, False, False, False)
    eager = torch.nn.LSTM(5, 4)
    with pytest.raises(RuntimeError) as cpu:
        torch.lstm(x.cpu(), tuple(t.cpu() for t in bad), eager._flat_weights, True, 1, 0.0, False, False, False)
    assert type(lazy.value) is type(cpu.value)


def test_a_layers_loop_bodies_are_traced_once(dev, monkeypatch):
    # (each call traced the cell twice, and twice more with its backward)
    from lazycore.trace import control

    control.BODIES.clear()  # (other tests' layers of these types)
    torch.manual_seed(0)
    module = torch.nn.GRU(5, 4, num_layers=2).to(dev)
    traces = []
    original = control._traced
    monkeypatch.setattr(control, "_traced", lambda *a, **k: traces.append(a[1]) or original(*a, **k))
    sums = []
    for step in range(3):
        before = len(traces)
        out, h = module(torch.randn(6, 3, 5).to(dev))
        (out.square().sum() + h.sum()).backward()
        sums.append(len(traces) - before)
        with torch.no_grad():
            for p in module.parameters():
                p -= 0.1 * p.grad
                p.grad = None
    assert sums[0] > 0 and sums[1:] == [0, 0], sums


def test_a_gradient_of_a_gradient_through_the_loops(dev):
    # (a gradient penalty: the backward is itself differentiated; the reverse
    # loop is not, so such a backward is taken from the steps unrolled)
    torch.manual_seed(0)
    eager = torch.nn.LSTM(3, 4, num_layers=2)
    lazy = copy.deepcopy(eager).to(dev)
    x = torch.randn(5, 2, 3)

    def penalised(module, x):
        x = x.clone().requires_grad_()
        out, _ = module(x)
        g, = torch.autograd.grad(out.sum(), x, create_graph=True)
        g.square().sum().backward()
        return [p.grad.detach().cpu() for p in module.parameters()]

    want = penalised(eager, x)
    got = penalised(lazy, x.to(dev))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


# CI: [GRU] takes the same path (forward AD runs the composite; its tangents through the chunks of a gate product)
@pytest.mark.parametrize("cls", [torch.nn.GRU, pytest.param(torch.nn.LSTM, marks=BY_HAND)])
def test_forward_mode_ad_through_the_layers_gives_eagers_tangents(dev, cls):
    # (a loop's autograd has no forward formula: the composite runs, whose
    # cells add into chunks of a product; those chunks were copies, and a
    # tangent made for one of them was cut to its own extent: 0.04 off)
    import torch.autograd.forward_ad as fwAD

    torch.manual_seed(0)
    eager = cls(5, 4, num_layers=2)
    lazy = copy.deepcopy(eager).to(dev)
    x, t = torch.randn(6, 3, 5), torch.randn(6, 3, 5)

    def tangents(module, device):
        with fwAD.dual_level():
            out, _ = module(fwAD.make_dual(x.clone().to(device), t.clone().to(device)))
            primal, tangent = fwAD.unpack_dual(out)
            return primal.detach().cpu(), tangent.cpu()

    with torch.backends.mkldnn.flags(enabled=False):
        want = tangents(eager, "cpu")
    got = tangents(lazy, dev)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
