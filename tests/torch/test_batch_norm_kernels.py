"""Batch norm in training runs its per-channel work once per channel in XLA's
CPU program (issue 40: ResNet-50's step).

Eager's roundings (``batch_norm_stats``, ``native_batch_norm_backward``) make
each per-channel value a chain of cheap ops: an exact division's remainder
correction, keep-roundings fences. XLA's CPU fusion copied those chains into
every full-size loop that reads them through a broadcast, so each element of
``(N, C, H, W)`` recomputed its channel's chain (BatchNorm2d at ResNet-50's
(8, 256, 56, 56): 40-100 ops per element in three kernels), and it kept a
float64 copy of the whole input in memory, shared by the statistics' sum and
the output's fused multiply-add. These tests read the optimized HLO of the
program that ran: no full-size kernel holds the division's range checks
(``abs``, only there in these programs), none computes more than a few ops
per element, and no float64 value of the input's size is kept; the values are
eager's (``test_batch_norm_rounding``, ``test_bn_backward_sums``)."""

import re

import pytest
import torch

import lazycore
from lazycore.observe.kernels import kernels_of
from lazycore.runtime import pjrt

SHAPE = (4, 8, 16, 16)
_DIMS = ",".join(map(str, SHAPE))


def _launched(step) -> str:
    """The optimized HLO of the one program ``step`` runs (the launch log a kernel profile keeps)."""
    assert pjrt.LAUNCHES.log is None
    pjrt.LAUNCHES.log = log = []
    try:
        assert step() is not None
    finally:
        pjrt.LAUNCHES.log = None
    assert len(log) == 1, log
    return log[0][0].hlo_text()


def _entry(text: str) -> list[str]:
    lines = text[text.index("ENTRY"):].splitlines()
    return lines[1:lines.index("}")]


def _full_size_kernels(text: str) -> dict[str, tuple]:
    """The entry's kernels with a result of the input's size: name -> their ops."""
    kernels = kernels_of(text)
    out = {}
    for line in _entry(text):
        m = re.match(rf"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\w+\[{_DIMS}\]", line)
        if m and m.group(1) in kernels and kernels[m.group(1)].opcode == "fusion":
            out[m.group(1)] = kernels[m.group(1)].ops
    return out


def _step(dev, fmt):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(SHAPE[1]).to(dev)
    x = (torch.randn(SHAPE) * 3 + 1).contiguous(memory_format=fmt).to(dev).requires_grad_()
    gy = torch.randn(SHAPE).to(dev)
    lazycore.mark_step()

    def step():
        y = bn(x)  # (kept, as the next layer of a network keeps it: the output is a result)
        y.backward(gy)
        lazycore.mark_step()
        return y

    return _launched(step)


@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last], ids=["planes", "rows"])
def test_per_channel_work_is_not_copied_into_full_size_loops(dev, fmt):
    text = _step(dev, fmt)
    full = _full_size_kernels(text)
    assert full, _entry(text)
    for name, ops in full.items():
        assert "abs" not in ops, (name, ops)
        assert len([o for o in ops if o not in ("parameter", "constant", "broadcast", "bitcast")]) <= 12, (name, ops)
    wide = [line.strip()[:120] for line in _entry(text) if re.search(rf"=\s*f64\[{_DIMS}\]", line)]
    assert wide == []
