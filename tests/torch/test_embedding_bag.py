"""``nn.EmbeddingBag`` / ``F.embedding_bag`` on the lazy device (issue 39):
eager's bags, gradients and errors, with no fallback (the forward and its
backward ran eager's CPU kernels: two programs a training step).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import lazycore

# indices 10 positions over a table of 12 rows: an empty bag in the middle
# (a repeated offset), and rows 0 (the padding row where one is set) and 7 twice
INDICES = torch.tensor([3, 0, 7, 7, 11, 2, 0, 5, 9, 1])
OFFSETS = torch.tensor([0, 3, 3, 6])

CASES = [
    dict(mode="sum"),
    dict(mode="sum", per_sample_weights=True),
    dict(mode="sum", padding_idx=0, per_sample_weights=True),
    dict(mode="mean"),
    dict(mode="mean", padding_idx=0),
    dict(mode="max"),
    dict(mode="max", padding_idx=0),
    dict(mode="mean", include_last_offset=True),
    dict(mode="sum", empty_last=True),
]


def _ids(case):
    return "-".join(f"{k}={v}" if v is not True else k for k, v in case.items())


def _run(case, dev, weight, psw):
    case = dict(case)
    offsets = OFFSETS
    if case.pop("include_last_offset", False):
        offsets = torch.cat([OFFSETS, torch.tensor([len(INDICES)])])
        case["include_last_offset"] = True
    if case.pop("empty_last", False):
        offsets = torch.cat([OFFSETS, torch.tensor([len(INDICES)])])  # a last bag with nothing in it
    if case.pop("per_sample_weights", False):
        case["per_sample_weights"] = psw
    to = (lambda t: t.to(dev)) if dev is not None else (lambda t: t)
    if "per_sample_weights" in case:
        case["per_sample_weights"] = to(case["per_sample_weights"])
    return F.embedding_bag(to(INDICES), weight, to(offsets), **case)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bags_and_gradients_are_eagers(case, dev, no_fallback):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(12, 5, generator=g)
    psw = torch.rand(len(INDICES), generator=g)
    up = torch.randn(5 if case.get("empty_last") else 4, 5, generator=g)
    eager_w, eager_psw = w.clone().requires_grad_(), psw.clone().requires_grad_()
    want = _run(case, None, eager_w, eager_psw)
    (want * up).sum().backward()
    lazy_w, lazy_psw = w.to(dev).requires_grad_(), psw.to(dev).requires_grad_()
    got = _run(case, dev, lazy_w, lazy_psw)
    (got * up.to(dev)).sum().backward()
    lazycore.mark_step()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(lazy_w.grad.cpu(), eager_w.grad, rtol=1e-6, atol=1e-6)
    if case.get("per_sample_weights"):
        torch.testing.assert_close(lazy_psw.grad.cpu(), eager_psw.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_the_bag_numbers_sizes_and_argmax_rows_are_eagers(mode, dev, no_fallback):
    # (in sum mode eager's CPU kernel leaves them empty or zero, and in mean mode its
    # max_indices is a copy of bag_size: the meta kernel, whose shapes the lazy results
    # have, makes that one empty)
    w = torch.randn(12, 5)
    w[7] = w[3]  # equal maxima in the first bag: the first position's row wins, as eager's strict >
    args = (INDICES, OFFSETS, False, {"mean": 1, "max": 2}[mode], False, None, False, 0)
    want = torch.ops.aten._embedding_bag(w, *args)
    got = torch.ops.aten._embedding_bag(w.to(dev), INDICES.to(dev), OFFSETS.to(dev), *args[2:])
    names = ("output", "offset2bag", "bag_size") + (("max_indices",) if mode == "max" else ())
    for name, a, b in zip(names, got, want):
        assert torch.equal(a.cpu(), b), (name, a.cpu(), b)


def test_a_two_dimensional_input_and_a_training_step(dev, no_fallback):
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.bag = torch.nn.EmbeddingBag(12, 6, mode="mean", padding_idx=0)
    model.out = torch.nn.Linear(6, 3)
    eager = copy.deepcopy(model)
    lazy = model.to(dev)
    ids = torch.tensor([[1, 4, 0, 0], [11, 3, 3, 7]])
    y = torch.tensor([2, 0])
    for m, d in ((eager, "cpu"), (lazy, dev)):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            F.cross_entropy(m.out(m.bag(ids.to(d))), y.to(d)).backward()
            opt.step()
            opt.zero_grad()
            lazycore.mark_step()
    for (name, p), q in zip(lazy.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("indices, offsets, mode", [
    ([1, 12, 3], [0, 2], "sum"),
    ([1, -1, 3], [0, 2], "max"),
    ([1, 2, 3], [1, 2], "mean"),
    ([1, 2, 3], [0, 5], "sum"),
], ids=["index-past-the-table", "negative-index", "first-offset-not-0", "last-offset-past-the-input"])
def test_bad_indices_and_offsets_raise_eagers_error(indices, offsets, mode, dev):
    w = torch.randn(12, 3)
    with pytest.raises(RuntimeError) as eager:
        F.embedding_bag(torch.tensor(indices), w, torch.tensor(offsets), mode=mode)
    got = F.embedding_bag(torch.tensor(indices).to(dev), w.to(dev), torch.tensor(offsets).to(dev), mode=mode)
    with pytest.raises(RuntimeError) as lazy:
        got.cpu()
    first = str(eager.value).split(" ")[0]  # "Index", "embedding_bag:", "offsets[0]", "offsets[-1]"
    assert first in str(lazy.value), (str(eager.value), str(lazy.value))
