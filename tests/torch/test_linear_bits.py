"""Linear layers' and matrix products' float32 bits are eager's where XLA's
own dot can sum in eager's order (issue 39; frontends/torch/ops/eager_loops.py
``ordered_dot``).

Eager's GEMM (MKL, as probed on this AMD EPYC) sums each output as one fused
multiply-add chain over K, in blocks of K (all of it up to 192, two halves up
to 384, else 192s) added in order, an ``addmm``'s bias after the first block.
XLA's CPU dot is that chain for operands laid out ``(M, K)`` and ``(K, N)``
at the sizes ``eager_loops.xla_dot_chains`` names; lazycore computes ``a @ b``
or ``(b.T @ a.T).T`` accordingly, per block, choosing at the sizes' buckets
(a padded program runs the dot there), so the shapes here are ones whose
buckets and own sizes agree; where it sums neither orientation so, the
product's rows or columns are padded with zeros beyond the bucket to a size
where it does (``eager_loops._widened``). Before, 73-93% of the outputs of these
products were off eager's (every transformers model's first divergence after
attention). Products MKL itself sums otherwise (fewer than 12 columns,
``eager_loops.CHAIN_SIDE``) or too large (:data:`~.eager_loops.ORDERED_WORK`)
keep XLA's order: float tolerance."""

import pytest
import torch
import torch.nn.functional as F

from lazycore.frontends.torch.ops import eager_loops

EAGER_CHAIN = pytest.mark.skipif(not eager_loops.eager_gemm_is_blocked_chain(),
                                 reason="eager's MKL sums in another order on this CPU")

SHAPES = [  # (M, K, N)
    (128, 64, 256),  # a GPT-2-tiny MLP's first layer
    (128, 256, 64),  # its second: M the wider side, K in two halves
    (128, 64, 192),
    (64, 64, 64),
    (4, 64, 64),
    (32, 768, 64),  # K in four blocks of 192
    (64, 320, 64),  # two halves of 160
    (32, 1024, 64),  # five blocks of 192 and one of 64
    (40, 50, 33),
    (16, 64, 16),  # neither orientation in order as XLA's dot at the buckets: 16 zero columns more
    (8, 32, 24),  # 8 columns more (its bucket, 32)
]


def _operands(m, k, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g), torch.randn(n, k, generator=g), torch.randn(n, generator=g),
            torch.randn(m, n, generator=g))


@EAGER_CHAIN
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_linear_and_mm_are_eagers_bits(dev, no_fallback, shape):
    m, k, n = shape
    if eager_loops.gemm_blocks(k) is None:
        pytest.skip(f"eager's MKL sums a K of {k} in an order not modelled on this CPU")
    x, w, b, gy = _operands(m, k, n)
    cases = {
        "linear": lambda t: F.linear(t(x), t(w), t(b)),
        "linear, no bias": lambda t: F.linear(t(x), t(w)),
        "mm, (K, N) rows": lambda t: t(x) @ t(w.t().contiguous()),
        "addmm, Conv1D's": lambda t: torch.addmm(t(b), t(x), t(w.t().contiguous())),
        "weight gradient": lambda t: t(gy).t() @ t(x),  # (N, M) by (M, K): over the samples
    }
    for name, fn in cases.items():
        want = fn(lambda v: v)
        got = fn(lambda v: v.to(dev)).cpu()
        assert torch.equal(got, want), (name, (got != want).float().mean().item())


@EAGER_CHAIN
@pytest.mark.parametrize("shape", [(8, 32, 16, 32), (8, 32, 32, 16), (8, 128, 64, 128), (16, 32, 256, 32), (16, 16, 16, 16)],
                         ids=str)
def test_bmm_and_attention_scores_are_eagers_bits(dev, no_fallback, shape):
    """``bmm`` (and ``matmul`` of 4-d tensors, which reshapes to it: T5's and
    hand-written attention) sums per matrix as ``mm`` does."""
    b, m, k, n = shape
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(b, m, k, generator=g), torch.randn(b, k, n, generator=g)
    assert torch.equal(torch.bmm(x.to(dev), y.to(dev)).cpu(), torch.bmm(x, y))
    q, kk = x.view(2, b // 2, m, k), y.transpose(1, 2).contiguous().view(2, b // 2, n, k)
    assert torch.equal(torch.matmul(q.to(dev), kk.to(dev).transpose(-1, -2)).cpu(), torch.matmul(q, kk.transpose(-1, -2)))


@pytest.mark.parametrize("shape", [(32, 128, 8), (2048, 256, 512), (64, 300, 64), (32, 1000, 64)], ids=str)
def test_other_sizes_keep_xlas_dot(dev, no_fallback, shape):
    """As near the float64 product as eager's own float32 (at most 4x its error,
    the zoo's first-step rule): two summation orders of 1000 terms are 7e-5
    apart on an AVX-512 Xeon, where both are 4e-5 to 7e-5 from float64, 0.2% of
    the dot product's error bound; a fixed tolerance on their difference held
    on one CPU only."""
    m, k, n = shape
    x, w, b, _ = _operands(m, k, n, seed=1)
    got = F.linear(x.to(dev), w.to(dev), b.to(dev)).cpu()
    want, exact = F.linear(x, w, b), F.linear(x.double(), w.double(), b.double())
    assert got.dtype == torch.float32 and got.shape == want.shape
    err, eager_err = (got.double() - exact).abs().max().item(), (want.double() - exact).abs().max().item()
    assert err <= 4 * eager_err, (err, eager_err)


@EAGER_CHAIN
def test_a_training_step_of_an_mlp_is_eagers_bits(dev, no_fallback):
    """Forward, backward (the weight gradients contract over the 128 samples)
    and an SGD step: every parameter eager's bits."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    lazy = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(dev)
    lazy.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(128, 64, generator=g), torch.randn(128, 64, generator=g)
    for m, dv in ((model, "cpu"), (lazy, dev)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        loss = ((m(x.to(dv)) - y.to(dv)) ** 2).sum()
        loss.backward()
        opt.step()
    for (name, p), q in zip(model.named_parameters(), lazy.parameters()):
        assert torch.equal(q.detach().cpu(), p.detach()), name
