"""A slice start's place is its own line's: a call that ends in host reads of
computed values (generate() copying its tokens out) runs no barrier, so
starts it made after its last step share a step with the next call's first
starts. Counted among all the step's starts, the next call's batch rows
(whisper's ``input_features[i:i + 1]``) took places by how many starts the
call before had left, and a call of another kind left another number: row 1
met row 0's value of an earlier call, a parameter and a compile (hunt 30's
whisper-sample and whisper-static after whisper-beam2: compiles [2, 1],
issue 40). Counted per line (and value sliced), a row's place is the same in
every call (lazycore.trace.scalar_policy.ScalarPolicy.start_varies)."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter", "device_values")


def _compiles():
    return metrics.counters().get("compiles", 0)


def _call(feats, ids, tail, steps=2):
    """A generate()-like call: the batch's rows sliced one by one at one line,
    a few steps each ending in a barrier, then ``tail`` starts over another
    value at another line after the last step (a beam search's bookkeeping
    of its output), and the result copied to the host: no barrier at the end."""
    h = torch.cat([feats[i:i + 1] * 1 for i in range(feats.shape[0])])
    for _ in range(steps):
        h = h * 2 + 1
        ltorch.mark_step()
    for j in range(tail):
        ids[:, j:j + 1] + 1  # (read and dropped: the tail's starts)
    return h.cpu()


def test_calls_leaving_other_numbers_of_starts_compile_nothing_in_a_second_call(dev):
    feats = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    ids = torch.arange(12).reshape(2, 6)
    want = _call(feats, ids, 0)
    fl, il = feats.to(dev) + 0, ids.to(dev) + 0  # (device values: no host copy answers the reads)
    ltorch.mark_step(wait=True)
    counts = {}
    for tail in (3, 2):  # two kinds of call, one after the other, each twice
        counts[tail] = []
        for _ in range(2):
            c0 = _compiles()
            got = _call(fl, il, tail)
            counts[tail].append(_compiles() - c0)
            assert torch.equal(got, want)
    # before: {3: [2, 0], 2: [0, 1]} (the second kind's second call met the first kind's row-0 place with row 1)
    assert counts[3][1] == 0 and counts[2] == [0, 0], counts
