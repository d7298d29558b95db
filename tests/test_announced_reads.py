"""Every device-to-host copy lazycore makes for a user's call is announced
(runtime/hostcopy.py: the ``transfer`` event, ``transfers_to_host`` and
``bytes_to_host``), including the ones made by export and NaN hunting."""

from __future__ import annotations

import gc

import numpy as np
import torch

import lazycore
from lazycore import metrics


def _copies():
    c = metrics.counters()
    return c.get("transfers_to_host", 0), c.get("bytes_to_host", 0)


def test_an_exported_constant_is_read_as_one_announced_copy():
    dev = torch.device("lazy")
    w = (torch.arange(12, dtype=torch.float32).reshape(3, 4).to(dev) * 2)
    lazycore.mark_step(wait=True)  # w is a device buffer now: the export reads it as a constant
    before = _copies()
    exported = lazycore.export(lambda x: x @ w, torch.ones(2, 3).to(dev))
    after = _copies()
    assert after[0] - before[0] == 1
    assert after[1] - before[1] == 12 * 4
    (got,) = exported.call(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(got, np.ones((2, 3), np.float32) @ (np.arange(12, dtype=np.float32).reshape(3, 4) * 2))


def test_nan_hunting_announces_the_results_it_reads():
    dev = torch.device("lazy")
    gc.collect()
    lazycore.mark_step(wait=True)
    x = torch.ones(5, dtype=torch.float32).to(dev)
    y = x * 3  # one pending floating result: the check reads it once
    before = _copies()
    with lazycore.config.debug_nans():
        lazycore.mark_step(wait=True)
    after = _copies()
    assert after[0] - before[0] >= 1
    assert after[1] - before[1] >= 5 * 4
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(5, 3, np.float32))
