"""Packed sequences on the lazy device (frontends/torch/ops/packed.py and the
recurrent layers' packed forms in ops/recurrent.py): ``pack_padded_sequence``
and ``pad_packed_sequence`` give eager's values, gradients and errors; LSTM,
GRU and RNN layers over a packed batch give eager CPU's outputs, final states
and gradients with one loop per layer and direction; and a training loop over
batches of other lengths runs a bounded number of programs, where it compiled
one every step.

``batch_sizes`` stays a CPU tensor, as for a CUDA input, so ``PackedSequence``
takes it (issue 41: run as a fallback, every result came back on the lazy
device and torch's ``PackedSequence`` raised ``ValueError: batch_sizes should
always be on CPU`` at the user's ``pack_padded_sequence`` call)."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import lazycore
from lazycore.observe import metrics
from lazycore.observe.inspect_graph import ir_text

sys.path.insert(0, str(Path(__file__).parent))
from _bits import BY_HAND  # noqa: E402
from _recurrent_inputs import inputs as _inputs, on as _on  # noqa: E402

aten = torch.ops.aten

_CASES = {
    "lstm": (torch.nn.LSTM, dict(num_layers=2)),
    "lstm_bidirectional_batch_first": (torch.nn.LSTM, dict(bidirectional=True, batch_first=True, num_layers=2)),
    "lstm_projection_no_bias": (torch.nn.LSTM, dict(proj_size=3, bias=False, bidirectional=True)),
    "gru": (torch.nn.GRU, dict(num_layers=2, bidirectional=True)),
    "rnn_tanh": (torch.nn.RNN, dict(batch_first=True)),
    "rnn_relu_no_bias": (torch.nn.RNN, dict(nonlinearity="relu", bias=False, num_layers=2)),
}

_LENGTHS = torch.tensor([4, 6, 1, 4, 3])  # (unsorted: packing sorts them, the layers take the permuted states)


def _results(module, x, hx, seed=1):
    """The padded output, the final states and the gradients of a loss of
    them for the input, the initial states and the parameters, on the CPU."""
    torch.manual_seed(seed)
    packed = pack_padded_sequence(x, _LENGTHS, batch_first=module.batch_first, enforce_sorted=False)
    out, finals = module(packed, hx)
    padded, lengths = pad_packed_sequence(out, batch_first=module.batch_first)
    assert torch.equal(lengths, _LENGTHS)
    finals = finals if isinstance(finals, tuple) else (finals,)
    loss = padded.square().sum() + sum(f.sin().sum() for f in finals) + out.data.cos().sum()
    inputs = [x, *(hx if isinstance(hx, tuple) else (hx,)), *module.parameters()]
    return [t.detach().cpu() for t in (padded, *finals, *torch.autograd.grad(loss, inputs))]


# CI (lstm_bidirectional_batch_first): [lstm], [gru] (2 bidirectional layers), test_pack_and_pad_...[True] (batch_first)
@pytest.mark.parametrize("name", [pytest.param(n, marks=BY_HAND) if n == "lstm_bidirectional_batch_first" else n
                                  for n in _CASES])
def test_packed_layers_give_eager_cpus_values(dev, name):
    cls, kwargs = _CASES[name]
    torch.manual_seed(0)
    eager = cls(5, 4, **kwargs)
    lazy = copy.deepcopy(eager).to(dev)
    x, hx = _inputs(eager, batch=len(_LENGTHS))
    with torch.backends.mkldnn.flags(enabled=False):
        want = _results(eager, *_on("cpu", x, hx))
    x, hx = _on(dev, x, hx)
    before = metrics.counters().get("fallbacks", 0)
    got = _results(lazy, x, hx)
    assert metrics.counters().get("fallbacks", 0) == before
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}, result {i}: {m}")


def test_packed_layers_run_one_loop_a_layer_and_direction(dev):
    torch.manual_seed(0)
    module = torch.nn.LSTM(5, 4, num_layers=2, bidirectional=True).to(dev)
    sizes = []
    for steps, lengths in ((4, [4, 2, 1]), (12, [12, 9, 3])):
        packed = pack_padded_sequence(torch.randn(steps, 3, 5).to(dev), torch.tensor(lengths))
        out, (h, c) = module(packed)
        text = ir_text([out.data, h, c])
        assert text.count("stablehlo.while") == 4
        sizes.append((text.count('"lazy.tanh"'), text.count('"lazy.logistic"')))
    assert sizes[0] == sizes[1], sizes  # (the cell once a loop, not once a step)


def test_dropout_between_packed_layers_draws_as_the_composite(dev):
    torch.manual_seed(0)
    module = torch.nn.GRU(5, 4, num_layers=3, dropout=0.5).to(dev)
    x = torch.randn(6, 5, 5).to(dev)

    def run(forward, seed):
        torch.manual_seed(seed)
        packed = pack_padded_sequence(x, _LENGTHS, enforce_sorted=False)
        data, h = forward(packed.data, packed.batch_sizes)
        return data.cpu(), h.cpu()

    def composite(data, sizes):
        m = module
        return aten.gru.data._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, data, sizes,
                                    torch.zeros(3, 5, 4, device=dev), m._flat_weights, True, 3, 0.5, True, False)

    def loops(data, sizes):
        return torch.gru(data, sizes, torch.zeros(3, 5, 4, device=dev), module._flat_weights, True, 3, 0.5, True,
                         False)

    got, want = run(loops, 1), run(composite, 1)
    assert not torch.equal(got[0], run(loops, 2)[0])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_give_eagers_values_and_gradients(dev, batch_first):
    torch.manual_seed(0)
    lengths = torch.tensor([5, 5, 3, 1])
    x = torch.randn((4, 5, 2, 3) if batch_first else (5, 4, 2, 3))

    def run(x, device):
        x = x.to(device).requires_grad_()
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first)
        padded, got_lengths = pad_packed_sequence(packed, batch_first=batch_first, padding_value=-2.5,
                                                  total_length=7)
        (g,) = torch.autograd.grad((padded * torch.arange(padded.numel(), device=device).view(padded.shape)).sum()
                                   + packed.data.square().sum(), x)
        return packed.data.cpu(), packed.batch_sizes, padded.detach().cpu(), padded.stride(), got_lengths, g.cpu()

    want, got = run(x, "cpu"), run(x, dev)
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and torch.equal(g, w)
        else:
            assert g == w


def test_pack_and_pad_integer_sequences(dev):
    tokens = torch.randint(0, 100, (6, 3))
    lengths = torch.tensor([6, 2, 4])
    want = pack_padded_sequence(tokens, lengths, enforce_sorted=False)
    got = pack_padded_sequence(tokens.to(dev), lengths, enforce_sorted=False)
    assert torch.equal(got.data.cpu(), want.data) and torch.equal(got.batch_sizes, want.batch_sizes)
    assert got.batch_sizes.device.type == "cpu"
    padded, _ = pad_packed_sequence(got, padding_value=-1)
    assert padded.dtype == torch.int64
    assert torch.equal(padded.cpu(), pad_packed_sequence(want, padding_value=-1)[0])


@pytest.mark.parametrize("lengths, total", [([3, 4, 1], None), ([4, 0, 1], None), ([4, 3, 1], 3)])
def test_bad_lengths_raise_eagers_error(dev, lengths, total):
    x = torch.randn(4, 3, 2)

    def run(device):
        packed = pack_padded_sequence(x.to(device), torch.tensor(lengths))
        return pad_packed_sequence(packed, total_length=total)

    with pytest.raises(Exception) as cpu:
        run("cpu")
    with pytest.raises(Exception) as lazy:
        run(dev)
    assert type(lazy.value) is type(cpu.value) and str(lazy.value) == str(cpu.value)


def test_lengths_longer_than_the_input_raise(dev):
    # (eager's CPU kernel reads past the input here: garbage, no error)
    with pytest.raises(RuntimeError, match="longer than the input"):
        pack_padded_sequence(torch.randn(4, 3, 2).to(dev), torch.tensor([5, 3, 1]))


class _Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 8)
        self.rnn = torch.nn.LSTM(8, 8, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, tokens, lengths):
        if isinstance(tokens, torch.nn.utils.rnn.PackedSequence):  # (packed by the loader, on the CPU)
            packed = tokens._replace(data=self.emb(tokens.data))
        else:
            packed = pack_padded_sequence(self.emb(tokens), lengths, batch_first=True, enforce_sorted=False)
        out, (h, _) = self.rnn(packed)
        padded, _ = pad_packed_sequence(out, batch_first=True)
        return self.head(padded.mean(1)) + h.sum(0).sum(1, keepdim=True)


def _train(model, device, batches, step_end=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, compiles = [], []
    for tokens, lengths, labels in batches:
        before = metrics.counters().get("compiles", 0)
        loss = torch.nn.functional.cross_entropy(model(tokens.to(device), lengths), labels.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step_end is not None:
            step_end()
        losses.append(loss.item())
        compiles.append(metrics.counters().get("compiles", 0) - before)
    return losses, compiles


@pytest.mark.parametrize("where", ["device", pytest.param("loader", marks=BY_HAND)])
def test_a_training_loop_over_other_lengths_runs_a_bounded_number_of_programs(dev, tmp_path, monkeypatch, where):
    # (every batch of other lengths compiled its own program: 3-11 s a step;
    # "loader": a collate function packs on the CPU and the loop moves the
    # PackedSequence to the device, its data an input of the packed count)
    monkeypatch.setenv("LAZYCORE_CACHE_DIR", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    longest = [20, 3, 17, 12, 20, 9, 15, 11, 19, 14, 16, 13, 18, 10]
    batches = []
    for n in longest:
        lengths = torch.randint(2, n + 1, (6,), generator=g)
        lengths[int(torch.randint(0, 6, (1,), generator=g))] = n
        tokens = torch.randint(0, 50, (6, 20), generator=g)
        if where == "loader":
            tokens = pack_padded_sequence(tokens, lengths, batch_first=True, enforce_sorted=False)
        batches.append((tokens, lengths, torch.randint(0, 3, (6,), generator=g)))
    torch.manual_seed(0)
    eager = _Tagger()
    lazy = copy.deepcopy(eager).to(dev)
    with torch.backends.mkldnn.flags(enabled=False):
        want, _ = _train(eager, "cpu", batches)
    got, compiles = _train(lazy, dev, batches, lazycore.mark_step)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert sum(compiles) <= 8 and compiles[-3:] == [0, 0, 0], compiles  # (14 before: one a batch)


# CI: test_a_training_loop_over_other_lengths_...[device] (packed counts), test_random_under_buckets' dropout step (padded draws)
@BY_HAND
def test_dropout_between_packed_layers_runs_a_bounded_number_of_programs(dev):
    """A two-layer tagger with dropout between its layers: dropout's bits over
    the packed count are padded with it (one program a batch before: 11-13 s
    a step; tests/torch/test_random_under_buckets.py checks that a padded
    draw gives the unpadded draw's numbers)."""
    g = torch.Generator().manual_seed(3)
    batches = []
    for n in (20, 7, 17, 12, 20, 9, 15, 11, 19):
        lengths = torch.randint(2, n + 1, (6,), generator=g)
        lengths[0] = n
        batches.append((torch.randint(0, 50, (6, 20), generator=g), lengths, torch.randint(0, 3, (6,), generator=g)))
    torch.manual_seed(0)
    model = _Tagger()
    model.rnn = torch.nn.LSTM(8, 8, num_layers=2, dropout=0.3, batch_first=True, bidirectional=True)
    losses, compiles = _train(model.to(dev), dev, batches, lazycore.mark_step)
    assert all(math.isfinite(v) for v in losses)
    assert sum(compiles) <= 4 and compiles[-4:] == [0, 0, 0, 0], compiles


def _batch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 4, generator=g)
    lengths = torch.tensor([5, 2, 4])  # unsorted: enforce_sorted=False sorts them
    return x, lengths


