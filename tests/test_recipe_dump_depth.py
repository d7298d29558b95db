"""A recorded lowering's constants are kept on disk (lazycore.trace.recipes.dump)
by the walk's one encoder (lazycore.ir.walk.encode: post-order, any depth),
not a recursion of their own, which raised RecursionError for a constant
made by a chain of 1,500 ops (so the recording was never stored)."""

import numpy as np

import lazycore as lc
from lazycore.trace import recipes


@lc.replayed
def _deep(a):
    c = lc.apply("broadcast_in_dim", lc.scalar(0.5, dtype=a.dtype, device=a.device), dims=(), shape=a.shape)
    for _ in range(1500):
        c = lc.apply("neg", c)
    return lc.apply("add", a, c)


def test_a_recording_whose_constant_is_a_deep_chain_is_dumped_and_loaded():
    recipes._REPLAYED.clear()
    a = lc.from_numpy(np.ones((2, 3), np.float32))
    _deep(a)
    (recipe,) = [r for kept in recipes._REPLAYED.values() for r in kept]
    data = recipes.dump(recipe, a.device)
    assert [item[0] for item in data[1]] == ["s", "n"] + ["n"] * 1500  # the scalar, its broadcast, the chain
    loaded = recipes.load(data, a.device)
    np.testing.assert_array_equal(lc.to_numpy(loaded.fragment.replay((a,), ())), np.full((2, 3), 1.5, np.float32))
