"""A user's own LSTM language model (issue 39): ``nn.Embedding`` -> a 2-layer
``nn.LSTM(batch_first=True)`` -> ``nn.Linear``, trained with SGD and
``clip_grad_norm_`` on the lazy device next to an eager copy: eager's losses
and parameters, no fallback, one program a step and no compile after the
warm-up (torch runs ``aten.lstm`` as its per-step cell math off CUDA)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import lazycore
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.observe import metrics

VOCAB, WIDTH, BATCH, SEQ, STEPS, WARMUP = 20, 8, 2, 5, 5, 2


class LanguageModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.lstm = torch.nn.LSTM(WIDTH, WIDTH, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        out, _ = self.lstm(self.embed(ids))
        return self.head(out)


def _train(model, batches, device, counts=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for ids in batches:
        before = metrics.counters()
        ids = ids.to(device)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        if counts is not None:
            lazycore.mark_step()
            after = metrics.counters()
            counts.append({k: after.get(k, 0) - before.get(k, 0) for k in ("compiles", "executions", "fallbacks")})
    return [float(v.cpu()) for v in losses]


# CI: test_recurrent_loops[lstm] (2 layers' loops, gradients), test_packed_sequences' [device] loop (an LSTM tagger trained)
@BY_HAND
def test_an_lstm_language_model_trains_as_eager(dev):
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g) for _ in range(STEPS)]
    torch.manual_seed(0)
    model = LanguageModel()
    eager = copy.deepcopy(model)
    lazy = model.to(dev)
    counts: list = []
    got = _train(lazy, batches, dev, counts)
    want = _train(eager, batches, "cpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    for (name, p), q in zip(lazy.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
    assert all(c["fallbacks"] == 0 for c in counts), counts
    assert all(c["compiles"] == 0 and c["executions"] == 1 for c in counts[WARMUP:]), counts
