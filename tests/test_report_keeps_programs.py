"""An observer changes nothing it observes: ``lazycore.metrics.report()``
(and the memory walk behind it, ``placement.memory``) between rolled
training steps reads the layers' stacks where they are, without slicing
their rows out (which took a program per stack type and made the next
steps stack the rows again by programs of their own)."""

from __future__ import annotations

import os
import sys

import pytest

from lazycore.ir.config import override
from lazycore.observe import metrics, placement
from lazycore.observe.testing import capture

pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))
from test_rolling_training import _Run, _row  # noqa: E402

import lazycore.torch as ltorch  # noqa: E402
from _bits import BY_HAND  # noqa: E402 (tests/ is on the path)

COUNTED = ("compiles", "stack_compiles", "executions", "stack_executions")


def _steps(observe):
    """Counters after 3 rolled steps, ``observe()``, and 2 more; and the run."""
    with override(roll_loops=True), capture(fresh_cache=True):
        metrics.reset()
        run = _Run(ltorch.device()).step(3)
        observe()
        run.step(2)
        return {k: metrics.counters()[k] for k in COUNTED}, run


def _rows_unsliced(run):
    leaves = [p.detach().__lazycore_value__()._value.node for blk in run.model.blocks for p in blk.parameters()]
    assert all(leaf.row is not None for leaf in leaves)
    return all(leaf._buffer is None for leaf in leaves)


# CI: test_memory_counts_a_stack_once_without_slicing_its_rows takes the same memory walk (report() reads memory
# only through placement.memory) and checks the rows stay unsliced
@BY_HAND
def test_report_between_rolled_steps_compiles_and_runs_nothing_more(clean_runtime):
    quiet, _ = _steps(lambda: None)
    reports = []
    observed, run = _steps(lambda: reports.append(metrics.report()))
    assert observed == quiet  # before: stack_compiles 2 -> 13, and 126 or more stacking runs
    assert "device memory (live lazy values):" in reports[0]
    assert _rows_unsliced(run)


def test_memory_counts_a_stack_once_without_slicing_its_rows(clean_runtime):
    with override(roll_loops=True), capture(fresh_cache=True):
        run = _Run(ltorch.device()).step(3)
        assert _rows_unsliced(run)
        held = placement.memory()
        assert _rows_unsliced(run)  # the query read the stacks, not the rows
        # reading a row out gives it a buffer of its own besides its stack's: one more buffer, its bytes more
        w = run.model.blocks[2].fc.weight
        assert _row(w) is not None
        w.detach().cpu()
        more = placement.memory()
    total = lambda figures, key: sum(d[key] for d in figures.values())  # noqa: E731
    assert total(more, "buffers") == total(held, "buffers") + 1
    assert total(more, "bytes") == total(held, "bytes") + w.numel() * 4
