"""Writes into and at padded counts, and padded values read from host copies (issue 39).

Faster R-CNN's data-dependent counts (the boxes kept, the positives sampled,
the proposals of a pooler level) reach scatters: the sampler's ``mask[pos_idx]
= 1`` into a padded count of proposals, the pooler's ``result[idx_in_level] =
roi_align(...)`` at a padded count of indices. Padding refused both (every
count compiled its own program); now the updates at padded index positions
point past the operand, where XLA's scatter drops them, and an operand padded
where the indices select keeps its padding (runtime/padding.py ``_scatter``).
A padded upload's host copy (a loader's padded batch) answers reads as an
unpadded one's does (runtime/hostreads.py, runtime/reads.py).
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.fixture
def device_values(monkeypatch):
    """No upload keeps a host copy: values are the device's, as a model's
    are (a small upload's would answer these reads on the host)."""
    from lazycore.runtime import hostreads

    monkeypatch.setattr(hostreads, "KEPT_BYTES", 0)


def _count(name: str) -> int:
    return metrics.counters().get(name, 0)


def _marked(t, dev):
    return ltorch.dynamic(t.to(dev), 0)


def test_replace_at_padded_indices_writes_only_the_valid_ones(dev, device_values):
    """``out[idx] = idx * 2 + 1`` (index_put, replace) with ``idx`` of 5, 6
    and 7 entries marked (the bucket of 8): one program, eager's values, and
    position 0, which the padding's zero indices would hit, untouched."""
    compiles = []
    for n in (5, 6, 7):
        before = _count("compiles")
        idx = torch.randperm(12, generator=torch.Generator().manual_seed(n))[:n] + 3
        want = torch.zeros(16)
        want[idx] = idx.float() * 2 + 1
        li = _marked(idx, dev)
        out = torch.zeros(16, device=dev)
        out[li] = li.float() * 2 + 1
        got = out.cpu()
        assert torch.equal(got, want), (n, got, want)
        assert got[0] == 0
        compiles.append(_count("compiles") - before)
    assert compiles == [1, 0, 0], compiles


def test_a_mask_set_at_sampled_positions_of_a_padded_count(dev, device_values):
    """The sampler's ``mask = zeros_like(matched, uint8); mask[pos] = 1``:
    the operand has a padded count (9, 10, 11 proposals: the bucket of 16),
    the positions are unpadded; the mask's sum and the mask itself as eager's."""
    compiles = []
    for n in (9, 10, 11):
        before = _count("compiles")
        g = torch.Generator().manual_seed(n)
        matched = torch.randint(-1, 3, (n,), generator=g)
        pos = torch.tensor([1, 4, 7])
        want = torch.zeros_like(matched, dtype=torch.uint8)
        want[pos] = 1
        lm = _marked(matched, dev)
        mask = torch.zeros_like(lm, dtype=torch.uint8)
        mask[pos.to(dev)] = 1
        total = (mask.to(torch.int64) * lm).sum()
        ltorch.mark_step()  # (both in one program: a read of the mask alone would be a program of its own)
        assert torch.equal(mask.cpu(), want)
        assert total.item() == (want.to(torch.int64) * matched).sum().item()
        compiles.append(_count("compiles") - before)
    assert compiles[1:] == [0, 0], compiles


def test_rows_written_at_a_padded_count_into_a_padded_operand(dev, device_values):
    """The pooler's ``result[idx_in_level] = rows``: ``result`` has a padded
    count of rows (9, 10, 11), ``idx`` another (5, 6, 7), the rows are
    computed from the padded ``idx``; then ``index_put_`` with
    ``accumulate=True`` adds at them again (duplicates of the first index)."""
    compiles = []
    for n, m in ((9, 5), (10, 6), (11, 7)):
        before = _count("compiles")
        g = torch.Generator().manual_seed(n)
        x = torch.randn(n, 3, generator=g)
        idx = torch.randperm(n, generator=g)[:m]
        dup = torch.cat([idx[:1].expand(2), idx[2:]])  # m entries, the first index twice
        want = torch.zeros_like(x)
        want[idx] = x[idx] * 3
        want.index_put_((dup,), x[dup], accumulate=True)
        lx, li, ld = _marked(x, dev), _marked(idx, dev), _marked(dup, dev)
        out = torch.zeros_like(lx)
        out[li] = lx[li] * 3
        out.index_put_((ld,), lx[ld], accumulate=True)
        torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)
        torch.testing.assert_close(out.sum(0).cpu(), want.sum(0), rtol=1e-6, atol=1e-6)
        compiles.append(_count("compiles") - before)
    assert compiles[1:] == [0, 0], compiles


def test_an_index_out_of_range_at_a_padded_count_still_fails(dev, device_values):
    """Eager's IndexError for a valid index past the operand's valid size:
    the padding past it does not let the write through."""
    x = _marked(torch.zeros(9), dev)
    bad = _marked(torch.tensor([1, 2, 9, 3, 4]), dev)  # 9 is outside 9 positions
    x[bad] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        x.cpu()


def _padded_batches(dev):
    """A loader's batches of 32, 32 and 30 labels, uploaded padded (the last
    one a padded upload's valid region) with their host copies."""
    labels = torch.randint(0, 5, (94,), generator=torch.Generator().manual_seed(7))
    data = torch.utils.data.TensorDataset(labels)
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    return labels, [y for (y,) in ltorch.DeviceLoader(loader, dev, dynamic=0, mark_step=False)]