def test_packed_data_lazy_and_batch_sizes_on_the_cpu(dev, no_fallback):
    x, lengths = _batch()
    want = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    got = pack_padded_sequence(x.to(dev), lengths, batch_first=True, enforce_sorted=False)
    assert got.data.device == dev
    assert got.batch_sizes.device.type == "cpu"
    assert torch.equal(got.batch_sizes, want.batch_sizes)
    assert torch.equal(got.data.cpu(), want.data)
    assert torch.equal(got.sorted_indices.cpu(), want.sorted_indices)
    padded, sizes = pad_packed_sequence(got, batch_first=True)
    assert torch.equal(padded.cpu(), pad_packed_sequence(want, batch_first=True)[0])
    assert torch.equal(sizes, lengths)


# CI: test_packed_layers_give_eager_cpus_values[gru] takes the same path (a packed bidirectional GRU's values, gradients)
@BY_HAND
def test_a_packed_bidirectional_gru_trains_as_eager(dev, no_fallback):
    torch.manual_seed(0)
    rnn = torch.nn.GRU(4, 3, batch_first=True, bidirectional=True)
    eager = copy.deepcopy(rnn)
    lazy = rnn.to(dev)
    x, lengths = _batch()

    def loss(model, x):
        out, h = model(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        seq, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return seq.pow(2).sum() + h.sum()

    want = loss(eager, x)
    want.backward()
    got = loss(lazy, x.to(dev))
    got.backward()
    lazycore.mark_step()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(lazy.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_under_inference_mode_the_layers_run_as_loops(dev):
    # (autograd's keys are skipped there, and the kernels registered at them:
    # the composite unrolled every step, 33 s of compile for this model)
    torch.manual_seed(0)
    eager = torch.nn.LSTM(5, 4, num_layers=2, bidirectional=True).eval()
    lazy = copy.deepcopy(eager).to(dev)
    x, lengths = torch.randn(6, 3, 5), torch.tensor([6, 4, 2])
    with torch.inference_mode(), torch.backends.mkldnn.flags(enabled=False):
        want = [eager(x)[0], pad_packed_sequence(eager(pack_padded_sequence(x, lengths))[0])[0]]
        outs = [lazy(x.to(dev))[0], pad_packed_sequence(lazy(pack_padded_sequence(x.to(dev), lengths))[0])[0]]
        assert ir_text(outs).count("stablehlo.while") == 8
    for g, w in zip(outs, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)
