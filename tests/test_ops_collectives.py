"""Meshes, shardings and collectives, against NumPy.

The collectives' global meaning (lazycore.dialect.collectives) is written
here once more in NumPy (the references below, which tests/test_op_table.py
uses too), and each op runs on 4 forced CPU devices in a child process
(tests/isolated.py): the values a program split over the mesh computes must
be the references'. In this process (one device) the rules, the bad-input
errors and the sharding text the lowering writes are checked.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import lazycore as lc
from lazycore.dialect import ShapeError, TensorType, infer
from isolated import FOUR_DEVICES, run_isolated

# --- the references ----------------------------------------------------------------------

COMBINE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def blocks(x, mesh, sharding, axis):
    """The blocks of ``x`` along the dimension split on mesh axis ``axis``, and that dimension."""
    d = list(sharding).index(axis)
    return np.split(x, mesh[axis], axis=d), d


def ref_all_reduce(x, mesh, sharding, axis, reduction="sum", **_):
    parts, _ = blocks(x, mesh, sharding, axis)
    return COMBINE[reduction](np.stack(parts), axis=0).astype(x.dtype)


def ref_same(x, *args, **_):
    return x


def ref_collective_permute(x, mesh, sharding, axis, pairs, **_):
    parts, d = blocks(x, mesh, sharding, axis)
    out = [np.zeros_like(p) for p in parts]
    for s, t in zip(pairs[0::2], pairs[1::2]):
        out[t] = parts[s]
    return np.concatenate(out, axis=d)


REFERENCES = {
    "shard": ref_same,
    "all_reduce": ref_all_reduce,
    "all_gather": ref_same,
    "reduce_scatter": ref_all_reduce,
    "all_to_all": ref_same,
    "collective_permute": ref_collective_permute,
}


def reference(name, x, **attrs):
    return REFERENCES[name](x, **attrs)


# --- the rules ---------------------------------------------------------------------------

F = TensorType((8, 6), "f32")


@pytest.mark.parametrize("name,attrs,message", [
    ("shard", dict(mesh=(2, 2), sharding=(0,)), "must have 2 entries"),
    ("shard", dict(mesh=(2, 2), sharding=(0, 2)), "names mesh axis 2"),
    ("shard", dict(mesh=(2, 2), sharding=(0, 0)), "splits two dimensions"),
    ("shard", dict(mesh=(4,), sharding=(-1, 0)), "dimension 1 of size 6 is not divisible"),
    ("shard", dict(mesh=(), sharding=(-1, -1)), "at least one axis"),
    ("all_reduce", dict(mesh=(2, 2), sharding=(0, -1), axis=1, reduction="sum"), "not split along mesh axis 1"),
    ("all_reduce", dict(mesh=(2, 2), sharding=(0, -1), axis=0, reduction="mean"), "reduction must be one of"),
    ("reduce_scatter", dict(mesh=(4,), sharding=(0, -1), axis=0, dim=1, reduction="sum"), "not divisible"),
    ("reduce_scatter", dict(mesh=(2, 2), sharding=(0, 1), axis=0, dim=1, reduction="sum"), "already split"),
    ("all_to_all", dict(mesh=(2,), sharding=(0, -1), axis=0, split_dim=0, concat_dim=0), "another dimension than"),
    ("all_to_all", dict(mesh=(2,), sharding=(0, -1), axis=0, split_dim=0, concat_dim=1), "is not the dimension"),
    ("collective_permute", dict(mesh=(2,), sharding=(0, -1), axis=0, pairs=(0, 1, 1, 1)), "twice"),
    ("collective_permute", dict(mesh=(2,), sharding=(0, -1), axis=0, pairs=(0, 2)), "out of range"),
])
def test_rules_refuse(name, attrs, message):
    with pytest.raises(ShapeError, match=message):
        infer(name, F, **attrs)


def test_rules_shapes():
    assert infer("all_reduce", F, mesh=(2, 2), sharding=(0, 1), axis=1, reduction="max")[0].shape == (8, 3)
    assert infer("reduce_scatter", TensorType((8, 8), "f32"), mesh=(4,), sharding=(0, -1), axis=0, dim=1,
                 reduction="sum")[0].shape == (2, 8)
    assert infer("all_gather", F, mesh=(2, 2), sharding=(0, 1), axis=0)[0] == F
    with pytest.raises(ShapeError, match="numeric"):
        infer("all_reduce", TensorType((8, 6), "i1"), mesh=(2,), sharding=(0, -1), axis=0, reduction="sum")


def _meshes_and_shardings():
    for mesh in [(4,), (2, 2), (1, 4), (2, 1, 2)]:
        for rank in (1, 2, 3):
            for sharding in itertools.product(range(-1, len(mesh)), repeat=rank):
                used = [a for a in sharding if a >= 0]
                if len(used) == len(set(used)):
                    yield mesh, sharding


def test_sharding_text_is_jaxs():
    """The ``mhlo.sharding`` a ``lazy.shard`` lowers to is the layout jax's
    NamedSharding gives the same spec (compared as XLA parses them)."""
    from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec
    from jax._src.lib import xla_client as xc

    from lazycore.passes.lowering.collectives import hlo_sharding

    count = 0
    for mesh, sharding in _meshes_and_shardings():
        names = tuple(f"a{i}" for i in range(len(mesh)))
        abstract = AbstractMesh(mesh, names, axis_types=(AxisType.Auto,) * len(mesh))
        spec = PartitionSpec(*(None if a < 0 else names[a] for a in sharding))
        want = NamedSharding(abstract, spec)._to_xla_hlo_sharding(len(sharding))
        got = xc.HloSharding.from_string(hlo_sharding(mesh, sharding))
        assert got == want, (mesh, sharding, str(got), str(want))
        count += 1
    assert count > 100


# --- the API in one process ----------------------------------------------------------------


def test_mesh_arguments():
    one = lc.Mesh((1,), ("d",))
    assert lc.Mesh([1], ["d"]) is one  # one object per mesh
    assert one.name == "mesh(d=1 over cpu:0)"
    with pytest.raises(ValueError, match="needs 2 devices; there are 1 cpu devices"):
        lc.Mesh((2,), ("d",))
    with pytest.raises(ValueError, match="needs 2 axis names"):
        lc.Mesh((1, 1), ("d",))
    with pytest.raises(ValueError, match="must differ"):
        lc.Mesh((1, 1), ("d", "d"))
    with pytest.raises(ValueError, match="positive integers"):
        lc.Mesh((0,), ("d",))
    with pytest.raises(ValueError, match="no device 'cpu:7'"):
        lc.Mesh((1,), ("d",), devices=["cpu:7"])


def test_bad_specs_raise_at_the_call():
    mesh = lc.Mesh((1,), ("d",))
    x = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match="has 3 entries, more than the 2 dimensions"):
        lc.shard(x, mesh, ("d", None, None))
    with pytest.raises(ValueError, match="'model' is not an axis of mesh"):
        lc.shard(x, mesh, ("model", None))
    with pytest.raises(ValueError, match="splits two dimensions"):
        lc.shard(x, mesh, ("d", "d"))
    with pytest.raises(TypeError, match="axis names or None"):
        lc.shard(x, mesh, (0, None))
    with pytest.raises(TypeError, match="a tuple"):
        lc.shard(x, mesh, "d")
    with pytest.raises(TypeError, match="lazycore.Mesh"):
        lc.shard(x, "cpu:0", ("d",))


def test_mixing_meshes_raises_at_the_call():
    a = lc.shard(np.ones((2, 3), np.float32), lc.Mesh((1,), ("a",)), ("a", None))
    b = lc.shard(np.ones((2, 3), np.float32), lc.Mesh((1,), ("b",)), ("b", None))
    with pytest.raises(ValueError, match="values of two meshes"):
        lc.apply("add", a, b)
    with pytest.raises(ValueError, match="values of two meshes, or of a mesh and a single device"):
        lc.apply("add", a, lc.from_numpy(np.ones((2, 3), np.float32)))
    with pytest.raises(ValueError, match="never move between meshes"):
        lc.shard(a, lc.Mesh((1,), ("b",)), ("b", None))
    with pytest.raises(ValueError, match="not on mesh"):
        lc.all_gather(a, lc.Mesh((1,), ("b",)), "b")


def test_collective_needs_a_known_layout():
    mesh = lc.Mesh((1,), ("d",))
    x = lc.from_numpy(np.ones((4, 6), np.float32), mesh)  # replicated
    with pytest.raises(ValueError, match="not split along mesh axis 'd'"):
        lc.all_reduce(x, mesh, "d")
    y = lc.apply("exp", x)
    with pytest.raises(ValueError, match="not known before it runs"):
        lc.all_reduce(y, mesh, "d")
    assert lc.sharding_of(lc.all_reduce(y, mesh, "d", spec=("d", None))) == (None, None)
    with pytest.raises(ValueError, match="op must be one of"):
        lc.all_reduce(y, mesh, "d", op="mean", spec=("d", None))
    with pytest.raises(ValueError, match="twice"):
        lc.collective_permute(lc.shard(y, mesh, ("d", None)), mesh, "d", [(0, 0), (0, 0)])


def test_layouts_travel_with_values():
    mesh = lc.Mesh((1, 1), ("data", "model"))
    x = lc.shard(np.arange(24.0, dtype=np.float32).reshape(4, 6), mesh, ("data",))
    assert lc.sharding_of(x) == ("data", None)
    y = lc.apply("exp", x)
    assert lc.sharding_of(y) is None  # XLA decides
    z = lc.shard(y, mesh, (None, "model"))
    assert z.value.node.op == "shard" and lc.sharding_of(z) == (None, "model")
    assert lc.sharding_of(lc.all_to_all(z, mesh, "model", split_dim=0, concat_dim=1)) == ("model", None)
    assert lc.sharding_of(lc.from_numpy(np.ones(3, np.float32))) is None  # a single device
    np.testing.assert_allclose(lc.to_numpy(z), np.exp(np.arange(24.0).reshape(4, 6)), rtol=1e-6)


# --- on 4 devices ----------------------------------------------------------------------------

CASES_4 = [
    ("shard", (4,), (0, -1), {}),
    ("shard", (2, 2), (1, 0), {}),
    ("all_reduce", (4,), (0, -1), dict(axis=0, reduction="sum")),
    ("all_reduce", (2, 2), (0, 1), dict(axis=1, reduction="max")),
    ("all_reduce", (2, 2), (-1, 0), dict(axis=0, reduction="min")),
    ("all_reduce", (2, 2), (0, -1), dict(axis=0, reduction="prod")),
    ("all_gather", (2, 2), (0, 1), dict(axis=0)),
    ("all_gather", (4,), (-1, 0), dict(axis=0)),
    ("reduce_scatter", (4,), (0, -1), dict(axis=0, dim=1, reduction="sum")),
    ("reduce_scatter", (2, 2), (1, -1), dict(axis=1, dim=0, reduction="sum")),
    ("all_to_all", (2, 2), (0, -1), dict(axis=0, split_dim=1, concat_dim=0)),
    ("all_to_all", (4,), (-1, 0), dict(axis=0, split_dim=0, concat_dim=1)),
    ("collective_permute", (4,), (0, -1), dict(axis=0, pairs=(0, 1, 1, 2, 2, 3, 3, 0))),
    ("collective_permute", (2, 2), (1, 0), dict(axis=1, pairs=(0, 1))),
]


def _ops_on_four_devices():
    """Every op of the family, in one program over the mesh, against the references."""
    import jax

    assert len(jax.devices()) == 4
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    for name, mesh_shape, sharding, extra in CASES_4:
        names = tuple("xyz"[:len(mesh_shape)])
        mesh = lc.Mesh(mesh_shape, names)
        attrs = dict(mesh=mesh_shape, sharding=sharding, **extra)
        # laid out as the op expects, by the data, and again inside the program
        spec = mesh.spec_names(sharding)
        v = lc.shard(lc.apply("neg", lc.shard(x, mesh, spec)), mesh, spec)
        got = lc.to_numpy(lc.apply(name, v, **attrs))
        want = reference(name, -x, **attrs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {attrs}")


def test_ops_on_four_devices():
    run_isolated(__file__, "_ops_on_four_devices", env=FOUR_DEVICES)


def _api_on_four_devices():
    from lazycore.observe import metrics

    rng = np.random.default_rng(1)
    mesh = lc.Mesh((2, 2), ("data", "model"))
    h = rng.standard_normal((8, 4)).astype(np.float32)
    x = lc.shard(h, mesh, ("data", None))
    blocks4 = np.split(h, 2, axis=0)
    np.testing.assert_allclose(lc.to_numpy(lc.all_reduce(x, mesh, "data")), blocks4[0] + blocks4[1], rtol=1e-6)
    np.testing.assert_array_equal(lc.to_numpy(lc.all_gather(x, mesh, "data")), h)
    s = lc.reduce_scatter(x, mesh, "data", dim=1)
    assert lc.sharding_of(s) == (None, "data")
    np.testing.assert_allclose(lc.to_numpy(s), blocks4[0] + blocks4[1], rtol=1e-6)
    shifted = lc.collective_permute(x, mesh, "data", [(0, 1), (1, 0)])
    np.testing.assert_array_equal(lc.to_numpy(shifted), np.concatenate([blocks4[1], blocks4[0]]))
    # XLA's layouts come back with the results, readable as specs
    y = lc.apply("exp", x)
    lc.mark_step(wait=True)
    assert lc.sharding_of(y) == ("data", None)
    np.testing.assert_allclose(lc.to_numpy(y), np.exp(h), rtol=1e-6)

    # device data moves between layouts without a program; a dimension the
    # axis does not divide is refused at the call
    z = lc.shard(y, mesh, (None, "model"))
    assert lc.sharding_of(z) == (None, "model") and not z.pending
    np.testing.assert_allclose(lc.to_numpy(z), np.exp(h), rtol=1e-6)
    try:
        lc.shard(np.zeros((3, 4), np.float32), mesh, ("data", None))
    except ValueError as e:
        assert "dimension 0 of size 3 cannot be split evenly along mesh axis 'data' of size 2" in str(e)
    else:
        raise AssertionError("an indivisible dimension was laid out")

    # one program for the mesh, compiled once; a new layout is a new program
    metrics.reset()
    for _ in range(3):
        a = lc.shard(h, mesh, ("data", None))
        b = lc.apply("mul", a, a)
        lc.to_numpy(lc.apply("reduce_sum", b, dims=(0,)))
    c = metrics.counters()
    assert c["compiles"] == 1 and c["executions"] == 3, c
    a = lc.shard(h, mesh, (None, "model"))
    np.testing.assert_allclose(lc.to_numpy(lc.apply("reduce_sum", lc.apply("mul", a, a), dims=(0,))),
                               (h * h).sum(0), rtol=1e-5)
    assert metrics.counters()["compiles"] == 2

    # a recompile for a new layout says so, with the line that used the input
    import contextlib
    import io

    from lazycore.ir.config import override

    err = io.StringIO()
    with override(debug=1), contextlib.redirect_stderr(err):
        for spec in [("data", None), (None, "model")]:
            a = lc.shard(h, mesh, spec)
            lc.to_numpy(lc.apply("reduce_max", lc.apply("abs", a), dims=(1,)))
    assert "recompile: input 0 layout (None, 'model') vs ('data', None); first used by lazy.abs at " \
        f"{__file__}:" in err.getvalue(), err.getvalue()

    try:
        lc.from_buffer(lc.to_buffer(x))
    except ValueError as e:
        assert "spans 4 devices" in str(e)
    else:
        raise AssertionError("a buffer of 4 devices was taken as one device's")

    # a value of a single device moves to the mesh only when asked
    single = lc.from_numpy(h)
    try:
        lc.apply("add", single, x)
    except ValueError as e:
        assert "never mix" in str(e)
    else:
        raise AssertionError("a single device's value mixed with a mesh's")
    np.testing.assert_array_equal(lc.to_numpy(lc.shard(single, mesh, ("data",))), h)


def test_api_on_four_devices():
    run_isolated(__file__, "_api_on_four_devices", env=FOUR_DEVICES)


def _disk_cache_run():
    """A mesh program from the persistent compile cache: the second process loads
    it (with the layouts of its results) instead of compiling."""
    import os

    from lazycore.observe import metrics

    mesh = lc.Mesh((2, 2), ("data", "model"))
    h = np.arange(32, dtype=np.float32).reshape(8, 4)
    x = lc.shard(h, mesh, ("data", "model"))
    y = lc.apply("mul", x, x)
    z = lc.apply("reduce_sum", y, dims=(1,))
    np.testing.assert_array_equal(lc.to_numpy(z), (h * h).sum(1))
    assert lc.sharding_of(y) == ("data", "model")
    c = metrics.counters()
    if os.environ["EXPECT"] == "compile":
        assert c["compiles"] == 1 and c["disk_cache_writes"] == 1, c
    else:
        assert c["compiles"] == 0 and c["disk_cache_hits"] == 1, c


def test_mesh_programs_in_the_persistent_cache(tmp_path):
    for expect in ("compile", "load"):
        run_isolated(__file__, "_disk_cache_run",
                     env=dict(FOUR_DEVICES, LAZYCORE_CACHE_DIR=str(tmp_path), EXPECT=expect))