def test_a_padded_upload_is_read_from_its_host_copy(dev):
    """The last, padded batch: read from its host copy (cut), and a value
    computed from it (``(y >= 2).sum()``) on the host, as for any small
    upload: no device read, no program."""
    labels, batches = _padded_batches(dev)
    y = batches[-1]
    assert y.shape == (30,)
    ltorch.mark_step(wait=True)
    reads, programs = _count("transfers_to_host"), _count("executions")
    assert torch.equal(y.cpu(), labels[64:])
    assert ((y >= 2).sum()).item() == (labels[64:] >= 2).sum().item()
    assert (_count("transfers_to_host") - reads, _count("executions") - programs) == (0, 0)


def test_a_padded_result_is_read_from_its_copy_mid_step(dev):
    """A padded program's result (a valid region): a read of an integer
    function of it beside pending work copies that result once and answers
    on the host (the pooler reads its levels so), where it ran a program."""
    x = _marked(torch.arange(11, dtype=torch.int64), dev)
    levels = x % 3  # a padded result once the step runs
    ltorch.mark_step(wait=True)
    pending = torch.randn(4, 4, device=dev).exp()  # the step's other work
    programs = _count("executions")
    for k in range(3):
        assert torch.equal(torch.where(levels == k)[0].cpu(), torch.arange(k, 11, 3))
    assert _count("executions") - programs == 0
    torch.testing.assert_close(pending.sum().cpu(), pending.cpu().sum())


def _where_then_write(mask, vals):
    idx = torch.where(mask)[0]  # one line: its count varies
    out = torch.zeros_like(vals)
    out[idx] = vals[idx] * 2
    return out


def test_indices_of_a_varying_count_are_padded_from_its_second_count_on(dev, device_values):
    """``torch.where(mask)[0]`` at one line with 5, 6, 7 and 5 nonzeros, then
    a gather and a write at them: the first count compiles as it is, the
    second in its bucket, the others compile nothing (each compiled before)."""
    compiles = []
    for k, n in enumerate((5, 6, 7, 5)):
        g = torch.Generator().manual_seed(k)
        mask = torch.zeros(12, dtype=torch.bool)
        mask[torch.randperm(12, generator=g)[:n]] = True
        vals = torch.randn(12, generator=g)
        before = _count("compiles")
        got = _where_then_write(mask.to(dev), vals.to(dev)).cpu()
        compiles.append(_count("compiles") - before)
        assert torch.equal(got, _where_then_write(mask, vals))
    assert compiles[2:] == [0, 0], compiles


def test_nms_of_a_varying_count_runs_in_its_bucket(dev, device_values):
    """torchvision's nms over 9 to 12 boxes (a padded count, as Faster
    R-CNN's boxes left per image) at one line: eager's kept indices, and no
    compile from the third count on (the pass runs over 16 rows)."""
    torchvision = pytest.importorskip("torchvision")
    compiles = []
    for k, n in enumerate((9, 11, 10, 12, 9)):  # kept: one box of each pair, 5, 6, 5, 6, 5 (the bucket of 8)
        g = torch.Generator().manual_seed(k)
        xy = (torch.arange(n) // 2 * 30.0)[:, None] + torch.rand(n, 2, generator=g)  # pairs far apart
        boxes = torch.cat([xy, xy + 10], 1)
        scores = torch.rand(n, generator=g)
        scores[1] = scores[0]  # a tie: the stable order decides
        want = torchvision.ops.nms(boxes, scores, 0.3)
        before = _count("compiles")
        got = torchvision.ops.nms(_marked(boxes, dev), _marked(scores, dev), 0.3).cpu()  # one line
        compiles.append(_count("compiles") - before)
        assert torch.equal(got, want), (n, got, want)
    assert compiles[2:] == [0, 0, 0], compiles


def _joined_and_split(a, b):
    joined = torch.cat([a, b]) * 2  # (a detection step's per-image boxes joined)
    first, second = joined.split([a.shape[0], b.shape[0]])  # (box_coder.encode's split)
    return joined.mean(0), first.amax(0), second.sum(0), torch.cat([second, first]).sum(0)


def test_values_of_two_padded_counts_joined_and_split_again(dev, device_values):
    """``torch.cat`` of two padded counts (9 and 5 rows, 10 and 6, 11 and 7:
    the buckets of 16 and 8), split back into them, joined the other way:
    eager's values, one program for the three pairs (each compiled before)."""
    compiles = []
    for n1, n2 in ((9, 5), (10, 6), (11, 7)):
        g = torch.Generator().manual_seed(n1)
        a, b = torch.randn(n1, 3, generator=g), torch.randn(n2, 3, generator=g)
        want = _joined_and_split(a, b)
        before = _count("compiles")
        got = _joined_and_split(_marked(a, dev), _marked(b, dev))
        ltorch.mark_step()
        for x, y in zip(got, want):
            torch.testing.assert_close(x.cpu(), y, rtol=1e-6, atol=1e-6)
        compiles.append(_count("compiles") - before)
    assert compiles[1:] == [0, 0], compiles


def test_a_mask_computed_in_a_padded_program_gives_its_indices_without_a_fallback(dev, device_values, no_fallback):
    """A sampler's ``torch.where(matched >= 1)`` where ``matched`` came out
    of a padded program (its handle a valid region): the mask's values are
    read cut, and its indices lowered, as for any mask (eager's kernel ran)."""
    x = _marked(torch.arange(11), dev)
    mask = x % 3 == 0
    ltorch.mark_step()
    assert torch.equal(torch.where(mask)[0].cpu(), torch.arange(0, 11, 3))
