"""nn.TransformerEncoder with a key padding mask gives eager's output on the lazy device (issue 39).

In eval mode without grad, eager's sparsity fast path runs the layers on a
nested tensor and pads the result with zeros: padded positions are 0 (the
final norm's value of 0 with a norm). Where eager does not take that path
(training, a mask whose padding is not at the end of every row, grad
enabled), they hold what the layers computed, on both devices. Before
encoder_padding, the lazy device's padded positions were computed values, and
eager's alignment check on the mask was a counted fallback that cut the step.
"""

from __future__ import annotations

import copy

import pytest
import torch

import lazycore

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")  # (eager's fast path)

D, HEADS, LENGTHS = 8, 2, (5, 3, 1)


def _encoder(norm: bool, **kwargs):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=16, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2, norm=torch.nn.LayerNorm(D) if norm else None,
                                       **kwargs)


def _inputs(left_aligned: bool = True):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(len(LENGTHS), max(LENGTHS), D, generator=g)
    pos = torch.arange(max(LENGTHS))
    padded = pos >= torch.tensor(LENGTHS).unsqueeze(1)
    return x, (padded if left_aligned else padded.flip(1))


def _both(model, x, padded, dev, grad=False):
    lazy_model = copy.deepcopy(model).to(dev)
    with torch.set_grad_enabled(grad):
        want = model(x, src_key_padding_mask=padded)
        got = lazy_model(x.to(dev), src_key_padding_mask=padded.to(dev))
        got = got.detach().cpu()
    lazycore.mark_step()
    return got, want.detach()


@pytest.mark.parametrize("norm", [False, True])
def test_eval_with_a_padding_mask_pads_with_zeros_as_eager(dev, norm):
    model = _encoder(norm).eval()
    x, padded = _inputs()
    got, want = _both(model, x, padded, dev)
    pad = want[padded]
    if norm:  # (norm of zeros: its bias)
        assert torch.equal(pad, model.norm.bias.detach().expand_as(pad))
    else:
        assert torch.equal(pad, torch.zeros_like(pad))  # eager's fast path ran
    assert torch.equal(got[padded], pad)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_float_mask_and_mask_check_off_pad_alike(dev):
    model = _encoder(False, mask_check=False).eval()
    x, padded = _inputs()
    mask = torch.zeros(padded.shape).masked_fill(padded, float("-inf"))
    got, want = _both(model, x, mask, dev)
    assert torch.equal(want[padded], torch.zeros_like(want[padded]))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_mask_check_off_keeps_each_rows_first_positions_as_eager(dev):
    # (eager's nested rows: the first count positions, whichever the mask marks)
    model = _encoder(False, mask_check=False).eval()
    x, padded = _inputs(left_aligned=False)
    got, want = _both(model, x, padded, dev)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["training", "not_left_aligned", "grad_enabled", "fast_path_off"])
def test_where_eager_takes_no_fast_path_padded_positions_are_computed(dev, case):
    model = _encoder(False)
    model.train(case == "training")
    x, padded = _inputs(left_aligned=case != "not_left_aligned")
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(case != "fast_path_off")
    try:
        got, want = _both(model, x, padded, dev, grad=case == "grad_enabled")
    finally:
        torch.backends.mha.set_fastpath_enabled(was)
    assert want[padded].abs().min() > 0  # (eager computed them)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_alignment_is_decided_on_the_device(dev):
    model = _encoder(False).eval().to(dev)
    x, padded = _inputs()
    x, padded = x.to(dev), padded.to(dev)
    lazycore.mark_step()
    counts = lazycore.metrics.counters()
    before = (counts.get("executions", 0), counts.get("fallbacks", 0))
    with torch.no_grad():
        y = model(x, src_key_padding_mask=padded)
    counts = lazycore.metrics.counters()
    assert (counts.get("executions", 0), counts.get("fallbacks", 0)) == before  # (no read of the mask)
    y.cpu()
