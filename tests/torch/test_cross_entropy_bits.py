"""``log_softmax`` and its backward, the halves of every ``F.cross_entropy``,
give eager's float32 bits (issue 39). Eager's last-dim kernels take SLEEF's
exp and log, sum in 16-lane vectors (its AVX512 code) and fuse the backward's
``g - exp(out) * sum``; lazycore's XLA exp, log and reduce differed: a 64 x 16
``F.cross_entropy`` input gradient was 222 of 1,024 elements off, 32 x 40
188 of 1,280. Rows of more than ``lane_sums.MAX_VECTORS`` vectors (GPT-2's
50,257 classes) still sum in XLA's order."""

import pytest
import torch
import torch.nn.functional as F

from lazycore.ir.graph import LOG
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)

aten = torch.ops.aten


def _off(got, want):
    same = (got == want) | (got.isnan() & want.isnan())
    return int((~same).sum())


def _logits(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * 3


# CI: (64, 5) (a row under one vector) keeps (64, 2)'s path, (32, 40) (two vectors and a tail) (4, 6, 40)'s
@pytest.mark.parametrize("shape", [pytest.param((64, 2), marks=BY_HAND), (64, 5), (64, 16), (32, 17), (32, 40),
                                   (8, 1000), pytest.param((4, 6, 40), marks=BY_HAND)])
def test_log_softmax_is_eagers_bits(dev, no_fallback, shape):
    x = _logits(shape)
    assert _off(torch.log_softmax(x.to(dev), -1).cpu(), torch.log_softmax(x, -1)) == 0


def test_log_softmax_of_rows_with_infinities_and_nans(dev, no_fallback):
    x = _logits((6, 20), seed=1)
    x[0, 3] = float("-inf")
    x[1, :] = float("-inf")
    x[2, 7] = float("inf")
    x[3, 0] = float("nan")
    x[4, :5] = 1e30
    assert _off(torch.log_softmax(x.to(dev), 1).cpu(), torch.log_softmax(x, 1)) == 0


@pytest.mark.parametrize("c", [5, 16, 40, 1000])
def test_log_softmax_backward_is_eagers_bits(dev, no_fallback, c):
    """Eager's own output and a dense gradient, so only the backward kernel is compared."""
    out = torch.log_softmax(_logits((16, c)), 1)
    grad = _logits((16, c), seed=2)
    want = aten._log_softmax_backward_data(grad, out, 1, torch.float32)
    got = aten._log_softmax_backward_data(grad.to(dev), out.to(dev), 1, torch.float32).cpu()
    assert _off(got, want) == 0


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "none"}, {"ignore_index": -100}], ids=["mean", "none", "ignored"])
@pytest.mark.parametrize("shape", [(64, 16), (32, 40)])
def test_cross_entropy_input_gradient_is_eagers_bits(dev, no_fallback, shape, kwargs):
    x = _logits(shape, seed=3)
    target = torch.randint(0, shape[1], (shape[0],), generator=torch.Generator().manual_seed(4))
    if "ignore_index" in kwargs:
        target[::3] = -100
    results = []
    for d in ("cpu", dev):
        v = x.detach().clone().to(d).requires_grad_()
        loss = F.cross_entropy(v, target.to(d), **kwargs)
        loss.backward(torch.ones_like(loss))
        results.append(v.grad.cpu())
    assert _off(results[1], results[0]) == 0


def test_nodes_do_not_grow_with_the_classes(dev):
    """The sums are one node each, so a step records as many nodes for 16
    classes as for 1,000 (the second call of each: replayed, as every step)."""
    counts = []
    for c in (16, 1000):
        x = _logits((8, c)).to(dev).requires_grad_()
        t = torch.randint(0, c, (8,)).to(dev)
        for _ in range(2):
            ltorch.mark_step()
            n0 = len(LOG.nodes)
            F.cross_entropy(x, t).backward()
            n = len(LOG.nodes) - n0
        ltorch.mark_step()
        counts.append(n)
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
# CI: [300-sum-*] (flushes at 16 and 256 rows) and [17-mean-*] (17 rows' cascade) keep [17-sum-*]'s path
@pytest.mark.parametrize("rows,reduction", [
    pytest.param(rows, reduction, id=f"{rows}-{reduction}", marks=BY_HAND if (rows, reduction) == (17, "sum") else ())
    for rows in (17, 300) for reduction in ("mean", "sum")])
