"""The per-op path's signatures: interned layout keys and the inline key of the common calls.

Dispatch caches eager's meta result of each op by a signature of its
arguments (frontends/torch/dispatch.py); the tensors' part is each tensor's
LayoutKey, one object per layout, and the commonest calls (a tensor alone, or
with a tensor or a float, no keywords) make the signature inline rather than
through _signature. Both must give the very key _signature gives, or a step
would keep two cache entries (and two recordings) for one call.
"""

import torch

from lazycore.frontends.torch import dispatch
from lazycore.frontends.torch.tensor import LayoutKey, layout_key

aten = torch.ops.aten


def _keys_after(fn):
    dispatch._META.clear()
    fn()
    return set(dispatch._META)


def test_the_inline_signature_is_the_signature(dev):
    a, b = torch.randn(3, 4).to(dev), torch.randn(3, 4).to(dev)
    for func, args, call in (
        (aten.add.Tensor, (a, b), lambda: a + b),
        (aten.mul.Tensor, (a, 0.5), lambda: a * 0.5),
        (aten.tanh.default, (a,), lambda: torch.tanh(a)),
    ):
        want = tuple(dispatch._signature(func, args, {})[0])
        assert _keys_after(call) == {want}, func
        assert _keys_after(call) == {want}, func  # and again, from a replay


def test_one_layout_key_per_layout(dev):
    a, b = torch.randn(3, 4).to(dev), torch.randn(3, 4).to(dev)
    c, d = a + b, a * 2.5  # (a replay's result takes the key kept with its recording)
    assert type(a._key) is LayoutKey
    assert a._key is b._key is c._key is d._key
    assert a.t()._key is b.t()._key is layout_key((4, 3), (1, 4), 0, torch.float32, a.device)
    assert a.t()._key == ((4, 3), (1, 4), 0, torch.float32, a.device)  # a tuple's equality
    assert a._key is not a.t()._key and a._key != a.t()._key
    x = torch.randn(2, 6).to(dev)
    x.t_()  # the tensor's own layout changed in place: the key of the new one
    assert x._key is layout_key((6, 2), (1, 6), 0, torch.float32, x.device)
    assert (x + torch.randn(6, 2).to(dev)).shape == (6, 2)
