"""``F.ctc_loss`` on the lazy device (issue 39): ``aten._ctc_loss`` and
``_ctc_loss_backward`` ran eager's CPU kernel every step of a speech
model's training. Losses and gradients are eager's, with no fallback, for
every reduction, ``zero_infinity`` both ways, a blank other than 0, padded
(2-D) and concatenated (1-D) targets, repeated labels, empty targets and
alignments that cannot exist."""

import pytest
import torch
import torch.nn.functional as F

from _bits import BY_HAND  # (tests/ is on the path)

T, N, C = 14, 4, 6
INPUT_LENGTHS = [14, 11, 9, 6]
TARGET_LENGTHS = [5, 3, 0, 2]


def _targets(blank, seed=0, lengths=TARGET_LENGTHS, repeats=True):
    g = torch.Generator().manual_seed(seed)
    labels = [c for c in range(C) if c != blank]
    rows = []
    for n, k in enumerate(lengths):
        row = [labels[int(i)] for i in torch.randint(0, len(labels), (k,), generator=g)]
        if repeats and k >= 2:
            row[1] = row[0]  # a repeated label: the path needs a blank between them
        rows.append(row)
    return rows


def _padded(rows, fill=0):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [fill] * (width - len(r)) for r in rows], dtype=torch.long)


def _concatenated(rows):
    return torch.tensor([c for r in rows for c in r], dtype=torch.long)


def _loss_and_grad(dev, logits, targets, il, tl, **kw):
    x = logits.clone().to(dev).requires_grad_()
    loss = F.ctc_loss(x.log_softmax(-1), targets.to(dev), il, tl, **kw)
    loss.backward(torch.ones_like(loss))
    return loss.detach().cpu(), x.grad.cpu()


def _compare(dev, logits, targets, il, tl, tol, **kw):
    want = _loss_and_grad("cpu", logits, targets, il, tl, **kw)
    got = _loss_and_grad(dev, logits, targets, il, tl, **kw)
    torch.testing.assert_close(got[0], want[0], **tol, equal_nan=True)
    torch.testing.assert_close(got[1], want[1], **tol, equal_nan=True)
    return want


def _tol(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype is torch.float64 else dict(rtol=2e-5, atol=2e-6)


def _case(dev, reduction="mean", zero_infinity=False, blank=0, layout="padded", dtype=torch.float64):
    logits = torch.randn(T, N, C, generator=torch.Generator().manual_seed(1), dtype=dtype)
    rows = _targets(blank)
    targets = _padded(rows) if layout == "padded" else _concatenated(rows)
    _compare(dev, logits, targets, INPUT_LENGTHS, TARGET_LENGTHS, _tol(dtype), blank=blank,
             reduction=reduction, zero_infinity=zero_infinity)


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_every_reduction(dev, no_fallback, reduction, zero_infinity):
    _case(dev, reduction, zero_infinity)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("blank", [0, 3, C - 1])
def test_blanks_layouts_and_types(dev, no_fallback, blank, layout, dtype):
    _case(dev, "sum", False, blank, layout, dtype)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_an_alignment_that_cannot_exist(dev, no_fallback, zero_infinity):
    """A target longer than its input, and four repeats (seven steps with the
    blanks between them) in five steps:
    an infinite loss, and eager's gradient for it (NaN, or 0 with
    ``zero_infinity``); the other samples are unaffected."""
    logits = torch.randn(5, 3, C, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    targets = torch.tensor([[1, 2, 3, 4, 5, 1], [2, 2, 2, 2, 0, 0], [1, 2, 0, 0, 0, 0]])
    loss, grad = _compare(dev, logits, targets, [5, 5, 5], [6, 4, 2], _tol(torch.float64),
                          reduction="none", zero_infinity=zero_infinity)
    assert (loss[:2] == 0).all() if zero_infinity else torch.isinf(loss[:2]).all()
    assert torch.isfinite(loss[2])


def test_unbatched_input(dev, no_fallback):
    logits = torch.randn(T, C, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    targets = torch.tensor([1, 1, 4, 2])
    _compare(dev, logits, targets, [T], [4], _tol(torch.float64))
    _compare(dev, logits, targets[:3], torch.tensor(T - 3), torch.tensor(3), _tol(torch.float64))


def test_one_time_step_and_tensor_lengths(dev, no_fallback):
    logits = torch.randn(1, 3, C, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    targets = torch.tensor([[2], [0], [3]])
    _compare(dev, logits, targets, torch.tensor([1, 1, 1]), torch.tensor([1, 0, 1]), _tol(torch.float64),
             blank=0, reduction="sum")


def test_long_sequences_in_float32(dev, no_fallback):
    """200 time steps, 40 classes: the log-space recursion keeps float32's
    accuracy where the probabilities themselves underflow."""
    logits = torch.randn(200, 3, 40, generator=torch.Generator().manual_seed(5)) * 3
    rows = [[(7 * i + n) % 39 + 1 for i in range(k)] for n, k in enumerate([60, 31, 1])]
    _compare(dev, logits, _padded(rows), [200, 150, 90], [60, 31, 1], dict(rtol=2e-5, atol=2e-6))


# CI: test_every_reduction, test_blanks_layouts_and_types (CTC's losses, gradients); test_recurrent_loops[gru] (the GRU)
@BY_HAND
def test_a_speech_models_training_steps(dev, no_fallback):
    """A GRU and a linear layer trained with CTC for three Adam steps: every
    loss and parameter is eager's."""
    torch.manual_seed(6)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(8, 16)
            self.out = torch.nn.Linear(16, C)

        def forward(self, x):
            return self.out(self.rnn(x)[0]).log_softmax(-1)

    eager = Model()
    lazy = Model().to(dev)
    lazy.load_state_dict(eager.state_dict())
    x = torch.randn(T, N, 8)
    targets = _concatenated(_targets(0, seed=7))
    losses = {}
    for model, d in ((eager, "cpu"), (lazy, dev)):
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses[d] = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.ctc_loss(model(x.to(d)), targets.to(d), INPUT_LENGTHS, TARGET_LENGTHS)
            loss.backward()
            opt.step()
            losses[d].append(loss.item())
    assert max(abs(a - b) for a, b in zip(losses[dev], losses["cpu"])) < 1e-5, losses
    for (name, pe), pl in zip(eager.named_parameters(), lazy.parameters()):
        torch.testing.assert_close(pl.detach().cpu(), pe.detach(), rtol=1e-4, atol=1e-5, msg=name)
