"""Eager's float32 fused multiply-adds (``fmadd`` in addcmul, add/sub with
alpha, lerp, the optimizers' updates) are one ``lazy.fma`` node, whose product
lazy-keep-roundings ties to its own sum so that XLA's CPU backend contracts
the two (frontends/torch/lowering.py ``fused_multiply_add``).

Before, float32's was a float64 sum of the exact product: 6 nodes where this
is 1 (an Adam step of a 2-layer MLP recorded 173 nodes, 133 now), and it
rounded twice where the exact sum lies within 2**-29 of a float32 midpoint:
of such addcmuls about half were off eager's, here none."""

import collections

import numpy as np
import torch

import lazycore.torch as ltorch
from lazycore.ir import graph
from lazycore.ir.graph import LOG

F32 = np.float32
UNIT = 2.0 ** -24  # half an ulp of [1, 2)


def _near_unit(u):
    """``u`` in [1, 2) and float32 ``v`` with ``u * v`` within 2**-29 of ``UNIT`` but not on it
    (those ``u`` that have one), so that ``u * v + c`` for ``c`` in [1, 2) lies that close to a
    midpoint between float32s."""
    keep_u, keep_v = [], []
    for nudge in (-1, 0, 1):  # (the float32s around UNIT / u)
        v = ((F32(1) / u).view(np.int32) + nudge).view(F32) * F32(UNIT)
        delta = u.astype(np.float64) * v / UNIT - 1  # (exact: 48-bit products, Sterbenz)
        keep = (delta != 0) & (np.abs(delta) < 2.0 ** -29)
        keep_u.append(u[keep])
        keep_v.append(v[keep])
    return np.concatenate(keep_u), np.concatenate(keep_v)


def _scaled(rng, *xs):
    """``xs`` times one power of two and one sign an element (exact)."""
    n = len(xs[0])
    scale = np.ldexp(F32(1), rng.integers(-20, 20, n)).astype(F32) * np.where(rng.integers(0, 2, n), F32(-1), F32(1))
    return [x * scale for x in xs]


def _midpoint_addcmul(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    a, b = _near_unit(rng.uniform(1, 2, n).astype(F32))
    c = rng.uniform(1, 2, len(a)).astype(F32)
    a, c = _scaled(rng, a, c)
    return [torch.from_numpy(v) for v in (c, a, b)]


def _midpoint_lerp(n=200_000, seed=1):
    """``lerp(x, end, w)`` with ``w < 0.5`` is ``fma(w, end - x, x)``: ``end`` is ``x`` plus
    ``k`` ulps (exact, so is ``end - x``) and ``w`` near ``1 / (2k)``."""
    rng = np.random.default_rng(seed)
    k = rng.integers(3, 2 ** 20, n).astype(F32)
    w = (F32(1) / (F32(2) * k))
    keep_w, keep_k = [], []
    for nudge in (-1, 0, 1):
        ww = (w.view(np.int32) + nudge).view(F32)
        delta = 2.0 * k.astype(np.float64) * ww - 1
        keep = (delta != 0) & (np.abs(delta) < 2.0 ** -29)
        keep_w.append(ww[keep])
        keep_k.append(k[keep])
    w, k = np.concatenate(keep_w), np.concatenate(keep_k)
    x = rng.uniform(1, 1.5, len(w)).astype(F32)
    end = x + k * F32(2.0 ** -23)
    x, end = _scaled(rng, x, end)
    return [torch.from_numpy(v) for v in (x, end, w)]


def _float64_form(a, b, c):
    """The lowering this replaced: float32 a * b + c as a float64 sum rounded to float32."""
    return torch.from_numpy((a.numpy().astype(np.float64) * b.numpy() + c.numpy()).astype(F32))


def _bits_off(got, want):
    return int((got.view(torch.int32) != want.view(torch.int32)).sum())


def test_addcmul_near_float32_midpoints_is_eagers_bits(dev):
    x, a, b = _midpoint_addcmul()
    want = torch.addcmul(x, a, b)
    assert _bits_off(_float64_form(a, b, x), want) > len(x) // 4  # (hard cases: double rounding loses them)
    got = torch.addcmul(x.to(dev), a.to(dev), b.to(dev))
    inplace = x.to(dev).addcmul_(a.to(dev), b.to(dev))
    assert _bits_off(got.cpu(), want) == 0
    assert _bits_off(inplace.cpu(), want) == 0


def test_lerp_near_float32_midpoints_is_eagers_bits(dev):
    x, end, w = _midpoint_lerp()
    want = torch.lerp(x, end, w)
    assert _bits_off(_float64_form(w, end - x, x), want) > len(x) // 4
    assert _bits_off(torch.lerp(x.to(dev), end.to(dev), w.to(dev)).cpu(), want) == 0


def _recorded(f):
    """Op names of the nodes ``f`` records."""
    ops = collections.Counter()
    made = graph.Node.__init__

    def counting(self, op, *args, **kwargs):
        ops[op] += 1
        made(self, op, *args, **kwargs)

    graph.Node.__init__ = counting
    try:
        f()
    finally:
        graph.Node.__init__ = made
    return ops


def test_float32_addcmul_is_one_node(dev):
    x, a, b = (torch.randn(100).to(dev) for _ in range(3))
    ltorch.mark_step()
    assert dict(_recorded(lambda: torch.addcmul(x, a, b))) == {"fma": 1}  # (4 converts, mul and add before)
    assert _recorded(lambda: torch.lerp(x, a, b))["convert"] == 0
    ltorch.mark_step()


def test_an_adam_step_records_one_fma_a_fused_update(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 16).to(dev), torch.randn(64, 4).to(dev)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()  # (the state made)
    ltorch.mark_step()
    n0 = len(LOG.nodes)
    ops = _recorded(opt.step)
    nodes = len(LOG.nodes) - n0
    ltorch.mark_step()
    # exp_avg's lerp and exp_avg_sq's addcmul a parameter, no float64 form (6 nodes each)
    assert ops["fma"] == 2 * len(list(model.parameters())), dict(ops)
    assert nodes <= 133, (nodes, dict(ops))  # (173 before)
