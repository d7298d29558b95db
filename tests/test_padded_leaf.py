"""A padded result is a data leaf carrying its valid region (issue 42): the
graph a barrier leaves behind holds only the ir layer's node classes, and the
handle's value is recognised as that leaf's region."""

import numpy as np
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir.graph import Data, Node, Scalar, Value
from lazycore.runtime import buckets

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _reachable(node):
    seen, todo = {}, [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        todo.extend(o[0] for o in n.operands if type(o) is Value)
    return list(seen.values())


def test_a_padded_result_is_a_data_leaf_with_its_valid_region(rng):
    h = rng.standard_normal((5, 3)).astype(np.float32)
    y = lnp.dynamic(lnp.asarray(h), 0) * 2 + 1  # keeps the padded dimension
    lc.mark_step()
    node = y.__lazycore_value__().value.node
    nodes = _reachable(node)
    assert {type(n) for n in nodes} <= {Node, Data, Scalar}  # no runtime class in the graph
    leaf = buckets.padded_leaf(node)
    assert type(leaf) is Data and leaf.valid is not None
    assert leaf.types[0].shape[0] > 5 and leaf.valid.type.shape == (5, 3)  # padded to its bucket
    assert buckets.padded_along(node, 0) and not buckets.padded_along(node, 1)
    np.testing.assert_array_equal(np.asarray(y), h * 2 + 1)  # cut on the host


def test_other_nodes_are_not_padded_results(rng):
    h = rng.standard_normal((5, 3)).astype(np.float32)
    y = lnp.dynamic(lnp.asarray(h), 0) * 2 + 1
    lc.mark_step()
    z = y[1:4]  # a slice of the region: pending work of its own, not the region
    node = z.__lazycore_value__().value.node
    assert buckets.padded_leaf(node) is None
    np.testing.assert_array_equal(np.asarray(z), (h * 2 + 1)[1:4])
