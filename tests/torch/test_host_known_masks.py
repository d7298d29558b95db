"""Boolean masks whose values are known on the host (issue 39): a mask the user
uploaded (``mask.to(lazy)``) or a CPU mask gives ``x[mask]``, ``x[mask] = v``,
``masked_select``, ``nonzero`` and ``torch.where(cond)`` their shapes without
a barrier or a fallback: its nonzero indices are computed on the host and the
op is a static-shape gather or scatter in the step's one program.

Before, each of these went to the fallback, whose barrier computed everything
pending: a GCN's ``F.cross_entropy(out[train_mask], y[train_mask])`` made
three programs and three fallbacks a step.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.frontends.torch.tensor import read
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)

pytestmark = pytest.mark.usefixtures("clean_runtime")

N, D, H, C = 12, 5, 8, 3


def _fallbacks() -> int:
    return sum(sum(v.values()) for v in metrics.fallbacks().values())


def _counts():
    c = metrics.counters()
    return c.get("executions", 0), c.get("compiles", 0), _fallbacks()


class _GCN(torch.nn.Module):
    """Two graph convolutions by message passing: each node sums its in-neighbours'
    features (``index_add_`` over the edges), weighted by the edge's norm."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(D, H)
        self.l2 = torch.nn.Linear(H, C)

    @staticmethod
    def propagate(h, src, dst, norm):
        return torch.zeros_like(h).index_add_(0, dst, h[src] * norm[:, None])

    def forward(self, x, src, dst, norm):
        h = F.relu(self.propagate(self.l1(x), src, dst, norm))
        return self.propagate(self.l2(h), src, dst, norm)


def _graph():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g)
    src = torch.randint(0, N, (30,), generator=g)
    dst = torch.randint(0, N, (30,), generator=g)
    loops = torch.arange(N)
    src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
    deg = torch.zeros(N).index_add_(0, dst, torch.ones(len(dst)))
    norm = deg[src].rsqrt() * deg[dst].rsqrt()
    y = torch.randint(0, C, (N,), generator=g)
    train = torch.rand(N, generator=g) < 0.5
    return x, src, dst, norm, y, train


