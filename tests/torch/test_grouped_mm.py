"""torch._grouped_mm (F.grouped_mm) on the lazy device: eager's products and
gradients in its four layouts, with no fallback (issue 39: transformers'
mixture-of-experts layers call it by default off the CPU; torch's meta function
refuses float32, so every call went to eager's kernel, a barrier per expert
layer, forward and backward)."""

import pytest
import torch
import torch.nn.functional as F

OFFS = torch.tensor([4, 4, 10], dtype=torch.int32)  # an empty group, and rows past the last end


def _close(got, want, tol=1e-5):
    got = got.cpu()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.allclose(got, want, rtol=tol, atol=tol), (got - want).abs().max()


def _args(layout, g):
    a, b = {"2d3d": ((12, 8), (3, 8, 16)), "2d2d": ((16, 12), (12, 8)), "3d2d": ((3, 8, 4), (4, 12)),
            "3d3d": ((3, 8, 4), (3, 4, 8))}[layout]
    return torch.randn(a, generator=g), torch.randn(b, generator=g), None if layout == "3d3d" else OFFS


@pytest.mark.parametrize("layout", ["2d3d", "2d2d", "3d2d", "3d3d"])
def test_products_and_gradients_are_eagers(dev, no_fallback, layout):
    g = torch.Generator().manual_seed(0)
    a, b, offs = _args(layout, g)
    # eager leaves the rows (columns) past offs[-1] unwritten: its results there, and its
    # gradients of the positions past offs[-1] (computed into them), are no reference
    valid = {"2d3d": (slice(0, 10),), "3d2d": (slice(None), slice(0, 10))}.get(layout, ())
    valid_a = {"2d3d": (slice(0, 10),), "2d2d": (slice(None), slice(0, 10))}.get(layout, ())
    valid_b = {"2d2d": (slice(0, 10),), "3d2d": (slice(None), slice(0, 10))}.get(layout, ())
    want_a, want_b = a.clone().requires_grad_(), b.clone().requires_grad_()
    want = torch._grouped_mm(want_a, want_b, offs)
    weight = torch.randn(want.shape, generator=g)
    (want[valid] * weight[valid]).sum().backward()

    got_a, got_b = a.to(dev).requires_grad_(), b.to(dev).requires_grad_()
    got = torch._grouped_mm(got_a, got_b, None if offs is None else offs.to(dev))
    (got[valid] * weight.to(dev)[valid]).sum().backward()
    _close(got[valid], want[valid])
    _close(got_a.grad[valid_a], want_a.grad[valid_a])
    _close(got_b.grad[valid_b], want_b.grad[valid_b])


def test_transformers_experts_call(dev, no_fallback):
    """(S, K) tokens sorted by expert against (G, N, K) weights transposed, as
    transformers' ``_grouped_linear`` passes them."""
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(10, 8, generator=g), torch.randn(3, 16, 8, generator=g)
    want = F.grouped_mm(x, w.transpose(-2, -1), offs=OFFS)
    got = F.grouped_mm(x.to(dev), w.to(dev).transpose(-2, -1), offs=OFFS.to(dev))
    _close(got, want)


def test_non_finite_values_reach_what_they_reach_in_eager(dev, no_fallback):
    """Each group's product sees its own rows and weights only: an infinity in
    an empty group's weights and a NaN in one token reach eager's positions."""
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(10, 8, generator=g), torch.randn(3, 8, 16, generator=g)
    w[1, 0, 0] = float("inf")  # group 1 is empty
    x[9, 0] = float("nan")  # a token of group 2
    w[0, 3, 2] = float("inf")  # group 0's
    finite = []
    for d in ("cpu", dev):
        xd, wd = x.clone().to(d).requires_grad_(), w.clone().to(d).requires_grad_()
        out = torch._grouped_mm(xd, wd, OFFS.to(d))
        out[:10].sum().backward()
        finite.append([torch.isfinite(t.cpu()) for t in (out[:10], xd.grad, wd.grad)])
    for got, want in zip(*finite):
        assert torch.equal(got, want)


def test_eagers_checks(dev):
    x, w = torch.randn(10, 8), torch.randn(3, 8, 16)
    for args in ((x, w, OFFS.long()), (torch.randn(10, 5), torch.randn(3, 5, 16), OFFS), (x.double(), w.double(), OFFS)):
        with pytest.raises(RuntimeError) as want:
            torch._grouped_mm(*args)
        with pytest.raises(RuntimeError) as got:
            torch._grouped_mm(*[t.to(dev) for t in args])
        assert str(got.value) == str(want.value)


def test_under_inference_mode_eagers_kernel_answers(dev):
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(10, 8, generator=g), torch.randn(3, 8, 16, generator=g)
    with torch.inference_mode():
        got = torch._grouped_mm(x.to(dev), w.to(dev), OFFS.to(dev))
    _close(got[:10], torch._grouped_mm(x, w, OFFS)[:10])
