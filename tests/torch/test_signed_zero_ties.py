"""A tie of signed zeros in ``maximum``/``minimum`` and the max/min reductions gives
eager's CPU answer, bit for bit (``torch.signbit``), on the lazy device.

Eager picks an operand where IEEE would order the zeros (+0.0 above -0.0): its
binary vector loop gives the second operand, its scalar tail the first
(``ops/eager_loops.py`` models where each runs); ``max.dim`` and ``amax``/``amin``
over fewer elements than four vectors keep the first of equal elements, ``max()``
and ``min()`` the one ``vec::reduce_all`` keeps. Before, the lazy device gave IEEE's
answers: ``maximum(-0.0, +0.0)`` was +0.0 where eager's is -0.0."""

import torch

import lazycore as lc

SHAPES = [((2,), (2,)), ((18,), (18,)), ((5, 20), (5, 1)), ((3, 4, 37), (4, 37)), ((7, 33), ()),
          ((40000,), (40000,))]  # (the last: at GRAIN_SIZE, in threads' chunks)


def _zeros(g, shape, dtype):
    """-0.0 and +0.0 at random."""
    neg = torch.randint(0, 2, shape, generator=g).bool()
    return torch.where(neg, torch.tensor(-0.0, dtype=dtype), torch.tensor(0.0, dtype=dtype))


def _bits(t):
    return torch.signbit(t.cpu())


def test_maximum_minimum_signed_zero_ties_are_eagers(dev):
    g = torch.Generator().manual_seed(0)
    cases = []
    for dtype in (torch.float32, torch.float64):
        for sa, sb in SHAPES:
            a, b = _zeros(g, sa, dtype), _zeros(g, sb, dtype)
            for f in (torch.maximum, torch.minimum):
                cases.append((f, a, b, f(a.to(dev), b.to(dev))))
    lc.mark_step()
    off = [(f.__name__, tuple(a.shape), tuple(b.shape), a.dtype) for f, a, b, got in cases
           if not torch.equal(_bits(got), torch.signbit(f(a, b)))]
    assert off == []
    # the case: eager's -0.0 and 0.0
    got = torch.maximum(torch.tensor([-0.0, 0.0], device=dev), torch.tensor([0.0, -0.0], device=dev))
    assert _bits(got).tolist() == [True, False]


def test_max_min_reductions_of_signed_zero_ties_are_eagers(dev):
    g = torch.Generator().manual_seed(1)
    cases = []
    for dtype, sizes in ((torch.float32, (2, 9, 33)), (torch.float64, (3, 7))):
        for n in sizes:
            x = _zeros(g, (n,), dtype)
            for name in ("max", "min"):
                cases.append((name, x, getattr(torch, name)(x.to(dev)), getattr(torch, name)(x)))
                got = getattr(torch, name)(x.reshape(1, n).to(dev), 1)
                cases.append((name + ".dim", x, got.values, getattr(torch, name)(x.reshape(1, n), 1).values))
            for name in ("amax", "amin"):
                if n < 15:  # (eager's scalar loop: under four vectors of float64 on AVX2)
                    cases.append((name, x, getattr(torch, name)(x.to(dev)), getattr(torch, name)(x)))
                    cases.append((name + "(1)", x, getattr(torch, name)(x.reshape(1, n).to(dev), 1),
                                  getattr(torch, name)(x.reshape(1, n), 1)))
    rows = _zeros(g, (3, 5), torch.float32)  # max.dim over one dim of several rows
    for name in ("max", "min"):
        for d in (0, 1):
            cases.append((f"{name}.dim({d})", rows, getattr(torch, name)(rows.to(dev), d).values,
                          getattr(torch, name)(rows, d).values))
    lc.mark_step()
    off = [(name, x.dtype, x.numel()) for name, x, got, want in cases if not torch.equal(_bits(got), torch.signbit(want))]
    assert off == []
