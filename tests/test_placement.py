"""What the report says about programs over meshes and memory per device
(``lazycore.observe.placement``): layouts, the collectives XLA inserted, a
recompile caused by a layout change, bytes per physical device.

The mesh checks run on 4 forced CPU devices in a child process (tests/isolated.py).
"""

from __future__ import annotations

import io
import os
import sys

import numpy as np

import lazycore as lc
from lazycore.observe import placement

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from isolated import FOUR_DEVICES, run_isolated  # noqa: E402


def test_collectives_are_counted_by_opcode_not_by_name():
    hlo = "\n".join([
        "  %all-reduce.1 = f32[4]{0} all-reduce(f32[4]{0} %p), channel_id=1, to_apply=%sum",
        "  %ag-start = (f32[2]{0}, f32[8]{0}) all-gather-start(f32[2]{0} %all-reduce.1), dimensions={0}",
        "  %ag-done = f32[8]{0} all-gather-done((f32[2]{0}, f32[8]{0}) %ag-start)",
        "  %cp = f32[8]{0} collective-permute(f32[8]{0} %ag-done), source_target_pairs={{0,1},{1,0}}",
        "  ROOT %t = (f32[8]{0}) tuple(f32[8]{0} %cp)",
    ])
    assert placement.collectives(hlo) == {"all-reduce": 1, "all-gather": 1, "collective-permute": 1}
    assert placement.collectives("  ROOT %add = f32[] add(f32[] %a, f32[] %b)") == {}


def test_one_device_programs_are_not_listed_and_memory_counts_live_buffers():
    import lazycore.numpy as lnp
    from lazycore.observe import metrics

    metrics.reset()
    a = lnp.asarray(np.ones((8, 4), np.float32))
    b = (a * 3).sum(axis=0)
    assert float(b[0]) == 24.0
    assert metrics.programs() == []
    mem = metrics.memory()
    assert sum(s["bytes"] for s in mem.values()) >= a.nbytes + b.nbytes
    assert "mesh programs" not in metrics.report()


def _mesh_report():
    import lazycore.numpy as lnp
    from lazycore.ir.config import override
    from lazycore.observe import debug, metrics

    metrics.reset()
    lines = io.StringIO()  # the debug log, read at the end
    debug.reset()
    debug.stream = lines
    with override(debug=1):
        _mesh_programs(lnp, metrics)
    debug.stream = None
    debug.reset()
    log = lines.getvalue()
    assert "recompile: input 0 layout (None, 'data') vs ('data', None)" in log, log
    assert f"test_placement.py:{_line_of('placement: relaid')}" in log, log
    assert len(metrics.programs()) == 2
    metrics.reset()
    assert metrics.programs() == []


def _mesh_programs(lnp, metrics):
    mesh = lc.Mesh((4,), ("data",))
    x = lnp.shard(lnp.asarray(np.arange(32, dtype=np.float64).reshape(8, 4)), mesh, ("data", None))
    w = lnp.shard(lnp.asarray(np.ones((8, 4))), mesh, (None, None))
    total = (x * w).sum()  # the sum over the split rows
    assert float(total) == float(np.arange(32).sum())  # placement: the barrier

    (prog,) = metrics.programs()
    assert prog.mesh == {"data": 4}
    assert prog.inputs[:2] == ["('data', None)", "(None, None)"], prog.inputs
    assert prog.outputs == ["()"], prog.outputs
    # each device sums its rows; XLA adds them up across the mesh
    assert prog.collectives.get("all-reduce", 0) >= 1, prog.collectives
    assert prog.where.endswith(f"test_placement.py:{_line_of('placement: the barrier')}"), prog.where
    assert prog.memory.get("argument", 0) > 0, prog.memory

    # x's block (2 rows of 4 float64) on each device, w whole on each
    mem = metrics.memory()
    assert sorted(mem) == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"], mem
    for name, stats in mem.items():
        assert stats["bytes"] >= 2 * 4 * 8 + 8 * 4 * 8, (name, stats)

    text = metrics.report()
    assert "mesh programs: 1" in text and "mesh data=4, compiled for the barrier at" in text, text
    assert "collectives XLA inserted: all-reduce" in text, text
    assert "device memory (live lazy values):" in text and "cpu:3:" in text, text

    # the same graph with x laid out by columns: a new program, and the debug log says why, with the user's line
    x = lnp.shard(lnp.asarray(np.arange(32, dtype=np.float64).reshape(8, 4)), mesh, (None, "data"))
    float((x * w).sum())  # placement: relaid


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if f"# {marker}" in line and "_line_of" not in line)


def test_mesh_programs_and_memory_per_device_in_the_report():
    run_isolated(__file__, "_mesh_report", env=FOUR_DEVICES)
