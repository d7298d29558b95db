"""A recorded lowering replayed on inputs of a kind it has not met (a chain on
a fresh batch) hashes each node as tracing does: its generated replay hashes
them itself (lazycore.trace.fragment), in lines of its own for a small
fragment, by a walk for a large one."""

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir.config import override
from lazycore.trace import fragment, recipes


@lc.replayed
def _pieces(a, b, n):
    """``n`` rounds of two ops on a constant (2 n + 2 entries), a variadic
    operand group (``dynamic_slice``'s start indices), two results of one
    node (``optimization_barrier``)."""
    c = lc.apply("broadcast_in_dim", lc.scalar(2.5, dtype=a.dtype, device=a.device), dims=(), shape=a.shape)
    x = a
    for _ in range(n):
        x = lc.apply("add", lc.apply("mul", x, c), b)
    zero = lc.scalar(0, dtype="i64", device=a.device)
    row = lc.apply("dynamic_slice", x, [zero, zero], sizes=(1, 3))
    return lc.apply("optimization_barrier", [x, row])


def _digests(results) -> list:
    return [r.value.node.digest for r in results]


def _kinds(base, count: int) -> list:
    """``count`` inputs of as many kinds: each a new node over the one before."""
    out, x = [], base
    for _ in range(count):
        x = lc.apply("neg", x)
        out.append(x)
    return out


@pytest.mark.parametrize("n, in_lines", [(2, True), (fragment._HASHED_IN_LINES // 2, False)],
                         ids=["in lines", "walked"])
def test_a_replay_on_inputs_of_new_kinds_hashes_as_tracing(n, in_lines):
    a0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    base, b = lc.from_numpy(a0), lc.from_numpy(np.ones((2, 3), np.float32))
    count = fragment._DIGESTS_KEPT + 6  # more kinds than a fragment keeps digests for
    with override(replay=False):
        traced = [_digests(_pieces(x, b, n)) for x in _kinds(base, count)]
    assert len({d[0] for d in traced}) == count
    recipes._REPLAYED.clear()
    inputs = _kinds(base, count)
    _pieces(inputs[0], b, n)  # records
    (recipe,) = [r for kept in recipes._REPLAYED.values() for r in kept]
    assert (len(recipe.fragment.entries) <= fragment._HASHED_IN_LINES) == in_lines
    # every kind met first by a replay, then again after the kept digests were dropped
    for _ in range(2):
        assert [_digests(_pieces(x, b, n)) for x in inputs] == traced
    x, row = _pieces(inputs[5], b, n)
    want = a0  # (six negations)
    for _ in range(n):
        want = want * np.float32(2.5) + 1
    np.testing.assert_allclose(lc.to_numpy(x), want, rtol=1e-6)
    np.testing.assert_array_equal(lc.to_numpy(row), lc.to_numpy(x)[:1])
