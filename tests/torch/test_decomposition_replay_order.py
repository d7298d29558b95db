"""A decomposition is replayed whatever ran before it in the process.

tril's decomposition ends in ``where(mask, x, 0)``, whose C++ composite makes
the 0 a 0-d tensor on the lazy device (``empty``, then ``fill_``). Once any
earlier call has recorded that piece, it replays inside tril's recording, and
the handle it returns holds the constant its own recording made, in an
earlier step (a replay shares its constants): the fill into that handle is no
side effect, as the handle was made during tril's recording
(``Recorder._made_here``). Before, the recording took it for a handle from
outside, and tril was traced piece by piece at every call after any test that
had used ``where`` with a number (tests/torch/test_shared_memory_writes.py,
test_tensor.py), the replay lost.
"""

import os
import sys

import numpy as np
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import override

aten = torch.ops.aten

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _replay_counts import Dispatches as _Dispatches, digests as _digests, rand as _rand  # noqa: E402


def test_tril_replays_after_where_with_a_number_has_recorded_its_piece(dev, monkeypatch):
    mask = torch.ones(3, 3, dtype=torch.bool, device=dev)
    for _ in range(2):  # the piece (a 0-d tensor filled with the number) recorded, then replayed
        torch.where(mask, torch.ones(3, 3, device=dev), 0)
    ltorch.mark_step()
    first, second = _rand(6, 6).to(dev), _rand(6, 6, seed=10)
    on_device = second.to(dev)

    def call(x):
        ltorch.mark_step()  # each call at the same step-log position: the scalar policy decides alike
        return aten.tril(x, -1)

    with override(replay=False):
        traced = _digests(call(first))
    call(first)  # records, its piece replayed inside
    dispatches = _Dispatches(monkeypatch)
    got = call(on_device)
    assert dispatches.count == 1, "the replay runs none of the decomposition's pieces"
    assert torch.equal(got.cpu(), aten.tril(second, -1))
    assert _digests(call(first)) == traced


@pytest.mark.parametrize("made", ["before the input", "after the input"])
def test_an_update_of_a_handle_made_before_the_recording_is_still_a_side_effect(dev, made):
    # (the handle holds a constant, as a replayed piece's does: its age tells them apart)
    runs = []
    d = lazycore.default_device()

    def zeros():
        return lazycore.apply("constant", value=np.zeros((3,), np.float32), device=d)

    outside = zeros() if made == "before the input" else None

    @lazycore.replayed
    def accumulate(x):
        runs.append(1)
        outside.assign(lazycore.apply("add", outside, x))
        return lazycore.apply("mul", x, x)

    total = np.zeros(3, np.float32)
    for k in range(3):
        v = np.arange(3, dtype=np.float32) + k
        x = lazycore.from_numpy(v, d)
        if made == "after the input" and outside is None:
            outside = zeros()
        np.testing.assert_array_equal(lazycore.to_numpy(accumulate(x)), v * v)
        total += v
        np.testing.assert_array_equal(lazycore.to_numpy(outside), total)
    assert len(runs) == 3
