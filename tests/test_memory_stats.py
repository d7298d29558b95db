"""Peak memory and XLA's figures for every program (issue 43, item 6):
``torch.lazy``'s ``max_memory_allocated``, ``reset_peak_memory_stats``,
``memory_stats``, ``mem_get_info``; ``lazycore.metrics.memory()``'s peaks;
``lazycore.metrics.programs(every=True)``. The CPU client keeps no allocator
figures, so these are lazycore's own account: checked against the bytes of
the arrays made and against XLA's memory analysis of the programs run."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import metrics

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _no_stray_garbage():
    gc.collect()
    gc.disable()  # no other test's garbage may go away in between
    try:
        yield
    finally:
        gc.enable()


def _program(number=None):
    progs = metrics.programs(every=True)
    assert progs, "no program described"
    return progs[-1] if number is None else next(p for p in progs if p.number == number)


def test_every_program_has_xlas_memory_figures_not_only_mesh_programs():
    metrics.reset()
    a = lnp.asarray(np.ones((64, 32), np.float32))
    b = (a * 3).sum(axis=1)
    assert float(b[0]) == 96.0  # memory: the barrier
    assert metrics.programs() == []  # (the mesh programs: none)
    prog = _program()
    assert prog.device == "cpu:0" and prog.nodes > 0 and not prog.loaded
    assert prog.where.endswith(f"test_memory_stats.py:{_line_of('memory: the barrier')}"), prog.where
    # its argument is a (64 x 32 float32) and its result b (64 float32)
    assert prog.memory["argument"] >= a.nbytes, prog.memory
    assert prog.memory["output"] >= b.nbytes, prog.memory
    assert {"alias", "temp", "generated_code"} <= set(prog.memory), prog.memory
    text = metrics.report()
    assert f"program {prog.number} on cpu:0, {prog.nodes} nodes, compiled for the barrier at" in text, text
    assert "peak memory since the last reset" in text, text
    metrics.reset()
    assert metrics.programs(every=True) == []


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if f"# {marker}" in line and "_line_of" not in line)


def test_torch_peak_outlives_the_values_and_resets_to_what_is_held():
    dev = ltorch.device()
    mod = torch.lazy
    mod.synchronize()
    mod.reset_peak_memory_stats()
    base = mod.memory_allocated()
    assert mod.max_memory_allocated() == base

    big = torch.full((1024, 1024), 2.0, device=dev)  # 4 MiB made by a program
    mod.synchronize()
    assert mod.memory_allocated() == base + 4 * MIB
    prog = _program()
    # at its barrier: what was held, plus all the program needs (its argument, the
    # fill value, is no live tensor's), as XLA's memory analysis says
    assert mod.max_memory_allocated() == base + prog.peak
    assert 4 * MIB <= prog.peak < 4 * MIB + 64
    stats = mod.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + 4 * MIB
    assert stats["allocated_bytes.all.peak"] == mod.max_memory_allocated()
    assert stats["allocation.all.peak"] >= stats["allocation.all.current"] >= 1

    assert mod.memory_reserved() == mod.memory_allocated()  # (the CPU: no caching allocator)
    assert mod.max_memory_reserved() == mod.max_memory_allocated()
    del big
    assert mod.memory_allocated() == base
    assert mod.max_memory_allocated() >= base + 4 * MIB  # the peak stays
    mod.reset_peak_memory_stats()
    assert mod.max_memory_allocated() == base
    assert mod.memory_stats()["allocated_bytes.all.peak"] == base


def test_a_donated_update_needs_no_second_buffer_and_the_peak_says_so():
    """``x = x * 0.5 + 1`` in a loop: with donation XLA writes the result into
    x's buffer (alias), so the step holds one 4 MiB buffer at a time; without,
    two. The peak tells them apart."""

    def run():
        x = lnp.asarray(np.zeros((1024, 1024), np.float32))
        lnp.asarray(x)  # uploaded before the peaks start over
        metrics.reset()
        for _ in range(4):
            x = x * 0.5 + 1
            lazycore.mark_step()
        assert float(x[0, 0]) == 1.875
        return metrics.memory()["cpu:0"]["peak_bytes"]

    donated = run()
    with override(donation=False):
        kept = run()
    assert 4 * MIB <= donated < 5 * MIB, donated
    assert kept >= 8 * MIB, kept


def test_metrics_memory_reports_the_peak_per_device():
    metrics.reset()
    a = lnp.asarray(np.ones((256, 256), np.float32))
    b = lnp.tanh(a) @ a + 1  # a 256 KiB result next to a
    float(b[0, 0])
    mem = metrics.memory()["cpu:0"]
    assert mem["bytes"] >= a.nbytes + b.nbytes
    assert mem["peak_bytes"] >= mem["bytes"] and mem["peak_buffers"] >= mem["buffers"]
    del b
    after = metrics.memory()["cpu:0"]
    assert after["bytes"] == mem["bytes"] - 256 * 256 * 4
    assert after["peak_bytes"] == mem["peak_bytes"]


def test_mem_get_info_is_the_hosts_memory_on_the_cpu():
    ltorch.device()
    free, total = torch.lazy.mem_get_info()
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    assert total == info["MemTotal"]
    assert 0 < free <= total
    assert abs(free - info["MemAvailable"]) < total // 10  # (the host's other processes move it)


def test_once_asked_the_peak_counts_values_the_program_does_not_read():
    other = lnp.asarray(np.ones((1024, 1024), np.float32))  # 4 MiB no program below reads
    float(other[0, 0])
    metrics.memory()  # the first question: from now on each barrier counts what live values hold
    metrics.reset()
    a = lnp.asarray(np.ones((64,), np.float32))
    assert float((a * 2).sum()) == 128.0
    prog = _program()
    peak = metrics.memory()["cpu:0"]["peak_bytes"]
    assert peak >= other.nbytes + prog.peak, (peak, prog.memory)
