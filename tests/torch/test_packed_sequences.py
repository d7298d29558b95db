"""``pack_padded_sequence`` on lazy tensors (issue 41): its ``batch_sizes`` stays a
CPU tensor, as for a CUDA input, so ``PackedSequence`` takes it and a packed
RNN trains with eager's values.

``aten._pack_padded_sequence`` is device-generic ATen that makes ``batch_sizes``
from the CPU lengths; run as a fallback, every result came back on the lazy
device and torch's ``PackedSequence`` raised ``ValueError: batch_sizes should
always be on CPU`` at the user's ``pack_padded_sequence`` call.
"""

from __future__ import annotations

import copy

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import lazycore


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
