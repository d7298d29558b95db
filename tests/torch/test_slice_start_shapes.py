"""A slice's start that follows its operand's growing length (transformers'
NoRepeatNGramLogitsProcessor: ``input_ids[:, cur_len + 1 - n:]`` over the
tokens so far) is a number of the scalar policy whose place is kept per
value sliced (lazycore.trace.scalar_policy.ScalarPolicy.start_varies,
lazycore.trace.views._sliced: the storage and the view's sizes): at a
new shape the program is new whatever the start is, so promoting the start
there won nothing, and it made the first shape's start a parameter in a
second generate(), whose first step then missed the program compiled with
it baked (hunt 30's bart-beam2-penalty: compiles [10, 1], issue 40)."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter", "device_values")


def _compiles():
    return metrics.counters().get("compiles", 0)


def _twice(run, want) -> list:
    """``run()`` twice on the lazy device, each result eager's ``want``; the
    programs each run compiled."""
    counts = []
    for _ in range(2):
        c0 = _compiles()
        got = run()
        counts.append(_compiles() - c0)
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w)
    return counts


def _grow(x, steps):
    """A token loop: each step reads the last token through a start counted
    from the front, as the n-gram processor does, and appends one token."""
    outs = []
    for _ in range(steps):
        n = x.shape[1]
        last = x[:, n - 1:]  # (the start: n - 1, a new number at every length)
        x = torch.cat([x, last * 2 + 1], 1)
        ltorch.mark_step()
        outs.append(x.cpu())
    return outs


def test_a_second_loop_over_the_same_lengths_compiles_nothing(dev):
    x = torch.tensor([[1, 2], [3, 4]])
    want = _grow(x, 4)
    xl = (x.to(dev) + 0)  # (a value of the device: no host copy answers the reads)
    ltorch.mark_step()
    counts = _twice(lambda: _grow(xl, 4), want)
    # before: [4, 1] (the start at length 2 baked in the first loop, a parameter in the second)
    assert counts[1] == 0, counts


def test_no_repeat_ngram_over_two_runs_compiles_nothing_new(dev):
    logits_process = pytest.importorskip("transformers.generation.logits_process")
    proc = logits_process.NoRepeatNGramLogitsProcessor(2)
    ids = torch.tensor([[5, 1, 5, 2], [3, 3, 4, 3]])
    scores = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))

    def run(device):
        out = []
        for n in range(2, 5):
            out.append(proc(ids[:, :n].to(device) + 0, scores.to(device) + 0).cpu())
            ltorch.mark_step()
        return out

    want = run("cpu")
    counts = _twice(lambda: run(dev), want)
    assert counts[1] == 0, counts


def _views(buf, steps):
    """generate()'s beam search: the tokens so far are a view of a fixed buffer
    (``running_sequences[:, :, :cur_len]`` flattened), whose last token the
    n-gram processor reads through a start counted from the front."""
    outs = []
    for n in range(1, steps + 1):
        flat = buf[:, :, :n].reshape(4, n)
        outs.append(flat[:, n - 1:] * 2 + flat.sum(1, keepdim=True))
        ltorch.mark_step()
        outs[-1] = outs[-1].cpu()
    return outs


def test_a_second_loop_over_a_buffers_growing_view_compiles_nothing(dev):
    buf = torch.arange(24).reshape(2, 2, 6)
    want = _views(buf, 5)
    bl = buf.to(dev) + 0
    ltorch.mark_step()
    counts = _twice(lambda: _views(bl, 5), want)
    # before: [5, 1] (keyed by the buffer's type alone, the second start promoted the first loop's place)
    assert counts[1] == 0, counts