def _train(device, steps=4):
    torch.manual_seed(0)
    model = _GCN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    x, src, dst, norm, y, train = (t.to(device) for t in _graph())
    losses, counts = [], []
    for _ in range(steps):
        before = _counts()
        out = model(x, src, dst, norm)
        loss = F.cross_entropy(out[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if device != "cpu":
            lazycore.mark_step()
        after = _counts()
        counts.append(tuple(a - b for a, b in zip(after, before)))
    return model, losses, counts


# CI: test_a_dense_gcn_step_matches_eager_in_one_program takes the same path (a masked loss's step, one program)
@BY_HAND
def test_a_gcn_step_matches_eager_in_one_program_without_fallbacks(dev):
    eager, want, _ = _train("cpu")
    model, got, counts = _train(dev)
    torch.testing.assert_close(torch.stack([v.cpu() for v in got]), torch.stack(want), rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
    programs = [c[0] for c in counts]
    assert programs == [1] * len(counts), counts
    assert [c[2] for c in counts] == [0] * len(counts), metrics.fallbacks()
    assert [c[1] for c in counts[2:]] == [0] * (len(counts) - 2), counts


def test_a_dense_gcn_step_matches_eager_in_one_program(dev):
    x, src, dst, norm, y, train = _graph()
    adj = torch.zeros(N, N).index_put_((dst, src), norm, accumulate=True)
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(D, C))
    model = copy.deepcopy(eager).to(dev)

    def loss_of(m, x, adj, y, train):
        out = adj @ m(x)
        return F.nll_loss(F.log_softmax(out, 1)[train], y[train])

    want = loss_of(eager, x, adj, y, train)
    want.backward()
    args = [t.to(dev) for t in (x, adj, y, train)]
    lazycore.mark_step()
    before = _counts()
    got = loss_of(model, *args)
    got.backward()
    lazycore.mark_step()
    after = _counts()
    assert after[0] - before[0] == 1 and after[2] == before[2], (before, after, metrics.fallbacks())
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(model[0].weight.grad.cpu(), eager[0].weight.grad, rtol=1e-5, atol=1e-6)


def test_a_mask_changed_in_place_on_the_device_gives_eager_values(dev):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, 4, generator=g)
    mask = torch.rand(N, generator=g) < 0.5
    lx, lmask = x.to(dev), mask.to(dev)
    fallbacks = _fallbacks()
    torch.testing.assert_close(lx[lmask].cpu(), x[mask])  # kept for this mask's value
    assert _fallbacks() == fallbacks, metrics.fallbacks()
    # in place on the device, pending: the values are computed, not the kept ones used
    lmask[:4] = ~lmask[:4]
    mask[:4] = ~mask[:4]
    torch.testing.assert_close(lx[lmask].cpu(), x[mask])
    # computed, device data again: its own indices, without a fallback
    lmask.logical_not_()
    mask.logical_not_()
    lazycore.mark_step()
    fallbacks = _fallbacks()
    torch.testing.assert_close(lx[lmask].cpu(), x[mask])
    lx[lmask] = torch.arange(float(int(mask.sum()) * 4)).reshape(-1, 4).to(dev)
    x[mask] = torch.arange(float(int(mask.sum()) * 4)).reshape(-1, 4)
    torch.testing.assert_close(lx.cpu(), x)
    assert _fallbacks() == fallbacks, metrics.fallbacks()


def test_a_new_mask_of_the_same_count_runs_the_same_program(dev):
    x = torch.randn(N, 3)
    lx = x.to(dev)
    lazycore.mark_step()
    compiles = []
    for seed in range(3):
        mask = torch.zeros(N, dtype=torch.bool)
        mask[torch.randperm(N, generator=torch.Generator().manual_seed(seed))[:5]] = True
        before = _counts()
        got = (lx[mask.to(dev)] * 2).sum(0)
        lazycore.mark_step()
        torch.testing.assert_close(got.cpu(), (x[mask] * 2).sum(0))
        after = _counts()
        compiles.append(after[1] - before[1])
        assert after[2] == before[2], metrics.fallbacks()
    assert compiles[1:] == [0, 0], compiles


def test_mask_ops_on_host_known_masks_give_eager_values_without_fallbacks(dev):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 5, generator=g)
    mask2 = torch.rand(4, 5, generator=g) < 0.4
    rows = torch.tensor([True, False, True, True])
    lx, lm2, lrows = x.to(dev), mask2.to(dev), rows.to(dev)
    lazycore.mark_step()
    fallbacks = _fallbacks()
    cases = [
        (lambda a, m, r: a[m], "x[mask2]"),
        (lambda a, m, r: a[r], "x[rows]"),
        (lambda a, m, r: a[:, m[0]], "x[:, mask]"),
        (lambda a, m, r: a[r, 1:3], "x[rows, 1:3]"),
        (lambda a, m, r: a.masked_select(m), "masked_select"),
        (lambda a, m, r: a.masked_select(m[1]), "masked_select broadcast"),
        (lambda a, m, r: m.nonzero(), "nonzero"),
        (lambda a, m, r: torch.stack(torch.where(m)), "where(cond)"),
        (lambda a, m, r: torch.argwhere(r), "argwhere"),
        (lambda a, m, r: a.index_put((r,), a[:3] * 2), "index_put rows"),
        (lambda a, m, r: a.index_put((m,), a[m] + 1, accumulate=True), "index_put accumulate"),
        (lambda a, m, r: a[rows], "x[cpu mask]"),
    ]
    for fn, name in cases:
        want = fn(x, mask2, rows)
        got = fn(lx, lm2, lrows)
        assert got.device == lx.device, name
        torch.testing.assert_close(got.cpu(), want, msg=name)
    assert _fallbacks() == fallbacks, metrics.fallbacks()


def test_a_mask_of_the_wrong_shape_raises_eager_error(dev):
    x = torch.randn(4, 5)
    mask = torch.ones(3, dtype=torch.bool)
    with pytest.raises(IndexError) as want:
        x[mask]
    with pytest.raises(IndexError) as got:
        x.to(dev)[mask.to(dev)]
    assert str(got.value) == str(want.value)


