"""``amax``/``amin`` over four vectors or more of contiguous elements give eager's
zero on a tie of signed zeros, bit for bit (``torch.signbit``).

Eager's ``vectorized_inner_reduction`` runs four accumulator vectors (the later
of equal values kept), combines them, then the lanes one after another and the
tail with the scalar ``max`` (the first kept); ops/eager_loops.py's
``inner_reduction`` models it. Before, the lazy device gave IEEE's order
(+0.0 above -0.0): 11 of 16 cases here had a sign off eager's (51 of 96 in a wider
sweep by hand: 64 to 1000 elements, 1-3 dims, float32 and float64, with -1.0s mixed in)."""

import torch

import lazycore as lc

CASES = [((64,), None), ((100,), None), ((3, 70), 1), ((2, 5, 40), (1, 2))]


def test_amax_amin_of_four_vectors_and_more_are_eagers(dev):
    g = torch.Generator().manual_seed(0)
    cases = []
    for dtype in (torch.float32, torch.float64):
        for shape, dim in CASES:
            neg = torch.randint(0, 2, shape, generator=g).bool()
            x = torch.where(neg, torch.tensor(-0.0, dtype=dtype), torch.tensor(0.0, dtype=dtype))
            kw = {} if dim is None else {"dim": dim}
            for f in (torch.amax, torch.amin):
                cases.append((f.__name__, dtype, shape, f(x, **kw), f(x.to(dev), **kw)))
    lc.mark_step()
    off = [c[:3] for c in cases if not torch.equal(torch.signbit(c[3]), torch.signbit(c[4].cpu()))]
    assert off == [], len(off)


def test_half_max_min_under_one_vector_are_eagers(dev):
    """``max()``/``min()`` of float16 and bfloat16 between one float vector and one of
    their own (9-15 elements under AVX2, 17-31 under AVX512): eager's ``reduce_all``
    for reduced floats combines the two float halves, then reduces the float vector
    (22 of these 64 cases had a sign off eager's before)."""
    g = torch.Generator().manual_seed(1)
    cases = []
    for dtype in (torch.float16, torch.bfloat16):
        for n in (5, 9, 11, 13, 15, 17, 23, 31):
            for _ in range(2):
                neg = torch.randint(0, 2, (n,), generator=g).bool()
                x = torch.where(neg, torch.tensor(-0.0, dtype=dtype), torch.tensor(0.0, dtype=dtype))
                for f in (torch.max, torch.min):
                    cases.append((f.__name__, dtype, n, f(x), f(x.to(dev))))
    lc.mark_step()
    off = [c[:3] for c in cases if not torch.equal(torch.signbit(c[3]), torch.signbit(c[4].cpu()))]
    assert off == [], len(off)
