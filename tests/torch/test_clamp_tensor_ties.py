"""``clamp`` with tensor bounds gives eager's zero on a tie of signed zeros, bit for bit.

Eager's kernel is ``std::min(std::max(x, min), max)`` in its scalar loop (x wins
a tie) and ``vec::minimum(vec::maximum(x, min), max)`` in its vector loop (the
bound wins); ops/eager_loops.py's ``scalar_tail`` says where each runs (here
with three operands: vectorized when every one is contiguous along the row or
one is a broadcast scalar there). Before, the bound won everywhere: 14 of 16
cases here had a sign off eager's (44 of 48 in a wider sweep by hand)."""

import torch

import lazycore as lc

SHAPES = [((2,), (2,)), ((40,), (40,)), ((5, 20), (5, 1)), ((7, 33), ())]
CLAMPS = {
    "both": lambda x, lo, hi: torch.clamp(x, lo, hi),
    "min": lambda x, lo, hi: torch.clamp(x, min=lo),
    "max": lambda x, lo, hi: torch.clamp(x, max=hi),
    "clamp_min": lambda x, lo, hi: torch.clamp_min(x, lo),
}


def _zeros(g, shape):
    neg = torch.randint(0, 2, shape, generator=g).bool()
    return torch.where(neg, torch.tensor(-0.0), torch.tensor(0.0))


def test_clamp_with_tensor_bounds_ties_are_eagers(dev):
    g = torch.Generator().manual_seed(0)
    cases = []
    for sx, sb in SHAPES:
        x, lo, hi = _zeros(g, sx), _zeros(g, sb), _zeros(g, sb)
        for name, f in CLAMPS.items():
            cases.append((name, sx, sb, f(x, lo, hi), f(x.to(dev), lo.to(dev), hi.to(dev))))
    lc.mark_step()
    off = [c[:3] for c in cases if not torch.equal(torch.signbit(c[3]), torch.signbit(c[4].cpu()))]
    assert off == [], len(off)