def test_a_mask_computed_on_the_device_is_read_alone_and_the_step_stays_whole(dev):
    """``keep > 0.5`` of an uploaded tensor: only the mask is computed (a program
    of its own), not the forward pending before it, and no op falls back."""
    torch.manual_seed(0)
    x, y, keep = torch.randn(N, D), torch.randint(0, C, (N,)), torch.rand(N)
    eager = torch.nn.Linear(D, C)
    model = copy.deepcopy(eager).to(dev)
    want = F.cross_entropy(eager(x)[keep > 0.5], y[keep > 0.5])
    want.backward()
    lx, ly, lkeep = x.to(dev), y.to(dev), keep.to(dev)
    lazycore.mark_step()
    before = _counts()
    out = model(lx)
    mask = lkeep > 0.5
    picked = out[mask]
    assert read(out).pending, "the forward was run to read the mask"
    got = F.cross_entropy(picked, ly[mask])
    got.backward()
    lazycore.mark_step()
    after = _counts()
    assert after[2] == before[2], metrics.fallbacks()
    assert after[0] - before[0] == 1, (before, after)  # the step's (the mask: from the upload's host copy)
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(model.weight.grad.cpu(), eager.weight.grad, rtol=1e-5, atol=1e-6)


def test_pad_packed_sequence_does_not_cut_the_step(dev):
    """pad_packed_sequence reads ``unsorted_indices`` (the inverse of the order
    pack_padded_sequence uploaded) on the host: that value alone is computed,
    the recurrent network's pending output is not."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(0)
    rnn = torch.nn.GRU(4, 3, batch_first=True)
    eager = copy.deepcopy(rnn)
    lazy = rnn.to(dev)
    x, lengths = torch.randn(3, 5, 4), torch.tensor([5, 2, 4])

    def run(model, x):
        out, _ = model(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        return pad_packed_sequence(out, batch_first=True)[0]

    want = run(eager, x)
    lx = x.to(dev)
    lazycore.mark_step()
    got = run(lazy, lx)
    assert read(got).pending, "pad_packed_sequence ran the recurrent network to read its order"
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-5, atol=1e-6)


def test_a_mask_made_from_pending_work_and_an_empty_mask_give_eager_values(dev):
    """``out[out.argmax(1) == y]``: the mask shares the forward with ``out``, so the
    barrier computes both once (not a fallback); an all-false mask selects nothing."""
    torch.manual_seed(0)
    x, y = torch.randn(N, D), torch.randint(0, C, (N,))
    eager = torch.nn.Linear(D, C)
    model = copy.deepcopy(eager).to(dev)
    lx, ly = x.to(dev), y.to(dev)
    none = torch.zeros(N, dtype=torch.bool)
    lazycore.mark_step()
    fallbacks = _fallbacks()
    out = model(lx)
    got = out[out.argmax(1) == ly].sum() + out[none.to(dev)].sum()
    got.backward()
    want_out = eager(x)
    want = want_out[want_out.argmax(1) == y].sum() + want_out[none].sum()
    want.backward()
    lazycore.mark_step()
    assert _fallbacks() == fallbacks, metrics.fallbacks()
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    torch.testing.assert_close(model.weight.grad.cpu(), eager.weight.grad)


def test_a_mask_sharing_pending_work_with_a_live_value_is_read_by_the_barrier(dev):
    """``out.argmax(1) == y`` with ``out`` gone but the loss made from it pending:
    the barrier computes the forward once for both, where a program of the
    mask's own would compute it a second time."""
    torch.manual_seed(0)
    x, y = torch.randn(N, D), torch.randint(0, C, (N,))
    model = torch.nn.Linear(D, C).to(dev)
    lx, ly = x.to(dev), y.to(dev)
    lazycore.mark_step()
    out = model(lx)
    loss = out.sum()  # (its backward keeps no handle of ``out``)
    mask = out.argmax(1) == ly
    del out
    picked = lx[mask]
    assert not read(loss).pending, "the mask was computed apart from the forward it shares"
    torch.testing.assert_close(picked.cpu(), x[model(lx).argmax(1).cpu() == y])
