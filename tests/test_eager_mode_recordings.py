"""Eager mode (``lazycore.config.eager()``) leaves recordings whole, for every
frontend (runtime/eager.py: "a capture's first call ... keeps its program"):
a ``lazycore.numpy.capture`` step traced under it was run op by op inside its
trace, which the recording then refused as a barrier (a CaptureWarning after
three calls and no replay, where ``lazycore.torch.capture`` replays), and
``lazycore.export`` under it raised ExportError ("ran a barrier"), each op's
run being one (issue 43 item 3)."""

from __future__ import annotations

import warnings

import numpy as np

import lazycore
import lazycore.numpy as lnp


def _step(w, x):
    return w - 0.1 * np.tanh(w * x), (w * x).sum()


def test_a_numpy_capture_replays_under_eager_mode_with_the_values_of_a_lazy_run():
    lazy = lnp.capture(_step)
    w = lnp.asarray(np.ones(3, np.float32))
    for i in range(4):
        w, s = lazy(w, lnp.asarray(np.full(3, i, np.float32)))
    want = np.asarray(w)

    step = lnp.capture(_step)
    with lazycore.config.eager(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no CaptureWarning
        w = lnp.asarray(np.ones(3, np.float32))
        for i in range(4):
            w, s = step(w, lnp.asarray(np.full(3, i, np.float32)))
        assert (step.traces, step.replays) == (2, 2), step.why
    np.testing.assert_array_equal(np.asarray(w), want)


def test_export_under_eager_mode_exports_one_program():
    x = lnp.asarray(np.zeros(3, np.float32))
    plain = lazycore.export(lambda t: np.tanh(t) * 2.0 + 1.0, x)
    with lazycore.config.eager():
        exported = lazycore.export(lambda t: np.tanh(t) * 2.0 + 1.0, x)
    assert exported.mlir_text == plain.mlir_text
    arg = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_array_equal(exported.call(arg)[0], plain.call(arg)[0])