def test_nll_loss_sums_in_eagers_cascade(dev, no_fallback, rows, reduction, weighted):
    """Eager's nll_loss sums its rows in a cascade of partial sums (a flush every
    16 rows, every 256, ...): the loss and, weighted, the total weight (which every
    input gradient divides by: 32 x 40 weighted, 1,201 of 1,280 elements off) are its bits."""
    g = torch.Generator().manual_seed(rows)
    logp = torch.log_softmax(torch.randn(rows, 7, generator=g) * 3, 1)
    target = torch.randint(0, 7, (rows,), generator=g)
    weight = torch.rand(7, generator=g) if weighted else None
    want = F.nll_loss(logp, target, weight=weight, reduction=reduction)
    got = F.nll_loss(logp.to(dev), target.to(dev), reduction=reduction,
                     weight=None if weight is None else weight.to(dev)).cpu()
    assert _off(got, want) == 0


def test_weighted_cross_entropy_input_gradient_is_eagers_bits(dev, no_fallback):
    x = _logits((32, 40), seed=5)
    g = torch.Generator().manual_seed(6)
    target, weight = torch.randint(0, 40, (32,), generator=g), torch.rand(40, generator=g)
    grads = []
    for d in ("cpu", dev):
        v = x.detach().clone().to(d).requires_grad_()
        F.cross_entropy(v, target.to(d), weight=weight.to(d)).backward()
        grads.append(v.grad.cpu())
    assert _off(grads[1], grads[0]) == 0


def _padded_step(dev, x, target, weight):
    """Eager's and the lazy loss and input gradient of ``x`` marked dynamic along
    its first dimension (a batch padded to its bucket), and the lazy step's compiles."""
    from lazycore.observe import metrics

    want_x = x.clone().requires_grad_()
    want = F.cross_entropy(want_x.reshape(-1, x.shape[-1]), target.reshape(-1), weight=weight)
    want.backward()
    v = ltorch.dynamic(x.to(dev), x.dim() - 2).requires_grad_()
    t = ltorch.dynamic(target.to(dev), target.dim() - 1)
    got = F.cross_entropy(v.reshape(-1, x.shape[-1]), t.reshape(-1), weight=None if weight is None else weight.to(dev))
    got.backward()
    before = metrics.counters()["compiles"]
    ltorch.mark_step()
    compiled = metrics.counters()["compiles"] - before
    return _off(got.cpu(), want.detach()) + _off(v.grad.cpu(), want_x.grad), compiled


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_cross_entropy_over_a_padded_batch_is_eagers_bits(dev, clean_runtime, no_fallback, weighted):
    """A batch padded to its bucket keeps eager's cascade (``lazy.cascade_sum``
    flushes at row indices; the padded rows add zeros): 33 and 47 rows share 64's
    program, whose padded rows cross the flush at 48, 250 and 290 share 300's,
    crossing the level-2 flush at 256; loss and input gradient 0 bits off."""
    from lazycore.ir.config import override

    g = torch.Generator().manual_seed(7)
    weight = torch.rand(40, generator=g) if weighted else None
    compiled = 0
    with override(buckets="64,300"):
        for n in (33, 47, 250, 290):
            x = torch.randn(n, 40, generator=g) * 3
            off, c = _padded_step(dev, x, torch.randint(0, 40, (n,), generator=g), weight)
            assert off == 0, n
            compiled += c
    assert compiled == 2


def test_cross_entropy_over_padded_sequences_is_eagers_bits(dev, clean_runtime, no_fallback):
    """``(batch, seq, classes)`` logits flattened to rows with the sequence padded:
    the valid rows are apart in the padded rows (each sequence's padding after
    it), so the cascade's operand is packed first; one program for 40..47."""
    g = torch.Generator().manual_seed(8)
    compiled = 0
    for t in (40, 43, 47):
        x = torch.randn(2, t, 30, generator=g) * 3
        off, c = _padded_step(dev, x, torch.randint(0, 30, (2, t), generator=g), None)
        assert off == 0, t
        compiled += c
    assert compiled == 1
