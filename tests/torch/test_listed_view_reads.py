"""An op whose tensors come in a list (``cat``, ``stack``) takes dispatch's
general path (frontends/torch/dispatch.py ``_lower`` after the per-op fast
path): its views are read and its recording replayed there. Those replays
start the search for the user's line at the frame that called into torch
(``ENTRY.frame``), as the fast path's do; without it each read and replay
walked every frame from inside lazycore up (a ``cat`` of two views in
tiny Llama's ``rotate_half`` cost ~3 us more a call). The line found and
the graph are the same either way."""

import torch

import lazycore.torch as ltorch
from lazycore.frontends.torch.tensor import read
from lazycore.ir.sourceloc import resolve
from lazycore.trace import recipes


def _host(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_a_cat_of_views_replays_from_the_users_frame(monkeypatch):
    dev = ltorch.device()
    a, b = _host(3, 4), _host(3, 4, seed=1)
    la, lb = a.to(dev), b.to(dev)
    starts = []
    original = recipes.caller

    def watched(depth=1, start=None, **kw):
        starts.append(start)
        return original(depth + 1, start, **kw) if start is None else original(depth, start, **kw)

    got = []
    for i in range(3):  # the first call records the reads and the cat; the others replay them
        if i == 2:
            monkeypatch.setattr(recipes, "caller", watched)
        out = torch.cat((la.t(), lb.t()), 0)  # the cat's line
        line = __import__("inspect").currentframe().f_lineno - 1
        monkeypatch.setattr(recipes, "caller", original)
        assert resolve(read(out).value.node.loc) == (__file__, line)
        got.append(out.cpu())
        ltorch.mark_step()
    assert None not in starts  # no search from inside lazycore (a user's frame: no search at all)
    want = torch.cat((a.t(), b.t()), 0)
    for g in got:
        assert torch.equal(g, want)
